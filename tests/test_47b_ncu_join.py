"""``tf analyze TRACE --ncu REPORT.csv`` (issue 47 item 3): an Nsight Compute report joined to
the trace's kernels by base name and launch order (``analysis.kernels.ncu_join``), the
measured class on the top kernels and ops, ``kernel_efficiency`` citing measured figures.

Reports are built here in both page layouts: ``details`` (long: one row per launch and
metric) from the shared ResNet-50 trace's own first launches (real names, grids and blocks, in
launch order), and ``raw`` (wide, a units row) for a generated training loop
(``tools/synth.py``) whose GEMM kernel the report measures. Expected figures are computed
apart from the join: a report row made from trace launch i belongs to launch i's full name,
so the mean per name is taken over the rows built for it, never through ``base_name``.
"""

from __future__ import annotations

import json
import sys
from collections.abc import Callable
from dataclasses import replace
from pathlib import Path
from typing import Any

import polars as pl
import pytest

from tests.conftest import ROOT, run_cli, shared_trace
from traceforensics.analysis.findings import estimates as est
from traceforensics.analysis.kernels.bound import bound_class
from traceforensics.analysis.kernels.ncu_join import NcuMismatchError
from traceforensics.analysis.pipeline import analyze
from traceforensics.ingest import load_path
from traceforensics.ingest.ncu import NCU_SCHEMA, read_ncu_csv

sys.path.insert(0, str(ROOT / "tools"))
from synth import training_loop

RESNET = "kineto/resnet50_v100_workers0.pt.trace.json.gz"
DETAILS_HEAD = (
    '"ID","Process ID","Process Name","Host Name","Kernel Name","Context","Stream","Block Size",'
    '"Grid Size","Device","CC","Section Name","Metric Name","Metric Unit","Metric Value"'
)
#: details-page metric label -> (figure key of a row dict, unit)
DETAILS_METRICS = {
    "Compute (SM) Throughput": ("sm", "%"),
    "Memory Throughput": ("mem", "%"),
    "DRAM Throughput": ("dram", "%"),
    "Duration": ("dur_us", "us"),
    "Achieved Occupancy": ("occ", "%"),
    "Waves Per SM": ("waves", ""),
}
RAW_COUNTERS = {
    "sm__throughput.avg.pct_of_peak_sustained_elapsed": ("sm", "%"),
    "gpu__compute_memory_throughput.avg.pct_of_peak_sustained_elapsed": ("mem", "%"),
    "dram__throughput.avg.pct_of_peak_sustained_elapsed": ("dram", "%"),
    "gpu__time_duration.sum": ("dur_us", "usecond"),
    "sm__warps_active.avg.pct_of_peak_sustained_active": ("occ", "%"),
    "launch__waves_per_multiprocessor": ("waves", ""),
}
GEMM = "sm90_xmma_gemm_bf16bf16_bf16f32_f32_tn_n_tilesize128x128x64_warpgroupsize1x1x1_execute"


def _dim(t: Any) -> str:
    return "(" + ", ".join(f"{int(x):,}" for x in t) + ")"  # ncu's "(1,024, 1, 1)"


def write_details(path: Path, rows: list[dict[str, Any]]) -> Path:
    """A ``details`` page: per launch (``kernel, grid, block`` and figures) one row a metric
    (a figure that is None is left out, as ncu leaves out what it did not collect)."""
    lines = ["==PROF== Connected to process 77", DETAILS_HEAD]
    for i, r in enumerate(rows):
        ids = (
            f'"{i}","77","python","host","{r["kernel"]}","1","7","{_dim(r["block"])}",'
            f'"{_dim(r["grid"])}","0","7.0"'
        )
        for label, (key, unit) in DETAILS_METRICS.items():
            if r.get(key) is not None:
                lines.append(f'{ids},"SpeedOfLight","{label}","{unit}","{r[key]:,}"')
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    return path


def write_raw(path: Path, rows: list[dict[str, Any]]) -> Path:
    """A ``raw`` page (``--page raw``): one row per launch after a row of units."""
    ids = ["ID", "Process ID", "Kernel Name", "Block Size", "Grid Size"]
    head = [*ids, *RAW_COUNTERS]
    units = ["", "", "", "", "", *(u for _, u in RAW_COUNTERS.values())]
    out = [head, units]
    for i, r in enumerate(rows):
        figures = ["" if r.get(k) is None else f"{r[k]:,}" for k, _ in RAW_COUNTERS.values()]
        out.append([str(i), "77", r["kernel"], _dim(r["block"]), _dim(r["grid"]), *figures])
    text = "\n".join(",".join(f'"{v}"' for v in row) for row in out)
    path.write_text(text + "\n", encoding="utf-8")
    return path


def _figures(i: int) -> dict[str, float]:
    """Figures of report row ``i``: they vary by row, so a wrong pairing shows in the means."""
    return {
        "sm": 10.0 + (i * 37) % 80,
        "mem": 5.0 + (i * 53) % 90,
        "dram": 4.0 + (i * 29) % 85,
        "dur_us": 1.0 + i % 7,
        "occ": 20.0 + i % 60,
        "waves": 0.25 * (1 + i % 9),
    }


# -- the shared ResNet-50 trace, details page --------------------------------------------------


@pytest.fixture(scope="module")
def resnet() -> Any:
    return load_path(shared_trace(RESNET), use_cache=False)


def _resnet_rows(session: Any, n: int) -> tuple[list[dict[str, Any]], pl.DataFrame]:
    k = (
        session.events.filter(pl.col("kind") == "kernel")
        .sort("start_ns", "event_id")
        .select("name", "grid", "block", "rank", "device")
    )
    rows = [
        {"kernel": name, "grid": grid, "block": block, **_figures(i)}
        for i, (name, grid, block, _, _) in enumerate(k.head(n).iter_rows())
    ]
    return rows, k


def test_resnet_details_page_joins_by_name_and_order(resnet: Any, tmp_path: Path) -> None:
    rows, _ = _resnet_rows(resnet, 400)
    # a launch profiled with another grid: left out of the join, counted
    rows[5] = {**rows[5], "grid": (999_999, 1, 1)}
    report = read_ncu_csv(write_details(tmp_path / "resnet.csv", rows))
    assert report.height == 400
    a = analyze(resnet, ncu=report)
    j = a.kernels.ncu
    assert j is not None and j.launches == 400 and j.shape_mismatches == 1 and j.matched == 399
    assert j.unmatched_names == []
    # expected means per full kernel name, from the rows built for it (no name rule involved)
    built = pl.DataFrame(rows).with_row_index("i").filter(pl.col("i") != 5)
    want = built.group_by("kernel").agg(pl.col("sm", "dram", "occ", "waves").mean(), pl.len())
    expect = {r["kernel"]: r for r in want.iter_rows(named=True)}
    covered = [r for r in j.kernels if r.source == "ncu"]
    assert covered and j.kernels_covered == len(covered)
    for r in j.kernels:
        if r.name not in expect:
            assert r.source == "estimate" and r.ncu is None
            continue
        e, m = expect[r.name], r.ncu
        assert m is not None and r.source == "ncu" and m.launches == e["len"]
        assert m.sm_pct == pytest.approx(e["sm"]) and m.dram_pct == pytest.approx(e["dram"])
        assert m.achieved_occupancy_pct == pytest.approx(e["occ"])
        assert m.waves_per_sm == pytest.approx(e["waves"])
        assert m.bound == r.bound == bound_class(m.sm_pct, m.mem_pct)
    # the finding: measured ops cite their figures, the others say they are estimates
    (f,) = [f for f in a.findings if f.category == "kernel_efficiency"]
    details = [e.detail or "" for e in f.evidence]
    assert any("(Nsight Compute)" in d and "measured: " in d for d in details), details
    assert any("MFU, estimated" in d for d in details), details
    assert f.figures["ops_measured"] == sum(o.source == "ncu" for o in a.kernels.ops) > 0
    # the top kernels are the device's largest by total time, measured or not
    totals = (
        resnet.events.filter(pl.col("kind") == "kernel")
        .group_by("name")
        .agg(pl.col("dur_ns").sum())
        .sort("dur_ns", descending=True)
    )
    top = totals.head(len(j.kernels))
    assert [r.total_ns for r in j.kernels] == top.get_column("dur_ns").to_list()


def test_resnet_subset_profiled_later_in_the_run(resnet: Any, tmp_path: Path) -> None:
    """ncu ``-k`` one kernel: the report's k-th launch of the name is the trace's k-th."""
    _, k = _resnet_rows(resnet, 0)
    name = "volta_sgemm_64x64_nt"
    launches = k.filter(pl.col("name") == name)
    assert launches.height > 10
    rows = [
        {"kernel": name, "grid": g, "block": b, **_figures(i)}
        for i, (_, g, b, _, _) in enumerate(launches.head(10).iter_rows())
    ]
    a = analyze(resnet, ncu=read_ncu_csv(write_details(tmp_path / "k.csv", rows)))
    j = a.kernels.ncu
    assert j is not None and j.matched == 10 and j.shape_mismatches == 0
    (row,) = [r for r in j.kernels if r.name == name]
    assert row.ncu is not None and row.ncu.launches == 10
    assert row.ncu.sm_pct == pytest.approx(sum(r["sm"] for r in rows) / 10)


# -- a generated training loop, raw page: the classes and the finding --------------------------


@pytest.fixture(scope="module")
def loop(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return training_loop(steps=4).write_kineto(tmp_path_factory.mktemp("loop") / "loop.json")


def _gemm_rows(session: Any, n: int, **figures: float | None) -> list[dict[str, Any]]:
    k = (
        session.events.filter(pl.col("kind") == "kernel")
        .filter(pl.col("name").cast(pl.String).str.starts_with(GEMM))
        .sort("start_ns", "event_id")
        .head(n)
    )
    return [
        {"kernel": name, "grid": g, "block": b, "dur_us": 20.0, **figures}
        for name, g, b in k.select("name", "grid", "block").iter_rows()
    ]


@pytest.mark.parametrize(
    ("sm", "mem", "dram", "want"),
    [
        (59.9, 59.9, 10.0, "latency"),  # both below 60
        (60.0, 59.9, 10.0, "compute"),  # SM reaches 60
        (59.9, 60.0, 10.0, "memory"),  # memory reaches 60
        (80.0, 79.9, 10.0, "compute"),  # both high: the larger
        (79.9, 80.0, 10.0, "memory"),
        (70.0, None, 75.0, "memory"),  # no Memory Throughput: DRAM stands in
        (70.0, None, 50.0, "compute"),
        (None, 70.0, 70.0, "unknown"),  # no SM figure: no class
    ],
)
def test_classes_follow_the_thresholds(
    loop: Path, tmp_path: Path, sm: float | None, mem: float | None, dram: float | None, want: str
) -> None:
    session = load_path(loop, use_cache=False)
    rows = _gemm_rows(session, 8, sm=sm, mem=mem, dram=dram)
    a = analyze(session, ncu=read_ncu_csv(write_raw(tmp_path / "raw.csv", rows)))
    j = a.kernels.ncu
    assert j is not None and j.matched == 8
    (gemm,) = [r for r in j.kernels if r.name.startswith(GEMM)]
    assert gemm.ncu is not None and gemm.ncu.bound == want
    measured = [o for o in a.kernels.ops if o.ncu is not None]
    assert measured and all(o.ncu is not None and o.ncu.bound == want for o in measured)
    if want == "unknown":  # no class measured: the estimate stays, marked as such (item 5)
        assert gemm.source == "estimate" and {o.source for o in measured} == {"estimate"}
        assert gemm.bound != "unknown"
    else:
        assert gemm.source == "ncu" and gemm.bound == want
        assert {o.source for o in measured} == {"ncu"}


def test_finding_cites_measured_figures(loop: Path, tmp_path: Path) -> None:
    session = load_path(loop, use_cache=False)
    rows = _gemm_rows(session, 8, sm=38.0, mem=60.0, dram=59.0, occ=40.0, waves=3.0)
    a = analyze(session, ncu=read_ncu_csv(write_raw(tmp_path / "raw.csv", rows)))
    (f,) = [f for f in a.findings if f.category == "kernel_efficiency"]
    ops = a.kernels.ops
    measured = [o for o in ops if o.source == "ncu"]
    estimated = [o for o in ops if o.source == "estimate"]
    assert measured and estimated  # 8 of the GEMM's launches: some ops only
    # independent: measured ops against ATTAINABLE_SOL, the others against ATTAINABLE_MFU
    sol = 0.60 / est.ATTAINABLE_SOL
    want = sum(o.kernel_ns * (1 - sol) for o in measured)
    want += sum(o.kernel_ns * max(0.0, 1 - (o.mfu or 0) / est.ATTAINABLE_MFU) for o in estimated)
    assert abs(f.recoverable_ns - int(want)) <= 1
    # the memory figure cited is the one the class read (Memory Throughput), DRAM beside it
    cite = "measured: 38% SM, 60% memory (DRAM 59%) -> memory-bound (Nsight Compute)"
    details = [e.detail or "" for e in f.evidence]
    assert any(cite in d for d in details)
    # the largest shortfall names the title, the remedy and the confidence
    lost = {id(o): o.kernel_ns * (1 - sol) for o in measured}
    lost |= {id(o): o.kernel_ns * (1 - (o.mfu or 0) / est.ATTAINABLE_MFU) for o in estimated}
    top = max(ops, key=lambda o: lost[id(o)])
    if top.source == "ncu":
        assert cite in f.title and f.confidence == "medium"
        assert f.remedy.startswith("memory-bound (measured): move fewer bytes")
        assert "16-bit" not in f.remedy and "channels_last" not in f.remedy  # bf16 GEMMs
    else:
        assert "MFU, estimated)" in f.title and f.confidence == "low"
    assert f.figures["ops_measured"] == len(measured)
    # an uncovered kernel keeps the estimate, marked
    j = a.kernels.ncu
    assert j is not None
    assert {r.source for r in j.kernels if not r.name.startswith(GEMM)} == {"estimate"}


def test_latency_remedy_and_no_report(loop: Path, tmp_path: Path) -> None:
    session = load_path(loop, use_cache=False)
    a = analyze(session)
    assert a.kernels.ncu is None and {o.source for o in a.kernels.ops} == {"estimate"}
    plain = [f for f in a.findings if f.category == "kernel_efficiency"]
    assert plain and "estimated" not in plain[0].title  # without a report: as before
    rows = _gemm_rows(session, 36, sm=20.0, mem=15.0, dram=12.0, waves=0.5)
    b = analyze(session, ncu=read_ncu_csv(write_raw(tmp_path / "raw.csv", rows)))
    (f,) = [f for f in b.findings if f.category == "kernel_efficiency"]
    assert {o.source for o in b.kernels.ops} == {"ncu"}  # every GEMM launch measured
    # the busier unit (SM 20% here, memory 15%) against ATTAINABLE_SOL
    want = sum(o.kernel_ns for o in b.kernels.ops) * (1 - 0.20 / est.ATTAINABLE_SOL)
    assert abs(f.recoverable_ns - int(want)) <= 1
    assert "latency-bound (Nsight Compute)" in f.title
    assert f.remedy.startswith("latency-bound (measured")
    gemm = [r for r in b.kernels.ncu.kernels if r.name.startswith(GEMM)]  # type: ignore[union-attr]
    assert gemm[0].ncu is not None and gemm[0].ncu.small_grid


def test_compute_bound_remedy_keeps_the_preconditions(loop: Path, tmp_path: Path) -> None:
    """Compute-bound: faster math, as the table says, still checked against the trace (the
    loop's GEMMs already run bf16 on tensor cores: no "use bf16/tf32" advice)."""
    session = load_path(loop, use_cache=False)
    rows = _gemm_rows(session, 36, sm=62.0, mem=20.0, dram=20.0)
    a = analyze(session, ncu=read_ncu_csv(write_raw(tmp_path / "raw.csv", rows)))
    (f,) = [f for f in a.findings if f.category == "kernel_efficiency"]
    assert f.remedy.startswith("compute-bound (measured): the math units are the limit: ")
    assert f.figures["precondition"] == "matmuls_on_tensor_cores"
    assert "allow_tf32" not in f.remedy and "aligned shapes" in f.remedy


def test_nsys_export_joins_like_kineto(tmp_path: Path) -> None:
    """The same program written as an Nsight Systems export: the same launches measured."""
    trace = training_loop(steps=4)
    got = []
    for path in (trace.write_kineto(tmp_path / "t.json"), trace.write_nsys(tmp_path / "t.sqlite")):
        session = load_path(path, use_cache=False)
        rows = _gemm_rows(session, 8, sm=70.0, mem=30.0, dram=25.0)
        a = analyze(session, ncu=read_ncu_csv(write_raw(tmp_path / "raw.csv", rows)))
        j = a.kernels.ncu
        assert j is not None and j.matched == 8 and j.shape_mismatches == 0
        got.append(sorted((o.op, o.shapes, o.ncu.bound) for o in a.kernels.ops if o.ncu))
    assert got[0] and got[0] == got[1] and {b for _, _, b in got[0]} == {"compute"}


# -- the command line --------------------------------------------------------------------------


def test_cli_json_and_text(loop: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    session = load_path(loop, use_cache=False)
    csv = write_details(tmp_path / "d.csv", _gemm_rows(session, 8, sm=30.0, mem=85.0, dram=85.0))
    code, out, err = run_cli(["analyze", "--json", str(loop), "--ncu", str(csv)], capsys)
    assert code == 0, err
    doc = json.loads(out)
    assert doc["ncu"]["matched"] == 8 and doc["ncu"]["kernels_covered"] == 1
    (gemm,) = [k for k in doc["ncu"]["kernels"] if k["name"].startswith(GEMM)]
    assert gemm["source"] == "ncu" and gemm["bound"] == "memory"
    assert gemm["ncu"]["sm_pct"] == 30.0 and gemm["ncu"]["dram_pct"] == 85.0
    assert {o["source"] for o in doc["ops"]} == {"ncu", "estimate"}
    code, out, err = run_cli(["analyze", str(loop), "--ncu", str(csv)], capsys)
    assert code == 0, err
    assert "Kernel bounds (Nsight Compute: 8 of 8" in out and "memory*" in out
    code, out, _ = run_cli(["analyze", "--json", str(loop)], capsys)
    assert code == 0 and json.loads(out)["ncu"] is None
    md, html = tmp_path / "r.md", tmp_path / "r.html"
    argv = ["analyze", str(loop), "--ncu", str(csv), "--markdown", str(md), "--report", str(html)]
    code, _, err = run_cli(argv, capsys)
    assert code == 0, err
    assert "Nsight Compute" in md.read_text() and html.stat().st_size > 0


def test_cli_checks_grid_and_block(
    loop: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """``tf analyze`` keeps the kernels' grid and block for the join (``--ncu`` only)."""
    rows = _gemm_rows(load_path(loop, use_cache=False), 8, sm=30.0, mem=85.0)
    rows[2] = {**rows[2], "block": (256, 1, 1)}
    csv = write_raw(tmp_path / "r.csv", rows)
    code, out, err = run_cli(
        ["analyze", "--json", "--no-cache", str(loop), "--ncu", str(csv)], capsys
    )
    assert code == 0, err
    doc = json.loads(out)["ncu"]
    assert (doc["matched"], doc["shape_mismatches"]) == (7, 1)


@pytest.mark.parametrize("case", ["no_common", "not_ncu", "missing", "empty"])
def test_cli_wrong_file_exits_2_in_one_line(
    loop: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str], case: str
) -> None:
    bad = tmp_path / f"{case}.csv"
    if case == "no_common":
        rows = [
            {"kernel": "void other_kernel<float>(float*)", "grid": (1, 1, 1), "block": (32, 1, 1)}
        ]
        write_details(bad, [{**rows[0], **_figures(0)}])
    elif case == "not_ncu":
        bad.write_text("a,b,c\n1,2,3\n")
    elif case == "empty":
        bad.write_text("")
    code, out, err = run_cli(["analyze", str(loop), "--ncu", str(bad)], capsys)
    assert code == 2 and out == ""
    lines = err.strip().splitlines()
    assert len(lines) == 1 and str(bad) in lines[0], err
    if case == "no_common":
        assert f"no kernel of it is in {loop}: first names other_kernel" in lines[0]


def test_mismatch_error_names_the_report_names(loop: Path) -> None:
    session = load_path(loop, use_cache=False)
    report = pl.DataFrame(
        {"ncu_id": [0, 1], "kernel": ["void a<1>(int)", "b(float*)"]}
    ).with_columns(
        *(
            pl.lit(None, dtype=t).alias(c)
            for c, t in NCU_SCHEMA.items()
            if c not in ("ncu_id", "kernel")
        )
    )
    with pytest.raises(NcuMismatchError) as info:
        analyze(session, ncu=report)
    assert info.value.names == ["a", "b"]


# -- review fixes (items 1-10 of the reviewer's --ncu findings) -------------------------------


def _details_text(
    rows: list[tuple[int, int, str, Any, Any, list[tuple[str, str, str, str]]]],
) -> str:
    """A ``details`` page from ``(id, process, kernel, grid, block, [(section, label, unit,
    value)])`` rows (the device is the process's order: 77 -> 0, 78 -> 1)."""
    lines = [DETAILS_HEAD]
    for i, pid, name, g, b, metrics in rows:
        ids = (
            f'"{i}","{pid}","python","host","{name}","1","7","{_dim(b)}","{_dim(g)}",'
            f'"{pid - 77}","9.0"'
        )
        lines += [f'{ids},"{sec}","{lab}","{u}","{v}"' for sec, lab, u, v in metrics]
    return "\n".join(lines) + "\n"


def _gemm_launches(session: Any, n: int) -> list[tuple[str, Any, Any]]:
    return [(r["kernel"], r["grid"], r["block"]) for r in _gemm_rows(session, n)]


def test_bandwidth_in_byte_per_s_is_no_percentage(tmp_path: Path) -> None:
    """Item 1: ``--set full`` adds "Memory Throughput" in Gbyte/second (Memory Workload
    Analysis) after the % one; the % of peak stays (before: mem_pct 1234.5)."""
    sol = "GPU Speed Of Light Throughput"
    metrics = [
        ("Memory Workload Analysis", "Memory Throughput", "Gbyte/second", "2,000"),
        (sol, "Compute (SM) Throughput", "%", "30"),
        (sol, "Memory Throughput", "%", "85"),
        (sol, "Duration", "usecond", "20"),
        ("Memory Workload Analysis", "Memory Throughput", "Gbyte/second", "1,234.5"),
        ("Other", "Memory Throughput", "%", "11"),  # only the SOL figure counts
        ("Other", "Duration", "cycle", "99"),  # not a time unit: left out
    ]
    text = _details_text([(0, 77, "k", (1, 1, 1), (32, 1, 1), metrics)])
    (row,) = read_ncu_csv(_put(tmp_path / "full.csv", text)).to_dicts()
    assert (row["sm_pct"], row["mem_pct"], row["duration_ns"]) == (30.0, 85.0, 20_000)
    assert (row["process_id"], row["device"]) == (77, 0)


def _put(path: Path, text: str) -> Path:
    path.write_text(text, encoding="utf-8")
    return path


@pytest.mark.parametrize("names", ["demangled", "demangled_tight", "function"])
def test_resnet_names_that_collide_and_a_later_start(
    resnet: Any, tmp_path: Path, names: str
) -> None:
    """Item 2: the ResNet trace's six ``vectorized_elementwise_kernel<...>`` share one base
    name; ncu ``--launch-skip 1 --launch-count 60 -k regex:vectorized_elementwise``. Each full
    name gets its own SM figure, so a launch paired with another name's shows. Full names
    (``--print-kernel-base demangled``, also spelled without spaces) join on the full name;
    bare names (ncu's default) on the base name at the offset the grids and blocks agree on.
    Before: 49 pairs dropped for their shapes, 11 wrongly matched."""
    k = (
        resnet.events.filter(pl.col("kind") == "kernel")
        .filter(pl.col("name").cast(pl.String).str.contains("vectorized_elementwise_kernel"))
        .sort("start_ns", "event_id")
        .select(pl.col("name").cast(pl.String), "grid", "block")
    )
    launches = list(k.iter_rows())
    full = sorted({n for n, _, _ in launches})
    assert len(full) >= 2
    sm = {n: 10.0 + 10 * i for i, n in enumerate(full)}
    spelled: Callable[[str], str] = {
        "demangled": lambda n: n,
        "demangled_tight": lambda n: n.replace(", ", ",").replace("> >", ">>"),
        "function": lambda n: "vectorized_elementwise_kernel",
    }[names]
    rows = [
        (i, 77, spelled(n), g, b, [("SOL", "Compute (SM) Throughput", "%", str(sm[n]))])
        for i, (n, g, b) in enumerate(launches[1:61])
    ]
    for row in rows:
        row[5].append(("SOL", "Memory Throughput", "%", "5"))
    a = analyze(resnet, ncu=read_ncu_csv(_put(tmp_path / "skip.csv", _details_text(rows))))
    j = a.kernels.ncu
    assert j is not None and (j.matched, j.shape_mismatches) == (60, 0)
    seen = [r for r in j.kernels if r.ncu is not None and "elementwise" in r.name]
    assert seen
    for r in seen:  # independent: the SM written for the name's own launches
        assert r.ncu is not None and r.ncu.sm_pct == pytest.approx(sm[r.name]), r.name


def test_processes_of_one_report_are_not_mixed(
    loop: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Item 3: ``--target-processes all`` under DDP: two processes' launches interleave in one
    ID order (SM 20 and 80). One process is joined (before: a mean of both, 46.7) and the
    others are warned of."""
    session = load_path(loop, use_cache=False)
    rows: list[tuple[int, int, str, Any, Any, list[tuple[str, str, str, str]]]] = []
    for n, g, b in _gemm_launches(session, 8):
        for pid, sm in ((77, 20.0), (78, 80.0)):
            m = [("SOL", "Compute (SM) Throughput", "%", str(sm))]
            rows.append((len(rows), pid, n, g, b, [*m, ("SOL", "Memory Throughput", "%", "10")]))
    csv = _put(tmp_path / "mp.csv", _details_text(rows))
    a = analyze(session, ncu=read_ncu_csv(csv))
    j = a.kernels.ncu
    assert j is not None and (j.launches, j.matched, j.launches_left_out) == (16, 8, 8)
    assert (j.process_id, j.report_device) == (77, 0)
    (gemm,) = [r for r in j.kernels if r.name.startswith(GEMM)]
    assert gemm.ncu is not None and gemm.ncu.sm_pct == 20.0 and gemm.ncu.launches == 8
    code, out, err = run_cli(["analyze", "--json", str(loop), "--ncu", str(csv)], capsys)
    assert code == 0 and json.loads(out)["ncu"]["launches_left_out"] == 8
    assert "8 of 16 launches are of other processes" in err


def test_op_rows_are_joined_on_their_dtype(tmp_path: Path) -> None:
    """Item 4: aten::mm on the same shapes in fp32 (never profiled) and in bf16 (profiled):
    only the bf16 row is measured (before: the fp32 row too, at the bf16 GEMM's 90% SM)."""
    sys.path.insert(0, str(ROOT / "tools"))
    from synth import SynthTrace

    tr, t = SynthTrace(), 10_000
    gemms = (("float", "ampere_sgemm_128x64_nn"), ("c10::BFloat16", "sm80_xmma_gemm_bf16_nn"))
    for k in range(8):
        tr.cpu_range(f"ProfilerStep#{k + 1}", t, 900_000, kind="annotation")
        for i, (dt, kname) in enumerate(gemms):
            at = t + 1_000 + i * 400_000
            dims = {"Input Dims": [[1024, 1024], [1024, 1024]], "Input type": [dt, dt]}
            tr.cpu_range("aten::mm", at, 20_000, args=dims)
            tr.launch(kname, at + 1_000, 5_000, at + 10_000, 300_000 if i == 0 else 60_000)
        t += 1_000_000
    session = load_path(tr.write_kineto(tmp_path / "dt.json"), use_cache=False)
    bf16 = session.events.filter(pl.col("name").cast(pl.String).str.starts_with("sm80_xmma"))
    rows = [
        (
            i,
            77,
            n,
            g,
            b,
            [
                ("SOL", "Compute (SM) Throughput", "%", "90"),
                ("SOL", "Memory Throughput", "%", "30"),
            ],
        )
        for i, (n, g, b) in enumerate(bf16.select("name", "grid", "block").iter_rows())
    ]
    a = analyze(session, ncu=read_ncu_csv(_put(tmp_path / "dt.csv", _details_text(rows))))
    got = {o.dtype: (o.source, o.ncu) for o in a.kernels.ops if o.op == "aten::mm"}
    assert set(got) == {"fp32", "bf16"}
    assert got["fp32"] == ("estimate", None)
    assert got["bf16"][0] == "ncu" and got["bf16"][1] is not None
    assert got["bf16"][1].sm_pct == 90.0


def test_report_without_sm_keeps_the_estimate(loop: Path, tmp_path: Path) -> None:
    """Item 5: a report with duration and DRAM but no SM figure gives no class: the ops keep
    their estimate, the finding stays (before: it disappeared), marked estimated."""
    session = load_path(loop, use_cache=False)
    (plain,) = [f for f in analyze(session).findings if f.category == "kernel_efficiency"]
    rows = [
        (
            i,
            77,
            n,
            g,
            b,
            [("SOL", "Duration", "usecond", "20"), ("SOL", "DRAM Throughput", "%", "40")],
        )
        for i, (n, g, b) in enumerate(_gemm_launches(session, 100))
    ]
    a = analyze(session, ncu=read_ncu_csv(_put(tmp_path / "dur.csv", _details_text(rows))))
    (f,) = [f for f in a.findings if f.category == "kernel_efficiency"]
    assert f.recoverable_ns == plain.recoverable_ns and "estimated" in f.title
    assert f.confidence == "low" and "ops_measured" not in f.figures
    assert {o.source for o in a.kernels.ops} == {"estimate"}
    assert any(o.ncu is not None and o.ncu.bound == "unknown" for o in a.kernels.ops)


def test_cited_figures_are_the_ones_the_class_read(
    loop: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Item 6: class from Memory Throughput (70%), DRAM 20%: the finding cites 70% memory and
    the table's mem column says 70 (before: "30% SM, 20% DRAM -> memory-bound")."""
    session = load_path(loop, use_cache=False)
    m = [
        ("SOL", "Compute (SM) Throughput", "%", "30"),
        ("SOL", "Memory Throughput", "%", "70"),
        ("SOL", "DRAM Throughput", "%", "20"),
    ]
    rows = [(i, 77, n, g, b, m) for i, (n, g, b) in enumerate(_gemm_launches(session, 100))]
    csv = _put(tmp_path / "mem.csv", _details_text(rows))
    a = analyze(session, ncu=read_ncu_csv(csv))
    (f,) = [f for f in a.findings if f.category == "kernel_efficiency"]
    assert "measured: 30% SM, 70% memory (DRAM 20%) -> memory-bound" in f.title
    assert "20% DRAM ->" not in f.title
    code, out, err = run_cli(["analyze", str(loop), "--ncu", str(csv)], capsys)
    assert code == 0, err
    head = next(ln for ln in out.splitlines() if "class" in ln and "waves" in ln)
    (line,) = [ln for ln in out.splitlines() if "memory*" in ln and GEMM[:30] in ln]
    cols, cells = head.split(), line.split()
    at, cls = cols.index("class"), cells.index("memory*")
    assert cols[at + 1 : at + 4] == ["SM", "mem", "DRAM"]
    assert cells[cls + 1 : cls + 4] == ["30%", "70%", "20%"]


def test_remedies_leave_out_what_the_trace_does(loop: Path, tmp_path: Path) -> None:
    """Item 7: memory-bound bf16 GEMMs: no "16-bit activations", no channels_last without a
    convolution (before: both); an fp32 convolution gets both; latency-bound where
    torch.compile's kernels are most of the kernels: no fusion."""
    from traceforensics.analysis.facts import TraceFacts
    from traceforensics.analysis.findings.busy_losses import bound_remedy
    from traceforensics.analysis.program import Program

    session = load_path(loop, use_cache=False)
    m = [("SOL", "Compute (SM) Throughput", "%", "30"), ("SOL", "Memory Throughput", "%", "70")]
    rows = [(i, 77, n, g, b, m) for i, (n, g, b) in enumerate(_gemm_launches(session, 100))]
    a = analyze(session, ncu=read_ncu_csv(_put(tmp_path / "mem.csv", _details_text(rows))))
    (f,) = [f for f in a.findings if f.category == "kernel_efficiency"]
    assert f.remedy.startswith("memory-bound (measured)")
    assert "16-bit" not in f.remedy and "channels_last" not in f.remedy
    top = a.kernels.ops[0]
    conv = replace(top, op="aten::convolution", family="conv", dtype="fp32")
    plain = Program("pytorch", "nvidia", "", TraceFacts())
    fix = bound_remedy("memory", plain, "table", conv)
    assert "16-bit activations" in fix and "channels_last" in fix
    compiled = Program("pytorch", "nvidia", "", TraceFacts(compiled_kernels=9, kernel_rows=10))
    assert "fusion" not in bound_remedy("latency", compiled, "table", top)
    assert "fusion" in bound_remedy("latency", plain, "table", top)


def test_csv_field_too_large_exits_2(
    loop: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Item 8: a quoted field over csv's 128 KiB limit: exit 2, one line naming the file
    (before: exit 3, "internal error: field larger than field limit")."""
    bad = _put(tmp_path / "huge.csv", DETAILS_HEAD + '\n"0","' + "x" * 200_000 + '"\n')
    code, out, err = run_cli(["analyze", str(loop), "--ncu", str(bad)], capsys)
    assert code == 2 and out == ""
    (line,) = err.strip().splitlines()
    assert str(bad) in line and "internal" not in line


def test_report_is_read_first_and_dask_names_ncu(
    loop: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Item 9: a wrong report fails before the trace loads (a missing trace is not what is
    named); ``--dask`` with ``--ncu`` says --ncu is why (before: figures and --from/--to)."""
    bad = _put(tmp_path / "bad.csv", "a,b\n1,2\n")
    code, _, err = run_cli(["analyze", str(tmp_path / "no_trace.json"), "--ncu", str(bad)], capsys)
    assert code == 2 and str(bad) in err and "no_trace" not in err
    rows = [(0, 77, GEMM, (1, 1, 1), (32, 1, 1), [("SOL", "Duration", "usecond", "1")])]
    good = _put(tmp_path / "good.csv", _details_text(rows))
    ranks = tmp_path / "ranks"
    ranks.mkdir()
    code, _, err = run_cli(["analyze", str(ranks), "--dask", "local", "--ncu", str(good)], capsys)
    (line,) = err.strip().splitlines()
    assert code == 2 and line.startswith("tf: error: --dask: --ncu read every rank's events"), line


def test_findings_doc_states_the_measured_path() -> None:
    """Item 10: docs/findings.md's kernel_efficiency row gives the measured rule and its
    confidence, as ``busy_losses.efficiency_finding`` does."""
    text = (ROOT / "docs" / "findings.md").read_text(encoding="utf-8")
    (row,) = [ln for ln in text.splitlines() if ln.startswith("| `kernel_efficiency` |")]
    for word in ("ATTAINABLE_SOL", f"{est.ATTAINABLE_SOL:g}", "ops_measured", "`medium`", "`low`"):
        assert word in row, word
