"""Issue 47 item 1: the phases of a step (``analysis.phases``), against a plain recomputation.

The reference below reads only the loaded event table (no analysis code): each GPU op's phase
from its flags or from the host ranges open on its launch call's thread (the call found by
correlation id), then every step window swept segment by segment in plain Python. The tool's
per-step GPU ns must equal it phase by phase, sum to the step's busy ns (itself checked
against a plain interval union) and its host ns to the step's duration.
"""

from __future__ import annotations

import bisect
import re
import sys
from pathlib import Path
from typing import Any

import pytest

import traceforensics as tf
from tests.conftest import plain_union, shared_trace
from traceforensics.analysis import analyze
from traceforensics.analysis.classify import _COMM_RE as COMM_RE
from traceforensics.analysis.idle.results import StepStats
from traceforensics.analysis.names import BUILTIN_DATA_RE, DEFAULT_DATA_PATTERNS
from traceforensics.analysis.options import DEFAULTS
from traceforensics.analysis.phases import STEP_PHASES
from traceforensics.analysis.steps import GENERIC_STEP_RE

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "tools"))

from synth_ranks import generate_job  # noqa: E402
from synth_scenarios import training_loop  # noqa: E402

GPU_KINDS = ("kernel", "memcpy", "memset")
#: The documented rule (docs/phases.md), written out here, not read from the module: the phase
#: of each range class in priority order, and the order a shared GPU ns is given.
CLASS_PHASE = (
    "data_loading", "h2d", "communication", "optimizer", "backward", "forward", "forward",
    "other",
)  # fmt: skip
GPU_ORDER = ("data_loading", "forward", "backward", "optimizer", "other", "h2d", "communication")
BACKWARD = r"(?i)backward|AccumulateGrad|^autograd::engine::evaluate_function: "
FORWARD = r"(?i)forward|^nn\.Module: "
DATA_WORDS = re.compile(r"(?i)(^|[^a-z0-9])(" + "|".join(DEFAULT_DATA_PATTERNS) + ")")


def _plain_class(kind: str, name: str, is_comm: bool) -> int | None:
    """The range class of one host row, in plain Python (the module docstring's table)."""
    if kind not in ("annotation", "cpu_op"):
        return None
    if re.search(DEFAULTS.steps.marker_re, name) or re.search(GENERIC_STEP_RE, name):
        return None  # a step range is never a phase
    user = kind == "annotation" or ("::" not in name and not re.search(r"Backward\d*$", name))
    named = re.search(FORWARD, name) or re.search(BACKWARD, name)
    tests = [
        re.search(BUILTIN_DATA_RE, name) or (user and DATA_WORDS.search(name) and not named),
        False,  # h2d: launch calls only
        is_comm,
        re.search(r"^Optimizer\.(step|zero_grad)#|^Optimizer\.|optimizer", name),
        re.search(BACKWARD, name),
        re.search(FORWARD, name),
        kind == "cpu_op",
    ]
    return next((k for k, hit in enumerate(tests) if hit), 7)


def _sweep(spans: list[tuple[int, int, int]]) -> list[tuple[int, int, int]]:
    """Elementary segments ``(a, b, smallest label running)`` of labelled spans: a plain
    boundary sweep with a count per label."""
    marks = sorted(
        [(s, 1, c) for s, e, c in spans if e > s] + [(e, -1, c) for s, e, c in spans if e > s]
    )
    running: dict[int, int] = {}
    out: list[tuple[int, int, int]] = []
    for (t, delta, c), nxt in zip(marks, [*marks[1:], None][: len(marks)], strict=True):
        running[c] = running.get(c, 0) + delta
        live = [k for k, n in running.items() if n > 0]
        if nxt is not None and nxt[0] > t and live:
            out.append((t, nxt[0], min(live)))
    return out


def _first_class(segments: list[tuple[int, int, int]], t: int) -> int | None:
    """The label of the segment holding ``t`` (segments sorted and disjoint)."""
    i = bisect.bisect_right(segments, (t, float("inf"), 0)) - 1
    return segments[i][2] if i >= 0 and segments[i][0] <= t < segments[i][1] else None


Spans = list[tuple[int, int, int]]


def _ranges(events: list[dict[str, Any]]) -> dict[tuple[Any, ...], Spans]:
    """Each host thread's classified ranges (start, end, class)."""
    ranges: dict[tuple[Any, ...], list[tuple[int, int, int]]] = {}
    for e in events:
        comm = bool(e["is_comm"]) or bool(re.search(COMM_RE, e["name"] or ""))
        c = _plain_class(e["kind"], e["name"] or "", comm)
        if c is not None and e["tid"] is not None:
            key = (e["rank"], e["pid"], e["tid"])
            ranges.setdefault(key, []).append((e["start_ns"], e["start_ns"] + e["dur_ns"], c))
    return ranges


def _op_phases(
    events: list[dict[str, Any]],
) -> tuple[dict[tuple[int, int], list[tuple[int, int, str]]], dict[tuple[int, int], Spans]]:
    """Each device's GPU ops (start, end, phase), and its host spans (start, end, class): the
    ranges of the threads launching its work and the launch calls of its copies to the device
    (class 1) and collectives (class 2), from the event rows alone."""
    calls = {
        (e["rank"], e["correlation"]): e
        for e in events
        if e["kind"] == "cuda_api" and e["correlation"] is not None
    }
    ranges = _ranges(events)
    # (an op's own flags say h2d and communication, never its launch's ranges)
    segments = {k: _sweep([r for r in v if r[2] not in (1, 2)]) for k, v in ranges.items()}
    # a launch no range of its own thread covers: the ranges of any thread of its process
    by_process: dict[tuple[Any, ...], Spans] = {}
    for (rank, pid, _), v in ranges.items():
        by_process.setdefault((rank, pid), []).extend(r for r in v if r[2] not in (1, 2))
    process_segments = {k: _sweep(v) for k, v in by_process.items()}
    ops: dict[tuple[int, int], list[tuple[int, int, str]]] = {}
    threads: dict[tuple[int, int], set[tuple[Any, ...]]] = {}
    host: dict[tuple[int, int], Spans] = {}
    for e in events:
        if e["kind"] not in GPU_KINDS or e["device"] is None:
            continue
        dev = (e["rank"], e["device"])
        call = calls.get((e["rank"], e["correlation"]))
        if call is not None:
            threads.setdefault(dev, set()).add((call["rank"], call["pid"], call["tid"]))
            if e["is_comm"] or e["copy_kind"] == "h2d":
                end = call["start_ns"] + call["dur_ns"]
                host.setdefault(dev, []).append((call["start_ns"], end, 2 if e["is_comm"] else 1))
        if e["is_comm"]:
            phase = "communication"
        elif e["copy_kind"] == "h2d":
            phase = "h2d"
        else:
            phase = _launch_phase(call, segments, process_segments)
        start = e["start_ns"]
        ops.setdefault(dev, []).append((start, start + e["dur_ns"], phase))
    for dev, launching in threads.items():
        host.setdefault(dev, []).extend(r for t in launching for r in ranges.get(t, []))
    return ops, host


def _launch_phase(
    call: dict[str, Any] | None,
    segments: dict[tuple[Any, ...], Spans],
    process_segments: dict[tuple[Any, ...], Spans],
) -> str:
    """The phase of a launch: its own thread's ranges first, then its process's."""
    if call is None:
        return "other"
    c = _first_class(segments.get((call["rank"], call["pid"], call["tid"]), []), call["start_ns"])
    if c is None:
        c = _first_class(process_segments.get((call["rank"], call["pid"]), []), call["start_ns"])
    return "other" if c is None else CLASS_PHASE[c]


def _reference(
    events: list[dict[str, Any]], steps: list[StepStats]
) -> list[tuple[dict[str, int], dict[str, int]]]:
    """GPU ns and host ns by phase of each step: every segment between boundaries, swept in
    plain Python; the host's uncovered rest is ``other``."""
    ops, host = _op_phases(events)
    gpu = {
        dev: _sweep([(a, b, GPU_ORDER.index(p)) for a, b, p in mine]) for dev, mine in ops.items()
    }
    cpu = {dev: _sweep(mine) for dev, mine in host.items()}
    out = []
    for st in steps:
        lo, hi = st.start_ns, st.start_ns + st.dur_ns
        got = dict.fromkeys(STEP_PHASES, 0)
        for a, b, k in gpu[(st.rank, st.device)]:
            got[GPU_ORDER[k]] += max(0, min(b, hi) - max(a, lo))
        held = dict.fromkeys(STEP_PHASES, 0)
        for a, b, k in cpu.get((st.rank, st.device), []):
            held[CLASS_PHASE[k]] += max(0, min(b, hi) - max(a, lo))
        held["other"] += st.dur_ns - sum(held.values())
        out.append((got, held))
    return out


def _check(session: tf.TraceSession, expect_steps: bool = True) -> list[StepStats]:
    steps = analyze(session).idle.steps
    assert steps or not expect_steps
    events = session.events.with_columns().to_dicts()
    for row in events:
        row["name"] = None if row["name"] is None else str(row["name"])
        row["kind"] = str(row["kind"])
        row["copy_kind"] = None if row["copy_kind"] is None else str(row["copy_kind"])
    want = _reference(events, steps)
    for st, (ref, ref_host) in zip(steps, want, strict=True):
        assert set(st.phases) == set(STEP_PHASES)
        gpu = {p: t.gpu_ns for p, t in st.phases.items()}
        assert gpu == ref, st.name
        assert {p: t.host_ns for p, t in st.phases.items()} == ref_host, st.name
        assert sum(gpu.values()) == st.busy_ns
        assert sum(t.host_ns for t in st.phases.values()) == st.dur_ns
        assert all(t.host_ns >= 0 and t.gpu_ns >= 0 for t in st.phases.values())
        # busy itself: a plain union of the device's GPU ops clipped to the step
        lo, hi = st.start_ns, st.start_ns + st.dur_ns
        spans = [
            (max(e["start_ns"], lo), min(e["start_ns"] + e["dur_ns"], hi))
            for e in events
            if e["kind"] in GPU_KINDS and (e["rank"], e["device"]) == (st.rank, st.device)
        ]
        assert sum(e - s for s, e in plain_union(spans)) == st.busy_ns
    return steps


@pytest.mark.parametrize("fmt", ["kineto", "nsys"])
@pytest.mark.parametrize("steps", [1, 3, 6])
def test_training_loop_phases_match_the_plain_recomputation(
    tmp_path: Path, fmt: str, steps: int
) -> None:
    tr = training_loop(steps=steps, loader_stall_steps=(0,))
    path = (
        tr.write_kineto(tmp_path / "t.json")
        if fmt == "kineto"
        else tr.write_nsys(tmp_path / "t.sqlite")
    )
    got = _check(tf.load(path))
    for st in got:
        # the loop's own phases: each is there, and the optimizer is its small add_ kernels
        for phase in ("h2d", "forward", "backward", "optimizer"):
            assert st.phases[phase].gpu_ns > 0, (phase, st.name)
        assert st.phases["communication"].gpu_ns == 0
    # the host runs ahead of the GPU: a step window (to its last GPU work) holds the next
    # step's loading; a single step's window starts after its own
    loading = sum(st.phases["data_loading"].host_ns for st in got)
    assert (loading > 0) == (steps > 1)


@pytest.mark.parametrize("fmt", ["kineto", "nsys"])
def test_labelled_stalls_leave_the_sums_exact(tmp_path: Path, fmt: str) -> None:
    """The labelled training scenario with its injected stalls (loader, checkpoint I/O):
    the phases still sum to busy and to the step, and match the plain recomputation."""
    tr = training_loop(steps=5, loader_stall_steps=(0, 2), checkpoint_steps=(1, 3))
    path = (
        tr.write_kineto(tmp_path / "t.json")
        if fmt == "kineto"
        else tr.write_nsys(tmp_path / "t.sqlite")
    )
    got = _check(tf.load(path))
    assert len(got) == 5 and {i.cause for i in tr.injected} >= {"data_loading", "io"}


@pytest.mark.parametrize("fmt", ["kineto", "nsys"])
def test_collectives_are_the_communication_phase(tmp_path: Path, fmt: str) -> None:
    generate_job(tmp_path, ranks=2, steps=3, fmt=fmt, straggler_rank=1, cause=None)
    files = sorted(p for p in tmp_path.iterdir() if p.name != "truth.json")
    got = _check(tf.load(files[0]))
    assert sum(st.phases["communication"].gpu_ns for st in got) > 0


@pytest.mark.parametrize("fmt", ["kineto", "nsys"])
@pytest.mark.parametrize(
    "shape",
    [
        "nvtx_backward_on_main",
        "step_n_names",
        "data_word_step_names",
        "enclosing_user_range",
        "module_words",
    ],
)
def test_range_shapes_match_the_plain_recomputation(tmp_path: Path, fmt: str, shape: str) -> None:
    """Shapes the first rule got wrong (a review of issue 47): backward launched by a thread
    with no range of its own while the main thread's NVTX range says backward; steps named
    "step N" (with data words too: a step range is never a phase); a user range around the
    whole loop; a module range holding a data word."""
    from synth import SynthTrace

    tr = SynthTrace()
    t = 1_000
    for k in range(3):
        names = {"step_n_names": f"step {k}", "data_word_step_names": f"load_batch step {k}"}
        step = names.get(shape, f"ProfilerStep#{k}")
        tr.cpu_range(step, t, 200_000, kind="annotation")
        if shape == "enclosing_user_range":
            tr.cpu_range("train_body", t + 10, 190_000, kind="annotation")
        fwd = "nn.Module: BatchNorm2d_0" if shape == "module_words" else "aten::linear"
        tr.cpu_range(fwd, t + 1_000, 40_000, kind="annotation" if "Module" in fwd else "cpu_op")
        tr.launch("fwd_kernel", t + 2_000, 2_000, t + 5_000, 30_000)
        if shape == "nvtx_backward_on_main":
            tr.cpu_range("Backward", t + 50_000, 100_000, kind="annotation")
            tr.launch("bwd_kernel", t + 60_000, 2_000, t + 62_000, 60_000, tid=2)
        else:
            node = "autograd::engine::evaluate_function: torch::autograd::AccumulateGrad"
            tr.cpu_range(node, t + 50_000, 100_000, tid=2)
            tr.launch("bwd_kernel", t + 60_000, 2_000, t + 62_000, 60_000, tid=2)
        t += 220_000
    path = (
        tr.write_kineto(tmp_path / "t.json")
        if fmt == "kineto"
        else tr.write_nsys(tmp_path / "t.sqlite")
    )
    got = _check(tf.load(path))
    assert got
    for st in got:
        assert st.phases["other"].gpu_ns == 0, (shape, st.name)
        assert st.phases["backward"].gpu_ns > 0 and st.phases["forward"].gpu_ns > 0
        assert st.phases["data_loading"].gpu_ns == st.phases["data_loading"].host_ns == 0


def test_a_program_without_ranges_is_other(tmp_path: Path) -> None:
    """A CUDA C program: launches, no operator or range; steps from a user range only."""
    from synth import SynthTrace

    tr = SynthTrace()
    t = 1_000
    for k in range(3):
        tr.cpu_range(f"iteration {k}", t, 100_000, kind="annotation")
        for j in range(4):
            tr.launch("my_kernel", t + 1_000 + j * 10_000, 2_000, t + 5_000 + j * 10_000, 4_000)
        t += 120_000
    got = _check(tf.load(tr.write_kineto(tmp_path / "c.json")))
    assert len(got) == 3
    for st in got:
        assert st.phases["other"].gpu_ns == st.busy_ns > 0
        assert st.phases["other"].host_ns == st.dur_ns


@pytest.mark.parametrize(
    "rel",
    [
        "kineto/resnet50_v100_workers0.pt.trace.json.gz",
        "kineto/resnet50_v100_workers4.pt.trace.json.gz",
        "hta/ddp_nccl_a100_rank0.json.gz",
        "hta/resnet_v100_ns_resolution.json.gz",
    ],
)
def test_shared_traces_phases_match_the_plain_recomputation(rel: str) -> None:
    got = _check(tf.load(shared_trace(rel)))
    for st in got:  # training steps: forward and backward work on the GPU
        assert st.phases["forward"].gpu_ns > 0 and st.phases["backward"].gpu_ns > 0


def test_phases_in_the_json_and_the_steps_frame(tmp_path: Path) -> None:
    tr = training_loop(steps=3)
    a = analyze(tf.load(tr.write_kineto(tmp_path / "t.json")))
    js = a.to_json()["steps"]
    frame = a.frames()["steps"]
    for row, st, k in zip(js, a.idle.steps, range(len(js)), strict=True):
        assert list(row["phases"]) == list(STEP_PHASES)
        for p in STEP_PHASES:
            assert row["phases"][p] == {
                "gpu_ns": st.phases[p].gpu_ns,
                "host_ns": st.phases[p].host_ns,
            }
            assert frame[f"{p}_gpu_ns"][k] == st.phases[p].gpu_ns
            assert frame[f"{p}_host_ns"][k] == st.phases[p].host_ns
