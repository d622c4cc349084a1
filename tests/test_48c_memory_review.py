"""Issue 48 item 2, memory over time: the review's cases (totals never negative, pinned and
other device types, processes summed, steps sharing a name, the steady allocator time, the
virtual-memory calls, nested calls, a damaged nsys table, units, the figure, the Kineto
source), split from test_48b_memory.py; truth is computed as there."""

from __future__ import annotations

import json
import sqlite3
import sys
from collections.abc import Callable
from itertools import accumulate
from pathlib import Path
from typing import Any

import pytest

import traceforensics
from tests.conftest import ROOT, shared_trace
from tests.test_48b_memory import _CALLS, FORMATS, _analyze, _merged_calls, _one
from traceforensics.analysis.pipeline import Analysis
from traceforensics.report.memory_text import memory_text_lines

sys.path.insert(0, str(ROOT / "tools"))

from synth_memory import (
    MB,
    MemoryTrace,
    edit_kineto,
    memory_instant,
    memory_loop,
    usage_rows,
)


# ---------------------------------------------------------------- review fixes (issue 48)
def _with_events(
    tmp: Path, add: Callable[[dict[str, Any]], list[dict[str, Any]]], drop_totals: bool = False
) -> tuple[Analysis, list[dict[str, Any]]]:
    """The built Kineto loop edited (``synth_memory.edit_kineto``), analysed; its raw events."""
    path = memory_loop(3).write_kineto(tmp / "m.pt.trace.json")
    raw = edit_kineto(path, add, drop_totals=drop_totals)
    return traceforensics.analyze(traceforensics.load(path)), raw


def test_totals_never_negative_when_frees_come_first(tmp_path: Path) -> None:
    """Item 1: a Bytes-only trace whose first event frees 2 GiB allocated before the capture:
    the running sum is lifted by 2 GiB (never negative); the peak is the lifted running max."""
    args = {"Bytes": -(2 << 30), "Device Id": 0, "Device Type": 1}
    analysis, raw = _with_events(
        tmp_path, lambda f: [memory_instant(f["ts"] - 1, f["pid"], args)], drop_totals=True
    )
    mem = _one(analysis)
    running = list(accumulate(e["args"]["Bytes"] for e in raw))
    lift = max(0, -min(running))
    assert lift == 2 << 30 and mem.allocated_before_bytes == lift and not mem.totals_recorded
    assert mem.peak_allocated_bytes == max(running) + lift
    assert mem.series is not None and mem.series.get_column("total_allocated").min() == 0


def test_nsys_free_first_and_pinned_memory(tmp_path: Path) -> None:
    """Items 1 and 2 (nsys): a deallocation of 1 GiB before any allocation lifts the running
    sum (no negative total); a pinned host allocation (memKind PINNED, ids resolved by name
    from ENUM_CUDA_MEM_KIND, or the documented numbering without it) is not device memory."""
    mt = memory_loop(3)
    truth = mt.peak(segments=True)[0]
    for enum_table in (True, False):
        path = mt.write_nsys(tmp_path / f"m{enum_table}.sqlite", pinned_bytes=4 << 30,
                             enum_table=enum_table)  # fmt: skip
        row = usage_rows(path)[0]
        row[0], row[6], row[8], row[10] = row[0] - 1, 1 << 30, 1, None  # a free, first
        usage_rows(path, [row])
        mem = _one(traceforensics.analyze(traceforensics.load(path)))
        assert mem.peak_allocated_bytes == truth and mem.allocated_before_bytes == 1 << 30
        assert mem.series is not None and mem.series.get_column("total_allocated").ge(0).all()
        assert mem.segments and mem.n_events == sum(e.segment for e in mt.events) + 1


def test_other_device_types_are_their_own_record(tmp_path: Path) -> None:
    """Item 3: a Device Type 2 event with Device Id 0 is not CUDA device 0's."""
    args = {"Bytes": 10, "Total Allocated": 10 << 40, "Total Reserved": 0, "Device Id": 0}
    analysis, _ = _with_events(
        tmp_path, lambda f: [memory_instant(f["ts"] + 1, f["pid"], {**args, "Device Type": 2})]
    )
    by_type = {m.device_type: m for m in analysis.memory}
    assert set(by_type) == {"cuda", "type 2"}
    assert by_type["cuda"].peak_allocated_bytes == memory_loop(3).peak()[0]
    assert by_type["type 2"].peak_allocated_bytes == 10 << 40
    assert not by_type["type 2"].reserved_known and by_type["type 2"].allocator_calls == 0


def _summed_peak(streams: list[list[tuple[int, int]]]) -> int:
    """The peak of the sum of each process's latest total over the merged ``(t, total)``."""
    merged = sorted((t, i, total) for i, s in enumerate(streams) for t, total in s)
    last = [0] * len(streams)
    best = 0
    for _t, i, total in merged:
        last[i] = total
        best = max(best, sum(last))
    return best


def test_two_processes_on_one_device_are_summed(tmp_path: Path) -> None:
    """Item 4: the same allocator events from a second process 300 ns later (nsys: another
    globalPid; Kineto: another pid): the device's totals are the sum of both processes'."""
    mt = memory_loop(3)
    path = mt.write_nsys(tmp_path / "m.sqlite")
    rows = usage_rows(path)
    for r in rows:
        r[0], r[1], r[10] = r[0] + 300, r[1] + (1 << 24), None
    usage_rows(path, rows)
    seg = [(t, r) for t, _a, r, e in mt.totals() if e.segment]
    mem = _one(traceforensics.analyze(traceforensics.load(path)))
    assert mem.peak_allocated_bytes == _summed_peak([seg, [(t + 300, v) for t, v in seg]])
    for drop in (False, True):  # recorded totals; Bytes only (a running sum per process)
        kpath = mt.write_kineto(tmp_path / "k.pt.trace.json")
        raw = edit_kineto(kpath)
        one = [(round(e["ts"] * 1000), e["args"]["Total Allocated"]) for e in raw]
        twin = [{**e, "args": dict(e["args"]), "pid": 999, "ts": e["ts"] + 0.3} for e in raw]
        edit_kineto(kpath, lambda f: twin)  # noqa: B023 - called at once
        edit_kineto(kpath, drop_totals=drop)
        mem = _one(traceforensics.analyze(traceforensics.load(kpath)))
        assert mem.peak_allocated_bytes == _summed_peak([one, [(t + 300, v) for t, v in one]])


def test_steps_sharing_a_name_keep_their_own_allocator_idle(tmp_path: Path) -> None:
    """Item 5: steps all named ``train_step``: each churn row has its own step's idle."""
    path = memory_loop(5, empty_cache_step=3).write_kineto(tmp_path / "m.pt.trace.json")
    doc = json.loads(path.read_text())
    for e in doc["traceEvents"]:
        if str(e.get("name", "")).startswith("ProfilerStep#"):
            e["name"] = "train_step"
    path.write_text(json.dumps(doc))
    analysis = traceforensics.analyze(traceforensics.load(path), step_pattern="train_step")
    mem = _one(analysis)
    steps = sorted(analysis.idle.steps, key=lambda s: s.start_ns)
    want = [s.idle_by_cause.get("memory_management", 0) for s in steps]
    assert [c.allocator_idle_ns for c in mem.churn] == want and len(set(want)) == 2


@pytest.mark.parametrize(("steps", "ec"), [(5, 3), (5, 0), (2, None), (1, None)])
def test_allocator_churn_keeps_the_steady_memory_management_time(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, steps: int, ec: int | None
) -> None:
    """Item 6: ``allocator_churn`` replaces ``memory_management`` with the same steady-state
    time the idle findings give it (the one-off split of ``findings.steady``), no less."""
    from traceforensics.analysis import pipeline

    session = traceforensics.load(
        memory_loop(steps, empty_cache_step=ec).write_kineto(tmp_path / "m.pt.trace.json")
    )
    with_mem = traceforensics.analyze(session)
    monkeypatch.setattr(pipeline, "analyze_memory", lambda ctx, idle: [])
    without = traceforensics.analyze(session)
    (mm,) = [f.recoverable_ns for f in without.findings if f.category == "memory_management"]
    (churn,) = [f.recoverable_ns for f in with_mem.findings if f.category == "allocator_churn"]
    assert churn == mm == _one(with_mem).loop_allocator_idle_ns > 0


def test_vmm_calls_drop_the_expandable_segments_advice(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Item 7: the allocator's calls are the virtual-memory API (cuMemUnmap, cuMemRelease:
    not in the top calls' old list): neither allocator_churn nor reserved_unused advises
    expandable segments; every such call of the rank counts (``vmm_calls``)."""
    orig = MemoryTrace.call
    names = {"cudaMalloc": "cuMemUnmap", "cudaFree": "cuMemRelease"}

    def renamed(self: MemoryTrace, name: str, t: int, d: int, tid: int = 1) -> int:
        return int(orig(self, names.get(name, name), t, d, tid))

    monkeypatch.setattr(MemoryTrace, "call", renamed)
    mt = memory_loop(4, empty_cache_step=1, segment_bytes=400 * MB)
    analysis, _ = _analyze(mt, "kineto", tmp_path)
    assert _one(analysis).vmm_calls == sum(e.name in names.values() for e in mt.tr.events) > 0
    cats = ("allocator_churn", "reserved_unused")
    assert [f.category for f in analysis.findings if f.category in cats] == list(cats)
    assert not any("expandable" in f.remedy for f in analysis.findings if f.category in cats)
    monkeypatch.undo()  # the same loop with cudaMalloc/cudaFree: the advice stays
    plain, _ = _analyze(memory_loop(4, segment_bytes=400 * MB), "nsys", tmp_path)
    assert all("expandable" in f.remedy for f in plain.findings if f.category in cats)


@pytest.mark.parametrize("fmt", FORMATS)
def test_nested_allocator_calls_count_once(tmp_path: Path, fmt: str) -> None:
    """Item 9: the cudaFree inside the empty_cache range is part of it: the calls' time is
    their union, the count the outer calls', the evidence lists no call inside another."""
    mt = memory_loop(5, empty_cache_step=3)
    analysis, _ = _analyze(mt, fmt, tmp_path)
    mem = _one(analysis)
    spans = [e.end_ns - e.start_ns for e in mt.tr.events if e.name in _CALLS]
    assert mem.allocator_call_ns == sum(e - s for s, e in _merged_calls(mt)) < sum(spans)
    (churn,) = [f for f in analysis.findings if f.category == "allocator_churn"]
    ev = [(e.start_ns, e.start_ns + e.dur_ns) for e in churn.evidence]
    for i, (s, e) in enumerate(ev):
        assert not any(s2 <= s and e <= e2 for j, (s2, e2) in enumerate(ev) if j != i)


def test_nsys_table_without_operation_type_is_skipped(tmp_path: Path) -> None:
    """Item 10: without memoryOperationType a free reads as an allocation: the table is
    skipped with a warning, not read wrong."""
    path = memory_loop(3).write_nsys(tmp_path / "m.sqlite")
    con = sqlite3.connect(path)
    con.execute("ALTER TABLE CUDA_GPU_MEMORY_USAGE_EVENTS DROP COLUMN memoryOperationType")
    con.commit()
    con.close()
    with pytest.warns(UserWarning, match="memoryOperationType"):
        analysis = traceforensics.analyze(traceforensics.load(path))
    assert analysis.memory == []


def test_binary_units_and_the_soft_empty_cache_clause(tmp_path: Path) -> None:
    """Item 8: one binary formatter (GiB/MiB) in the text and the findings' titles; the
    256 MiB threshold prints as such. Item 11: no range named empty_cache, but the loop's
    cudaFree calls could be a ``torch.cuda.empty_cache()`` (no op of its own): a softened
    clause, not none."""
    from traceforensics.analysis.findings.memory import SOFT_EMPTY_CACHE

    mt = memory_loop(4, empty_cache_step=None, segment_bytes=400 * MB)
    analysis, _ = _analyze(mt, "kineto", tmp_path)
    text = "\n".join(memory_text_lines(analysis))
    found = {f.category: f for f in analysis.findings}
    title = found["reserved_unused"].title
    assert "256 MiB" in text and "GiB" in text and "MiB" in title
    assert not any(u in text + title for u in (" GB", " MB", " kB"))
    remedy = found["allocator_churn"].remedy
    assert SOFT_EMPTY_CACHE in remedy and "no torch.cuda.empty_cache()" not in remedy


def test_figure_one_origin_one_legend_and_labels(tmp_path: Path) -> None:
    """Item 12 and the nsys label: a CPU panel and a GPU panel share one time axis; the legend
    has every line kind and the peak; nsys's line is the segments (reserved); without
    reserved bytes the section says "peak allocated is" of the device."""
    pytest.importorskip("matplotlib")
    from traceforensics.report.plot_memory import figure_memory

    args = {"Bytes": 64, "Total Allocated": 64, "Total Reserved": 0, "Device Id": -1}
    analysis, _ = _with_events(
        tmp_path, lambda f: [memory_instant(f["ts"] + 900, f["pid"], {**args, "Device Type": 0})]
    )
    fig = figure_memory(analysis)
    panels = [ax for ax in fig.axes if ax.lines]
    assert len(panels) == 2 and panels[0].get_xlim() == panels[1].get_xlim()
    labels = {t.get_text() for t in fig.legends[0].get_texts()}
    assert {"allocated", "reserved", "peak"} <= labels
    fig.savefig(tmp_path / "two.png", dpi=50)
    mt = memory_loop(3)
    mt.tr.total_mem_bytes = 2 << 30
    nsys, _ = _analyze(mt, "nsys", tmp_path)
    labels = {t.get_text() for t in figure_memory(nsys).legends[0].get_texts()}
    assert "reserved (cudaMalloc segments)" in labels and "allocated" not in labels
    assert "peak reserved is" in "\n".join(memory_text_lines(nsys))
    (tmp_path / "b").mkdir()
    bare, _ = _with_events(tmp_path / "b", lambda f: [], drop_totals=True)
    assert "peak allocated is" in "\n".join(memory_text_lines(bare))


def test_kineto_memory_is_never_called_segments() -> None:
    """A Kineto ``[memory]`` event has no category: it is the caching allocator's view,
    never nsys's driver segments (the shared ResNet-50 trace, Bytes-only events)."""
    a = traceforensics.analyze(
        traceforensics.load(shared_trace("kineto/resnet50_v100_workers0.pt.trace.json.gz"))
    )
    assert a.memory and not any(m.segments for m in a.memory)
