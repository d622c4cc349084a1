"""Nsight Compute CSV reports (``ingest.ncu``) and the bottleneck class (``analysis.kernels.
bound``), issue 47 item 3 (the reader and the rule; the join to a trace's kernels and the
findings that cite the figures come next).

Built reports in both page layouts and both details-page generations (2020: ``Kernel Time``,
``SM [%]``; recent: ``Block Size``/``Grid Size``, rule rows and columns, ``us`` durations),
with ``==PROF==`` lines and thousands separators; the class rule against a table of cases
worked out by hand from NVIDIA's thresholds; the base name equal for a Kineto kernel name and
its ncu spelling, on every kernel name of the shared ResNet-50 trace.
"""

from __future__ import annotations

from pathlib import Path

import polars as pl
import pytest

from tests.conftest import shared_trace
from traceforensics.analysis.kernels.bound import balanced, base_name, bound_class, small_grid
from traceforensics.ingest.ncu import NCU_SCHEMA, read_ncu_csv
from traceforensics.model.errors import UnsupportedFormatError

NEW_HEAD = (
    '"ID","Process ID","Process Name","Host Name","Kernel Name","Context","Stream","Block Size",'
    '"Grid Size","Device","CC","Section Name","Metric Name","Metric Unit","Metric Value",'
    '"Rule Name","Rule Type","Rule Description","Estimated Speedup Type","Estimated Speedup"'
)
K0 = "void at::native::<unnamed>::vectorized_elementwise_kernel<4, float>(int, float *)"
K1 = "volta_scudnn_128x64_relu_medium_nn_v1"


def _new_row(i: int, kernel: str, section: str, metric: str, unit: str, value: str) -> str:
    ids = f'"{i}","4242","python","127.0.0.1","{kernel}","1","7","(128, 1, 1)","(1,024, 1, 1)"'
    return f'{ids},"0","7.0","{section}","{metric}","{unit}","{value}",'


def test_details_page_recent(tmp_path: Path) -> None:
    sol = "GPU Speed Of Light Throughput"
    lines = [
        "==PROF== Connected to process 4242",
        NEW_HEAD,
        _new_row(0, K0, sol, "Compute (SM) Throughput", "%", "12.31"),
        _new_row(0, K0, sol, "Memory Throughput", "%", "88.20"),
        _new_row(0, K0, sol, "Duration", "us", "1,234.56"),
        _new_row(0, K0, "Occupancy", "Achieved Occupancy", "%", "83.10"),
        _new_row(0, K0, "LaunchStats", "Waves Per SM", "", "0.50"),
        '"0","4242","python","127.0.0.1","k","1","7","","","0","7.0","SpeedOfLight","","","",'
        '"SOLBottleneck","OPT","This workload exhibits low compute throughput","global","12"',
        _new_row(1, K1, sol, "Compute (SM) Throughput", "%", "91.00"),
        _new_row(1, K1, sol, "Memory Throughput", "%", "40.00"),
        _new_row(1, K1, sol, "DRAM Throughput", "%", "35.5"),
        _new_row(1, K1, sol, "Duration", "ms", "2.5"),
        "==PROF== Disconnected from process 4242",
    ]
    src = tmp_path / "details.csv"
    src.write_text("\n".join(lines) + "\n")
    df = read_ncu_csv(src)
    assert df.schema == pl.Schema(NCU_SCHEMA)
    rows = df.to_dicts()
    assert [r["ncu_id"] for r in rows] == [0, 1]
    assert rows[0]["kernel"] == K0 and rows[0]["grid"] == "(1,024, 1, 1)"
    assert rows[0]["duration_ns"] == 1_234_560 and rows[1]["duration_ns"] == 2_500_000
    assert rows[0]["sm_pct"] == 12.31 and rows[0]["mem_pct"] == 88.2
    assert rows[0]["dram_pct"] is None and rows[1]["dram_pct"] == 35.5
    assert rows[0]["achieved_occupancy_pct"] == 83.1 and rows[0]["waves_per_sm"] == 0.5


def test_details_page_2020(tmp_path: Path) -> None:
    head = (
        '"ID","Process ID","Process Name","Host Name","Kernel Name","Kernel Time","Context",'
        '"Stream","Section Name","Metric Name","Metric Unit","Metric Value"'
    )
    ids = '"0","28439","cfd","127.0.0.1","step(int,float*)","2020-May-29 12:02:46","1","7"'
    lines = [
        head,
        f'{ids},"GPU Speed Of Light","SM [%]","%","22.48"',
        f'{ids},"GPU Speed Of Light","Memory [%]","%","46.47"',
        f'{ids},"GPU Speed Of Light","Duration","usecond","12.50"',
    ]
    src = tmp_path / "old.csv"
    src.write_text("\n".join(lines))
    (row,) = read_ncu_csv(src).to_dicts()
    assert (row["sm_pct"], row["mem_pct"], row["duration_ns"]) == (22.48, 46.47, 12_500)
    assert row["block"] is None and bound_class(row["sm_pct"], row["mem_pct"]) == "latency"


def test_raw_page(tmp_path: Path) -> None:
    counters = [
        "gpu__compute_memory_throughput.avg.pct_of_peak_sustained_elapsed",
        "gpu__time_duration.sum",
        "sm__throughput.avg.pct_of_peak_sustained_elapsed",
        "sm__warps_active.avg.pct_of_peak_sustained_active",
        "launch__func_cache_config",
    ]
    ids = ["ID", "Process ID", "Process Name", "Host Name", "Kernel Name", "Context", "Stream"]
    head = ",".join(f'"{c}"' for c in [*ids, *counters])
    units = ",".join(['""'] * len(ids) + ['"%"', '"ns"', '"%"', '"%"', '""'])
    row0 = f'"0","1","p","h","{K1}","1","7","41.20","182,336","88.70","24.95","CachePreferNone"'
    row1 = '"1","1","p","h","k2","1","7","70","1,000","65","50","CachePreferNone"'
    src = tmp_path / "raw.csv"
    src.write_text("\n".join([head, units, row0, row1, "==PROF== Report: r.ncu-rep"]))
    rows = read_ncu_csv(src).to_dicts()
    assert [(r["kernel"], r["duration_ns"], r["sm_pct"], r["mem_pct"]) for r in rows] == [
        (K1, 182_336, 88.7, 41.2),
        ("k2", 1_000, 65.0, 70.0),
    ]
    assert rows[0]["achieved_occupancy_pct"] == 24.95
    assert [bound_class(r["sm_pct"], r["mem_pct"]) for r in rows] == ["compute", "memory"]
    assert balanced(rows[1]["sm_pct"], rows[1]["mem_pct"])
    assert not balanced(rows[0]["sm_pct"], rows[0]["mem_pct"])


@pytest.mark.parametrize(
    "text",
    ["", "time,util\n1,2\n", '"ID","Kernel Name"\n', "not,a,csv\n\x00\x01"],
)
def test_not_a_report(text: str, tmp_path: Path) -> None:
    src = tmp_path / "x.csv"
    src.write_text(text)
    with pytest.raises(UnsupportedFormatError) as err:
        read_ncu_csv(src)
    assert str(err.value).startswith(str(src)) and "\n" not in str(err.value)


@pytest.mark.parametrize(
    ("sm", "mem", "cls"),
    [
        (59.9, 59.9, "latency"),
        (60.0, 10.0, "compute"),
        (10.0, 60.0, "memory"),
        (95.0, 94.0, "compute"),
        (85.0, 90.0, "memory"),
        (None, 50.0, "unknown"),
        (50.0, None, "unknown"),
    ],
)
def test_bound_class(sm: float | None, mem: float | None, cls: str) -> None:
    assert bound_class(sm, mem) == cls


def test_small_grid() -> None:
    assert small_grid(0.5) and not small_grid(1.0) and not small_grid(None)


def _ncu_spelling(name: str) -> str:
    """How ncu's demangler writes a name a Kineto trace writes (namespaces, pointer spacing,
    no space between closing brackets)."""
    out = name.replace("(anonymous namespace)", "<unnamed>").replace("*", " *")
    return out.replace("> >", ">>").replace(", ", ",")


def test_base_name_joins_trace_and_ncu_spellings() -> None:
    src = shared_trace("kineto/resnet50_v100_workers0.pt.trace.json.gz")
    from traceforensics.ingest import load_path

    names = (
        (load_path(src).events.filter(pl.col("kind") == "kernel").get_column("name").cast(str))
        .unique()
        .to_list()
    )
    assert len(names) > 20
    for name in names:
        base = base_name(name)
        assert base and "<" not in base and "(" not in base and "::" not in base, name
        assert base_name(_ncu_spelling(name)) == base, name
    assert base_name(K0) == "vectorized_elementwise_kernel"
    assert base_name("void at::native::(anonymous namespace)::f<float>(float*, int)") == "f"
