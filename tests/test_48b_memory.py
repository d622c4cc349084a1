"""Issue 48 item 2, memory over time: built traces with allocator events in both formats
(a churny allocator, ``empty_cache`` in the loop), a ``capture(profile_memory=True)`` run of
the CPU training loop, and every shared trace.

Truth is computed independently of the analysis: peaks and totals from the builder's own
event list (``synth_memory.MemoryTrace.totals``), churn from the built events inside the
built step ranges, the allocator's idle from the builder's busy union (``SynthTrace.idle_in``)
over the union of its allocator calls; the capture's from the raw trace JSON.
"""

from __future__ import annotations

import gzip
import importlib.util
import json
import sys
from pathlib import Path
from typing import Any

import pytest

import traceforensics
from tests.conftest import ROOT, kineto_trace_files, nsys_trace_files, shared_trace
from traceforensics.analysis.memory import DeviceMemory
from traceforensics.analysis.memory.results import (
    RESERVED_UNUSED_MIN_BYTES,
    RESERVED_UNUSED_RATIO,
)
from traceforensics.analysis.pipeline import Analysis
from traceforensics.report.memory_text import (
    memory_html,
    memory_markdown_lines,
    memory_text_lines,
)

sys.path.insert(0, str(ROOT / "tools"))

from synth_memory import (
    MB,
    MemoryTrace,
    memory_loop,
)

FORMATS = ("kineto", "nsys")


def _analyze(mt: MemoryTrace, fmt: str, tmp: Path) -> tuple[Analysis, int]:
    """The analysis of the built trace written in ``fmt``, and the offset of its clock (the
    Kineto table is on the epoch clock: built time + ``base_ns``)."""
    if fmt == "kineto":
        path, offset = mt.write_kineto(tmp / "m.pt.trace.json"), mt.tr.base_ns
    else:
        path, offset = mt.write_nsys(tmp / "m.sqlite"), 0
    return traceforensics.analyze(traceforensics.load(path)), offset


def _one(analysis: Analysis) -> DeviceMemory:
    assert len(analysis.memory) == 1
    return analysis.memory[0]


def _steps(mt: MemoryTrace) -> list[tuple[str, int, int]]:
    return sorted(
        (e.name, e.start_ns, e.end_ns)
        for e in mt.tr.events
        if e.kind == "annotation" and e.name.startswith("ProfilerStep#")
    )


_CALLS = ("cudaMalloc", "cudaFree", "empty_cache")


def _merged_calls(mt: MemoryTrace) -> list[list[int]]:
    """The union of the built allocator calls and ``empty_cache`` ranges."""
    merged: list[list[int]] = []
    for s, e in sorted((e.start_ns, e.end_ns) for e in mt.tr.events if e.name in _CALLS):
        if merged and s <= merged[-1][1]:
            merged[-1][1] = max(merged[-1][1], e)
        else:
            merged.append([s, e])
    return merged


def _allocator_truth(mt: MemoryTrace) -> int:
    """GPU idle (builder's busy union) inside the union of the allocator calls."""
    merged = _merged_calls(mt)
    busy = mt.tr.busy_union()
    lo, hi = busy[0][0], busy[-1][1]  # the analysis window: first to last GPU work
    return sum(mt.tr.idle_in(max(s, lo), min(e, hi)) for s, e in merged if min(e, hi) > max(s, lo))


@pytest.mark.parametrize("fmt", FORMATS)
@pytest.mark.parametrize(
    ("steps", "empty_cache_step", "segment_mb"),
    [(5, 3, 80), (3, None, 64), (2, 0, 200), (4, 1, 400)],
)
def test_built_memory_matches_truth(
    tmp_path: Path, fmt: str, steps: int, empty_cache_step: int | None, segment_mb: int
) -> None:
    mt = memory_loop(steps, empty_cache_step=empty_cache_step, segment_bytes=segment_mb * MB)
    analysis, offset = _analyze(mt, fmt, tmp_path)
    mem = _one(analysis)
    assert (mem.rank, mem.device, mem.device_type) == (0, 0, "cuda")
    # nsys records the segments (what CUDA sees) and no reserved; Kineto the blocks + totals
    peak, at = mt.peak(segments=fmt == "nsys")
    assert (mem.peak_allocated_bytes, mem.peak_at_ns) == (peak, at + offset)
    totals = {t: (a, r) for t, a, r, _e in mt.totals()}
    if fmt == "kineto":
        assert mem.reserved_known
        assert mem.peak_reserved_bytes == mt.peak(segments=True)[0]
        frag = totals[at][1] - totals[at][0]
        assert mem.fragmentation_bytes == frag == 3 * (segment_mb - 64) * MB
        far = totals[at][1] >= RESERVED_UNUSED_RATIO * totals[at][0]
        assert mem.reserved_unused == (frag >= RESERVED_UNUSED_MIN_BYTES and far)
        assert mem.reserved_unused == (segment_mb == 400)
    else:
        assert not mem.reserved_known and mem.fragmentation_bytes == 0
        assert mem.peak_reserved_bytes == mem.peak_allocated_bytes
    # Kineto: the op on the event's thread; nsys: on the thread of its cudaMalloc
    assert mem.peak_op == "aten::empty"
    # churn per step: the built events (blocks for Kineto, segments for nsys) in each step
    built = _steps(mt)
    assert [c.step for c in mem.churn] == [n for n, _s, _e in built]
    for c, (_n, s, e) in zip(mem.churn, built, strict=True):
        inside = [x for x in mt.events if s <= x.t_ns < e and x.segment == (fmt == "nsys")]
        assert c.mallocs == sum(x.bytes > 0 for x in inside)
        assert c.frees == sum(x.bytes < 0 for x in inside)
        assert c.malloc_bytes == sum(x.bytes for x in inside if x.bytes > 0)
        assert (c.start_ns, c.end_ns) == (s + offset, e + offset)
    # the allocator: its calls, the idle the idle pass attributed to them, the finding
    # the empty_cache range and the cudaFree inside it are one call
    n_calls = 2 * steps + (empty_cache_step is not None)
    assert mem.allocator_calls == n_calls
    assert mem.empty_cache_calls == (empty_cache_step is not None)
    truth = _allocator_truth(mt)
    assert mem.allocator_idle_ns == truth > 0
    assert analysis.devices[0].idle_by_cause["memory_management"] == truth
    assert sum(c.allocator_idle_ns for c in mem.churn) == truth
    churn = [f for f in analysis.findings if f.category == "allocator_churn"]
    assert len(churn) == 1 and churn[0].recoverable_ns == mem.loop_allocator_idle_ns
    # the same time is not also a memory_management finding (counted once)
    assert not [f for f in analysis.findings if f.category == "memory_management"]
    # reserved far above allocated: a finding with no time to give back, ranked last
    unused = [f for f in analysis.findings if f.category == "reserved_unused"]
    assert len(unused) == int(mem.reserved_unused)
    if unused:
        assert unused[0].recoverable_ns == 0 and analysis.findings[-1] is unused[0]
        assert unused[0].figures["fragmentation_bytes"] == 3 * (segment_mb - 64) * MB
    assert ("no torch.cuda.empty_cache()" in churn[0].remedy) == (empty_cache_step is not None)
    assert churn[0].evidence and churn[0].evidence[0].name in ("cudaMalloc", "cudaFree")
    # the figure's idle spans are inside allocator calls and add up to the overlap
    assert sum(e - s for s, e in mem.idle_calls) == truth


@pytest.mark.parametrize("fmt", FORMATS)
def test_json_and_report_sections(tmp_path: Path, fmt: str) -> None:
    analysis, _ = _analyze(memory_loop(3, empty_cache_step=1), fmt, tmp_path)
    doc = json.loads(json.dumps(analysis.to_json()))
    (rec,) = doc["memory"]
    for key in ("rank", "device", "peak_allocated_bytes", "peak_reserved_bytes", "peak_at_ns"):
        assert isinstance(rec[key], int)
    assert len(rec["churn"]) == 3 and {"step", "mallocs", "free_bytes"} <= set(rec["churn"][0])
    assert "series" not in rec and "idle_calls" not in rec
    text = "\n".join(memory_text_lines(analysis))
    assert text.startswith("Memory:") and "allocator: 7 calls, 1 empty_cache" in text
    assert memory_markdown_lines(analysis)[0] == "## Memory"
    assert memory_html(analysis).startswith("<section class='memory'>")


def test_no_memory_events_no_section(tmp_path: Path) -> None:
    mt = memory_loop(2)
    mt.events.clear()
    analysis, _ = _analyze(mt, "kineto", tmp_path)
    assert analysis.memory == [] and memory_text_lines(analysis) == []
    assert memory_html(analysis) == "" and analysis.to_json()["memory"] == []
    assert not [f for f in analysis.findings if f.category == "allocator_churn"]


def test_figure_renders(tmp_path: Path) -> None:
    pytest.importorskip("matplotlib")
    from traceforensics.report.plot_memory import figure_memory

    analysis, _ = _analyze(memory_loop(5), "kineto", tmp_path)
    fig = figure_memory(analysis)
    out = tmp_path / "memory.png"
    fig.savefig(out, dpi=60)
    assert out.stat().st_size > 5_000
    ax = fig.axes[0]
    assert len(ax.lines) == 3  # allocated, reserved, the peak marker
    assert len(ax.patches) == len(analysis.memory[0].idle_calls) > 0


def _raw_memory(trace: Path) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    doc = json.loads(gzip.decompress(trace.read_bytes()))
    events = doc["traceEvents"]
    mem = [e for e in events if e.get("name") == "[memory]"]
    steps = [e for e in events if str(e.get("name", "")).startswith("ProfilerStep#")]
    return mem, steps


def test_capture_profile_memory_cpu_loop(tmp_path: Path) -> None:
    torch = pytest.importorskip("torch")
    spec = importlib.util.spec_from_file_location("ts", ROOT / "tests/data/train_small.py")
    assert spec is not None and spec.loader is not None
    small = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(small)
    data = torch.utils.data.DataLoader(small.SlowDataset(12 * 4, 0.0005), batch_size=4)
    model = torch.nn.Sequential(torch.nn.Linear(64, 32), torch.nn.ReLU(), torch.nn.Linear(32, 8))
    opt = torch.optim.SGD(model.parameters(), lr=0.01)
    with traceforensics.capture(tmp_path, profile_memory=True, print_verdict=False) as cap:
        for x, y in cap.loader(data):
            loss = torch.nn.functional.mse_loss(model(x), y)
            opt.zero_grad()
            loss.backward()
            opt.step()
    (trace,) = cap.traces
    analysis = traceforensics.analyze(traceforensics.load(trace))
    mem = _one(analysis)
    assert (mem.device, mem.device_type, mem.reserved_known) == (-1, "cpu", False)
    raw, steps = _raw_memory(trace)
    assert mem.n_events == len(raw) > 0
    peak = max(e["args"]["Total Allocated"] for e in raw)
    assert mem.peak_allocated_bytes == peak and mem.peak_op is not None
    assert len(mem.churn) == len(steps) == 5
    for c, s in zip(mem.churn, sorted(steps, key=lambda e: e["ts"]), strict=True):
        lo, hi = s["ts"], s["ts"] + s["dur"]
        inside = [e["args"]["Bytes"] for e in raw if lo <= e["ts"] < hi]
        assert c.mallocs == sum(b > 0 for b in inside) > 0
        assert c.frees == sum(b < 0 for b in inside)
    assert mem.allocator_calls == 0 and analysis.devices == []


@pytest.mark.parametrize("rel", [*kineto_trace_files(), *nsys_trace_files()])
def test_shared_traces_analyse_with_memory(rel: str) -> None:
    analysis = traceforensics.analyze(traceforensics.load(shared_trace(rel)))
    doc = analysis.to_json()
    assert isinstance(doc["memory"], list)
    for m in analysis.memory:
        assert m.peak_reserved_bytes >= m.peak_allocated_bytes or not m.reserved_known
        assert m.first_ns <= m.peak_at_ns <= m.last_ns and m.n_events > 0
        assert m.mallocs + m.frees <= m.n_events
    if "resnet50_v100" in rel:  # PyTorch 1.8 [memory] events: Bytes only, a running sum
        gpu = [m for m in analysis.memory if m.device == 0]
        assert gpu and not gpu[0].totals_recorded and len(gpu[0].churn) == 6
        assert all(c.mallocs == c.frees > 0 for c in gpu[0].churn)


def test_memory_near_capacity_is_a_finding_when_the_device_says_its_memory(
    tmp_path: Path,
) -> None:
    """The same loop on a device of 1.1 GB (Kineto's ``totalGlobalMem``): its reserved peak is
    over 90 % of it — a ``memory_near_capacity`` finding with no time to give back; on the
    80 GB default, none."""
    mt = memory_loop(3, empty_cache_step=None)
    big, _ = _analyze(mt, "kineto", tmp_path)
    assert not [f for f in big.findings if f.category == "memory_near_capacity"]
    mem = _one(big)
    mt.tr.total_mem_bytes = int(mem.peak_reserved_bytes / 0.95)
    (tmp_path / "small").mkdir()
    small, _ = _analyze(mt, "kineto", tmp_path / "small")
    (f,) = [f for f in small.findings if f.category == "memory_near_capacity"]
    assert f.recoverable_ns == 0 and f.figures["memory_bytes"] == mt.tr.total_mem_bytes
    assert f.figures["peak_reserved_share"] == pytest.approx(0.95, abs=1e-3)


def test_cli_keeps_the_memory_args(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """``tf analyze --json`` keeps only the args the analysis reads (``ARG_KEYS_READ``): the
    memory events' bytes and totals must be among them, or the CLI sees no memory at all."""
    from tests.conftest import run_cli

    mt = memory_loop(3, empty_cache_step=None)
    api, _ = _analyze(mt, "kineto", tmp_path)
    path = tmp_path / "m.pt.trace.json"
    code, out, err = run_cli(["analyze", "--no-cache", "--json", str(path)], capsys)
    assert code == 0, err
    (got,) = json.loads(out)["memory"]
    want = _one(api)
    assert got["peak_allocated_bytes"] == want.peak_allocated_bytes > 0
    assert got["peak_reserved_bytes"] == want.peak_reserved_bytes
