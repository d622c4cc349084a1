"""The synthetic trace writers (tools/synth*.py): raw format checks and round trips.

Raw checks read the written files with json/sqlite3 only; round trips go through
``traceforensics.ingest.load_path``.
"""

from __future__ import annotations

import gzip
import json
import sqlite3
from pathlib import Path
from typing import Any

import pytest

import synth
from synth_nsys import global_tid, short_kernel_name
from tests.conftest import nonempty
from traceforensics.ingest import load_path

ROOT = Path(__file__).resolve().parents[1]


BASE = 1_700_000_000_000_000_000
STALL_CAUSES = synth.STALL_CAUSES


def _loader(fmt: str) -> Any:
    """``load_path`` (one loader for both formats; ``fmt`` names the writer under test)."""
    assert fmt in ("kineto", "nsys")
    return load_path


def _small() -> synth.SynthTrace:
    tr = synth.SynthTrace(pid=4242)
    tr.cpu_range("ProfilerStep#3", 0, 900_000, kind="annotation")
    tr.cpu_range(
        "aten::mm",
        10_000,
        20_000,
        args={"Input Dims": [[64, 128], [128, 256]], "Input type": ["float", "float"]},
    )
    tr.launch("gemm_kernel", 12_000, 4_000, 20_001, 7_777, grid=(2, 4, 1), block=(256, 1, 1))
    tr.launch(
        "",
        40_000,
        300_000,
        300_123,
        33_333,
        kind="memcpy",
        api="cudaMemcpyAsync",
        copy_kind="h2d",
        src_mem="pageable",
        dst_mem="device",
        bytes=1 << 20,
    )
    tr.launch("", 400_000, 3_000, 400_500, 1_001, kind="memset", api="cudaMemsetAsync", bytes=64)
    corr = tr.new_correlation()
    tr.api("cudaStreamSynchronize", 410_000, 50_000, correlation=corr)
    tr.gpu_sync("Stream Sync", 410_000, 50_000, correlation=corr)
    tr.cpu_range("write", 500_000, 100_000, kind="os_call")
    tr.launch("ncclDevKernel_AllReduce_Sum_bf16_RING_LL", 700_000, 5_000, 710_000, 9, stream=20)
    return tr


def test_kineto_raw_times_ids_and_flows(tmp_path: Path) -> None:
    tr = _small()
    path = tr.write_kineto(tmp_path / "t.pt.trace.json.gz")
    doc = json.loads(gzip.decompress(path.read_bytes()))
    assert doc["baseTimeNanoseconds"] == BASE
    evs = doc["traceEvents"]
    gpu = [e for e in evs if e.get("cat") in ("kernel", "gpu_memcpy", "gpu_memset")]
    want = sorted((e.start_ns, e.dur_ns, e.name) for e in tr.of_kind("kernel", "memcpy", "memset"))
    got = sorted(
        (round(float(e["ts"]) * 1000), round(float(e["dur"]) * 1000), e["name"]) for e in gpu
    )
    assert got == want
    assert "Memcpy HtoD (Pageable -> Device)" in {e["name"] for e in gpu}
    # every GPU op's correlation has a runtime call and an ac2g s/f pair
    runtime = {e["args"]["correlation"]: e for e in evs if e.get("cat") == "cuda_runtime"}
    flows = {(e["ph"], e["id"]) for e in evs if e.get("cat") == "ac2g"}
    for e in nonempty(gpu):
        corr = e["args"]["correlation"]
        assert corr in runtime
        assert ("s", corr) in flows and ("f", corr) in flows
    # the GEMM inherits the External id of the enclosing aten::mm, which carries the shapes
    mm = next(e for e in evs if e.get("name") == "aten::mm")
    gemm = next(e for e in gpu if e["name"] == "gemm_kernel")
    assert gemm["args"]["External id"] == mm["args"]["External id"]
    assert mm["args"]["Input Dims"] == [[64, 128], [128, 256]]
    assert gemm["args"]["grid"] == [2, 4, 1]
    assert any(e.get("name") == "os:write" and e["cat"] == "user_annotation" for e in evs)
    assert doc["deviceProperties"][0]["numSms"] == 132


def test_kineto_deterministic_bytes(tmp_path: Path) -> None:
    a = synth.training_loop().write_kineto(tmp_path / "a.json.gz").read_bytes()
    b = synth.training_loop().write_kineto(tmp_path / "b.json.gz").read_bytes()
    assert a == b


def test_nsys_raw_tables(tmp_path: Path) -> None:
    tr = _small()
    con = sqlite3.connect(tr.write_nsys(tmp_path / "t.sqlite"))
    meta = dict(con.execute("SELECT name, value FROM META_DATA_EXPORT").fetchall())
    assert meta["EXPORT_SCHEMA_VERSION"].startswith("3.")
    kernels = con.execute(
        "SELECT k.start, k.end - k.start, s.value FROM CUPTI_ACTIVITY_KIND_KERNEL k"
        " JOIN StringIds s ON s.id = k.demangledName"
    ).fetchall()
    assert sorted(kernels) == sorted((e.start_ns, e.dur_ns, e.name) for e in tr.of_kind("kernel"))
    copy = con.execute(
        "SELECT o.name, s.name, d.name FROM CUPTI_ACTIVITY_KIND_MEMCPY m"
        " JOIN ENUM_CUDA_MEMCPY_OPER o ON o.id = m.copyKind"
        " JOIN ENUM_CUDA_MEM_KIND s ON s.id = m.srcKind"
        " JOIN ENUM_CUDA_MEM_KIND d ON d.id = m.dstKind"
    ).fetchone()
    assert copy == (
        "CUDA_MEMCPY_KIND_HTOD",
        "CUDA_MEMOPR_MEMORY_KIND_PAGEABLE",
        "CUDA_MEMOPR_MEMORY_KIND_DEVICE",
    )
    texts = [r[0] for r in con.execute("SELECT text FROM NVTX_EVENTS WHERE eventType = 59")]
    assert "aten::mm, sizes = [[64, 128], [128, 256]]" in texts
    gtid = con.execute("SELECT DISTINCT globalTid FROM CUPTI_ACTIVITY_KIND_RUNTIME").fetchall()
    assert gtid == [(global_tid(4242, 1),)]
    assert (gtid[0][0] >> 24) & 0xFFFFFF == 4242 and gtid[0][0] & 0xFFFFFF == 1
    names = {
        r[0]
        for r in con.execute(
            "SELECT s.value FROM CUPTI_ACTIVITY_KIND_RUNTIME r JOIN StringIds s ON s.id = r.nameId"
        )
    }
    assert {"cudaLaunchKernel_v7000", "cudaStreamSynchronize_v3020"} <= names
    osrt = con.execute("SELECT start, end FROM OSRT_API").fetchall()
    assert osrt == [(500_000, 600_000)]
    sync = con.execute("SELECT syncType FROM CUPTI_ACTIVITY_KIND_SYNCHRONIZATION").fetchall()
    assert sync == [(3,)]


def test_short_kernel_name() -> None:
    name = "void at::native::vectorized_elementwise_kernel<4, F, std::array<char*, 3ul> >(int, F)"
    assert short_kernel_name(name) == "vectorized_elementwise_kernel"
    assert short_kernel_name("ampere_sgemm_128x64_nn") == "ampere_sgemm_128x64_nn"


@pytest.mark.parametrize("cause", STALL_CAUSES)
def test_stall_scenario_gap_matches_expectation(cause: str) -> None:
    """The device idle of a stall scenario equals the expected attribution total."""
    tr = synth.stall_scenario(cause, 1_234_567)
    busy = tr.busy_union()
    idle = tr.idle_in(busy[0][0], busy[-1][1])
    assert idle == sum(tr.expected_idle_by_cause.values())
    assert tr.expected_idle_by_cause[cause] == 1_234_567


@pytest.mark.parametrize("fmt", ["kineto", "nsys"])
def test_round_trip_gpu_ops_exact(tmp_path: Path, fmt: str) -> None:
    load_path = _loader(fmt)
    tr = synth.training_loop(checkpoint_steps=(2,))
    path = (
        tr.write_kineto(tmp_path / "t.pt.trace.json.gz")
        if fmt == "kineto"
        else tr.write_nsys(tmp_path / "t.sqlite")
    )
    session = load_path(path)
    ev = session.events
    offset = BASE if fmt == "kineto" else 0
    for kind in ("kernel", "memcpy", "memset", "gpu_sync"):
        want = sorted((e.start_ns + offset, e.dur_ns, e.stream) for e in tr.of_kind(kind))
        rows = ev.filter(ev["kind"] == kind).select("start_ns", "dur_ns", "stream").rows()
        assert sorted(rows) == want, kind
    # correlations of kernels link to a cuda_api row with the launch's start
    api = ev.filter(ev["kind"] == "cuda_api")
    api_start = dict(zip(api["correlation"].to_list(), api["start_ns"].to_list(), strict=True))
    for e in nonempty(tr.of_kind("kernel")):
        launch = next(a for a in tr.of_kind("cuda_api") if a.correlation == e.correlation)
        assert api_start[e.correlation] == launch.start_ns + offset
    assert session.meta.devices[0].sm_count == 132
    host = ev.filter(ev["kind"].is_in(["annotation", "cpu_op"]))
    steps = sorted(n for n in host["name"].cast(str).to_list() if n.startswith("ProfilerStep#"))
    assert steps == [f"ProfilerStep#{i}" for i in range(2, 8)]


def test_example_is_current_and_small() -> None:
    """examples/synthetic_training.pt.trace.json.gz is what tools/make_example.py writes."""
    example = ROOT / "examples" / "synthetic_training.pt.trace.json.gz"
    assert example.exists(), "the bundled example is missing: run make fixtures"
    import make_example

    fresh = make_example.training_loop(steps=6, checkpoint_steps=(3,))
    assert example.stat().st_size < 200_000
    text = gzip.decompress(example.read_bytes()).decode()
    from synth_kineto import kineto_text

    assert text == kineto_text(fresh)


@pytest.mark.parametrize("fmt", ["kineto", "nsys"])
@pytest.mark.parametrize("cause", STALL_CAUSES)
def test_stall_scenario_attribution(tmp_path: Path, fmt: str, cause: str) -> None:
    """End to end: each injected stall is attributed to its cause (within 1% of its length)."""
    load_path = _loader(fmt)
    from traceforensics.analysis import AnalysisOptions, analyze

    tr = synth.stall_scenario(cause, 1_500_000)
    path = (
        tr.write_kineto(tmp_path / "s.json.gz")
        if fmt == "kineto"
        else tr.write_nsys(tmp_path / "s.sqlite")
    )
    dev = analyze(load_path(path), AnalysisOptions.of(window="device")).devices[0]
    assert abs(dev.idle_by_cause.get(cause, 0) - 1_500_000) <= 15_000
    assert dev.idle_ns == sum(tr.expected_idle_by_cause.values())
