"""The host time of each step by phase (``analysis.host_steps``; issue 43, item 3): a CPU-only
capture says where its steps went. Built traces in both formats with hand-counted phases, a
per-microsecond brute force on random timelines, and ranks analysed apart against together."""

from __future__ import annotations

import json
import random
from pathlib import Path
from typing import Any

import pytest

import traceforensics as tf
from synth import SynthTrace
from tests.json_contract import HOST_PHASES, HOST_STEP_FIELDS
from traceforensics.analysis import AnalysisOptions, analyze
from traceforensics.analysis.host_steps import PHASES, host_breakdown
from traceforensics.ingest import load_path
from traceforensics.recording.summary import host_loader_lines
from traceforensics.report.json_out import dumps

MS = 1_000_000
US = 1_000
LOADER = "enumerate(DataLoader)#_SingleProcessDataLoaderIter.__next__"


def _training(tr: SynthTrace) -> SynthTrace:
    """Two 10 ms steps on thread 1; a loader on thread 2 that no step owns."""
    # step 0: loading 2 (an op inside it is loading too), forward 2.5, backward 2, optimizer 1.5
    tr.cpu_range("ProfilerStep#0", 0, 10 * MS, kind="annotation")
    tr.cpu_range(LOADER, 0, 2 * MS, kind="annotation")
    tr.cpu_range("aten::stack", 500 * US, 1 * MS)
    tr.cpu_range("aten::linear", 2 * MS, 2 * MS)
    tr.cpu_range("aten::mse_loss", 4 * MS, 500 * US)
    tr.cpu_range("autograd::engine::evaluate_function: AddmmBackward0", 5 * MS, 2 * MS)
    tr.cpu_range("Optimizer.step#SGD.step", 7500 * US, 1500 * US, kind="annotation")
    tr.cpu_range("aten::add_", 8 * MS, 500 * US)
    # step 1: forward 3 (a named range) + 0.2 (an operator inside a user range: issue 47, a
    # range that names no phase does not hide the operators in it), other 0.8 (the rest of the
    # user range), backward 2, optimizer 0.5
    tr.cpu_range("ProfilerStep#1", 10 * MS, 10 * MS, kind="annotation")
    tr.cpu_range("## forward ##", 10 * MS, 3 * MS, kind="annotation")
    tr.cpu_range("log metrics", 13 * MS, 1 * MS, kind="annotation")
    tr.cpu_range("aten::zeros", 13200 * US, 200 * US)
    tr.cpu_range("## backward ##", 14 * MS, 2 * MS, kind="annotation")
    tr.cpu_range("Optimizer.zero_grad#SGD.zero_grad", 16 * MS, 500 * US, kind="annotation")
    # another thread's loading never counts in thread 1's steps
    tr.cpu_range(LOADER, 10 * MS, 10 * MS, kind="annotation", tid=2)
    return tr


EXPECTED = [
    {"data_loading": 2 * MS, "forward": 2500 * US, "backward": 2 * MS, "optimizer": 1500 * US},
    {"data_loading": 0, "forward": 3200 * US, "backward": 2 * MS, "optimizer": 500 * US},
]


def _write(tr: SynthTrace, tmp_path: Path, fmt: str, name: str = "t") -> Path:
    if fmt == "kineto":
        return tr.write_kineto(tmp_path / f"{name}.pt.trace.json.gz")
    return tr.write_nsys(tmp_path / f"{name}.sqlite")


@pytest.mark.parametrize("fmt", ["kineto", "nsys"])
def test_phases_of_a_training_step(fmt: str, tmp_path: Path) -> None:
    res = analyze(load_path(_write(_training(SynthTrace()), tmp_path, fmt), use_cache=False))
    assert res.devices == [] and res.host is not None
    doc = res.to_json()["host"]
    assert [s["name"] for s in doc["steps"]] == ["ProfilerStep#0", "ProfilerStep#1"]
    for step, want in zip(doc["steps"], EXPECTED, strict=True):
        assert set(step) == HOST_STEP_FIELDS and tuple(step["phase_ns"]) == HOST_PHASES
        assert step["dur_ns"] == 10 * MS
        other = step["dur_ns"] - sum(want.values())
        assert step["phase_ns"] == {**want, "other": other}
    assert [s["number"] for s in doc["steps"]] == [0, 1]
    assert doc["phase_ns"] == {p: sum(s["phase_ns"][p] for s in doc["steps"]) for p in HOST_PHASES}


def test_step_sources_and_nesting(tmp_path: Path) -> None:
    """No ProfilerStep: ranges named like steps, a nested one dropped; a user pattern wins."""
    tr = SynthTrace()
    tr.cpu_range("train_step 1", 0, 4 * MS, kind="annotation")
    tr.cpu_range("inner step 9", 1 * MS, 1 * MS, kind="annotation")  # inside step 1
    tr.cpu_range("train_step 2", 5 * MS, 4 * MS, kind="annotation")
    tr.cpu_range("batch fetch", 5 * MS, 1 * MS, kind="annotation")  # a data_patterns word
    tr.cpu_range("iter A", 0, 9 * MS, kind="annotation", tid=3)
    session = load_path(tr.write_kineto(tmp_path / "s.json.gz"), use_cache=False)
    host = host_breakdown(session, AnalysisOptions())
    assert host.step_source == "step_ranges"
    assert [(s.name, s.number, s.dur_ns) for s in host.steps] == [
        ("train_step 1", 1, 4 * MS),
        ("train_step 2", 2, 4 * MS),
    ]
    assert host.steps[1].phase_ns["data_loading"] == 1 * MS
    # the inner "step" is a range of step 1 like any other: named, so "other"
    assert host.steps[0].phase_ns == {**dict.fromkeys(PHASES, 0), "other": 4 * MS}
    mine = host_breakdown(session, AnalysisOptions.of(step_pattern=r"^iter "))
    assert mine.step_source == "user_pattern"
    assert [(s.name, s.number) for s in mine.steps] == [("iter A", None)]
    assert mine.steps[0].phase_ns == {**dict.fromkeys(PHASES, 0), "other": 9 * MS}
    # the loading word is read as the idle classifier reads it: off, it is another range
    off = host_breakdown(session, AnalysisOptions.of(data_patterns=("prefetch",)))
    assert off.steps[1].phase_ns["data_loading"] == 0


@pytest.mark.parametrize("fmt", ["kineto", "nsys"])
def test_no_step_range_splits_the_main_threads_span(fmt: str, tmp_path: Path) -> None:
    """No step range at all (a script profiled without ``schedule``): one pseudo-step per rank,
    the thread with the most recorded host time from its first range to its last::

        thread 1  [DataLoader 1..3)[aten::mm 3..6)          [Optimizer.step# 8..9)
        thread 2  [log metrics 0..2)                      (1 ms held: not the main thread)
    """
    tr = SynthTrace()
    tr.cpu_range(LOADER, 1 * MS, 2 * MS, kind="annotation")
    tr.cpu_range("aten::mm", 3 * MS, 3 * MS)
    tr.cpu_range("Optimizer.step#SGD.step", 8 * MS, 1 * MS, kind="annotation")
    tr.cpu_range("log metrics", 0, 2 * MS, kind="annotation", tid=2)
    host = host_breakdown(load_path(_write(tr, tmp_path, fmt), use_cache=False), AnalysisOptions())
    assert host.step_source == "whole_trace"
    ((name, number, start, dur, phases),) = [
        (s.name, s.number, s.start_ns - host.steps[0].start_ns, s.dur_ns, s.phase_ns)
        for s in host.steps
    ]
    assert (name, number, start, dur) == ("whole trace", None, 0, 8 * MS)
    assert phases == {
        "data_loading": 2 * MS,
        "forward": 3 * MS,
        "backward": 0,
        "optimizer": 1 * MS,
        "other": 2 * MS,
    }


# classes of the random timelines, in priority order, and their phase
_NAMES = [
    (LOADER, "annotation", "data_loading"),
    ("Optimizer.step#SGD.step", "annotation", "optimizer"),
    ("MulBackward0", "cpu_op", "backward"),
    ("nn.Module: Linear_0", "annotation", "forward"),
    ("aten::mm", "cpu_op", "forward"),  # an operator before a user range naming no phase
    ("log metrics", "annotation", "other"),
]


def _brute(steps: list[tuple[int, int]], rows: list[tuple[int, int, int]]) -> list[dict[str, int]]:
    """Each microsecond of each step given to the first class covering it, one by one."""
    out = []
    for lo, hi in steps:
        got = dict.fromkeys(PHASES, 0)
        for t in range(lo, hi):
            hits = [c for c, s, e in rows if s <= t < e]
            got[_NAMES[min(hits)][2] if hits else "other"] += 1
        out.append({p: ns * US for p, ns in got.items()})
    return out


@pytest.mark.parametrize("seed", range(12))
def test_random_timelines_against_a_brute_force(seed: int, tmp_path: Path) -> None:
    rnd = random.Random(seed)
    tr, steps, rows, t = SynthTrace(), [], [], 0
    for i in range(rnd.randint(1, 4)):
        t += rnd.randint(0, 20)
        dur = rnd.randint(5, 60)
        steps.append((t, t + dur))
        tr.cpu_range(f"ProfilerStep#{i}", t * US, dur * US, kind="annotation")
        t += dur
    for _ in range(rnd.randint(0, 25)):  # ranges anywhere, overlapping, inside and outside
        c = rnd.randrange(len(_NAMES))
        s = rnd.randint(0, t + 5)
        e = s + rnd.randint(1, 30)
        rows.append((c, s, e))
        name, kind, _ = _NAMES[c]
        tr.cpu_range(name, s * US, (e - s) * US, kind=kind)
    res = analyze(load_path(tr.write_kineto(tmp_path / "r.json.gz"), use_cache=False))
    assert res.host is not None
    assert [s.phase_ns for s in res.host.steps] == _brute(steps, rows)
    assert [s.dur_ns for s in res.host.steps] == [(hi - lo) * US for lo, hi in steps]


def test_capture_loader_line_is_the_breakdown(tmp_path: Path) -> None:
    session = load_path(_training(SynthTrace()).write_kineto(tmp_path / "c.json.gz"))
    res = analyze(session)
    assert res.host is not None
    line = host_loader_lines(res.host)
    assert line == host_loader_lines(session)
    assert line == ["host: data loading 1.00 ms of 10.00 ms per step (10.0%) over 2 recorded steps"]


# ----------------------------------------------------------- ranks analysed apart: same answer
def _json(result: tf.Analysis) -> dict[str, Any]:
    return json.loads(dumps(result.to_json()))  # type: ignore[no-any-return]


@pytest.mark.parametrize("lost", [False, True])
def test_ranks_apart_give_the_joint_diagnostics_and_host(lost: bool, tmp_path: Path) -> None:
    """Two CPU-only ranks; or (``lost``) rank 1 ran GPU work and rank 0's records were lost."""
    for rank in (0, 1):
        tr = _training(SynthTrace(rank=rank, world_size=2, pid=1000 + rank))
        if lost and rank == 0:
            tr.api("cudaLaunchKernel", 2 * MS, 10 * US)
        elif lost:
            tr.launch("gemm_kernel", 2 * MS, 10 * US, 2 * MS + 20 * US, 1 * MS)
        tr.write_kineto(tmp_path / f"rank{rank}.pt.trace.json.gz")
    joint = _json(tf.analyze(tmp_path))
    apart = _json(tf.analyze(tmp_path, jobs=2))
    assert apart["diagnostics"] == joint["diagnostics"] and apart["host"] == joint["host"]
    assert apart["warnings"] == joint["warnings"]
    codes = [(d["code"], d["message"][:7]) for d in joint["diagnostics"]]
    if lost:
        assert codes == [("gpu_activity_missing", "rank 0:")] and joint["host"] is None
    else:
        assert codes == [("cpu_only", "rank 0:"), ("cpu_only", "rank 1:")]
        assert [s["rank"] for s in joint["host"]["steps"]] == [0, 0, 1, 1]
