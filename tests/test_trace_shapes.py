"""Generative trace-shape suite, fast profile (issue 43): traces of random *shape*.

``tools/shapes.py`` draws timelines from any subset of the event families (kernels, copies,
memsets, launch calls without GPU records, syncs, event records, stream waits, NCCL kernels
with and without collective args, CUDA graphs with and without node records, ProfilerStep and
other step ranges, user annotations, DataLoader ranges, cpu ops), on 1-4 devices and streams,
1-3 processes, with nested/overlapping host ranges, zero-length work, repeated correlation ids
and Kineto flows present/absent/dangling; each is written as Kineto JSON and as an nsys export,
as one file and as a rank directory. ``tools/shapes_check.py`` lists what must hold for every
example (busy = a plain union of the drawn GPU intervals, idle parts sum to idle, findings
sorted, JSON contract, a pass alone = ``analyze()``, the CLI exits 0).

``TF_SHAPE_EXAMPLES`` examples in all (default 1,000, derandomised: CI is reproducible): half
single files, half rank directories; each drawn timeline is checked in both formats (two
examples). Every ``ALONE_EVERY``-th draw also runs each pass alone and the CLI (they prepare the
context again; the profile's time is in docs/reliability.md). The long profile is ``make
fuzz-long`` (``tools/shapes_long.py``).

Semantic decisions the shapes forced (a demanding user's reading):

- zero-length GPU work (a 0 ns kernel) covers no time: it adds nothing to busy and neither
  opens nor stretches the device window (first start to last end of work that took time; a
  0 ns record at the edge is a timestamp, not a bound on idle time), yet it is work: its device
  is reported (with a zero window when it has nothing else) and counted, in both formats.
- a device with only sync records (no kernel, copy or memset) is not a device with work: not
  reported.
"""

from __future__ import annotations

import dataclasses
import os
import tempfile
from collections import Counter
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings

import shapes
import shapes_check
import synth

EXAMPLES = int(os.environ.get("TF_SHAPE_EXAMPLES", "1000"))
ALONE_EVERY = 20
LAYOUTS = {"file": False, "rank_dir": True}
#: draws per layout: each draw is checked in both formats
DRAWS = max(EXAMPLES // (len(LAYOUTS) * len(shapes.FORMATS)), 1)


def _coverage(shape: shapes.Shape) -> set[str]:
    """What an example exercised (the suite checks every item is drawn at least once)."""
    seen = {f"family:{f}" for f in shape.families}
    for tr in shape.traces:
        seen |= {f"flows:{tr.flows}", f"graph_trace:{tr.graph_trace}"}
        work = [e for e in tr.events if e.kind in synth.GPU_WORK_KINDS]
        seen |= {"zero_length_work"} if any(e.dur_ns == 0 for e in work) else set()
        corrs = Counter(e.correlation for e in work if "graph id" not in e.args)
        corrs.pop(None, None)
        seen |= {"repeated_correlation"} if any(n > 1 for n in corrs.values()) else set()
        seen |= (
            {"no_correlation"}
            if tr.events and all(e.correlation is None for e in tr.events)
            else set()
        )
        seen |= {"processes>1"} if len(tr.host_pids()) > 1 else set()
        seen |= {"devices>1"} if len({e.device for e in work}) > 1 else set()
        seen |= {"no_events"} if not tr.events else set()
        seen |= {"copies_only"} if work and all(e.kind != "kernel" for e in work) else set()
        seen |= {"one_kernel"} if len(work) == 1 else set()
        host = [e for e in tr.events if e.device is None]
        seen |= {"no_host_events"} if work and not host else set()
    seen |= {"ranks>1"} if len(shape.traces) > 1 else set()
    return seen


#: items ``_coverage`` must see in each layout's draws
MUST_SEE = (
    {f"family:{f}" for f in shapes.FAMILIES}
    | {f"flows:{m}" for m in ("all", "none", "dangling")}
    | {"graph_trace:graph", "zero_length_work", "repeated_correlation", "no_correlation"}
    | {"processes>1", "devices>1", "no_events", "copies_only", "one_kernel", "no_host_events"}
)


@pytest.mark.parametrize("layout", list(LAYOUTS))
def test_every_shape_keeps_the_invariants(layout: str) -> None:
    seen: Counter[str] = Counter()
    count = [0]

    @settings(
        max_examples=DRAWS,
        deadline=None,
        derandomize=True,
        database=None,
        suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
    )
    @given(shape=shapes.shapes(rank_dir=LAYOUTS[layout]))
    def case(shape: shapes.Shape) -> None:
        count[0] += 1
        full = count[0] % ALONE_EVERY == 1
        for fmt in shapes.FORMATS:  # the same drawn timeline in both formats
            one = dataclasses.replace(shape, fmt=fmt)
            with tempfile.TemporaryDirectory(prefix="tf-shape-") as tmp:
                found = shapes_check.problems(one, Path(tmp), cli=full, alone=full)
            assert not found, "\n".join(found) + "\n" + one.describe()
            seen["examples"] += 1
        seen.update(_coverage(shape))

    case()
    assert seen["examples"] >= 2 * min(DRAWS, 10), seen
    if LAYOUTS[layout]:
        assert seen["ranks>1"], "no rank directory with several ranks was drawn"
    missing = MUST_SEE - set(seen)
    assert DRAWS < 200 or not missing, f"never drawn: {sorted(missing)}"


def _one_trace(tr: synth.SynthTrace, fmt: str) -> shapes.Shape:
    return shapes.Shape(traces=[tr], fmt=fmt, rank_dir=False, families=frozenset())


@pytest.mark.parametrize("fmt", shapes.FORMATS)
def test_the_checker_sees_a_wrong_busy(fmt: str, tmp_path: Path) -> None:
    """The suite can fail: a kernel the file does not hold breaks the busy check, and only it."""
    tr = synth.SynthTrace()
    tr.launch("k", 0, 1_000, 2_000, 5_000)
    shape = _one_trace(tr, fmt)
    path = shape.write(tmp_path)
    assert shapes_check.written_problems(shape, path) == []
    tr.launch("k", 10_000, 1_000, 12_000, 3_000)  # in the drawn timeline, not in the file
    found = shapes_check.written_problems(shape, path)
    assert found == [
        "device (0, 0): busy 5000 != union 8000",
        "device (0, 0): window 5000 != 13000",
    ]


def _waits_without_records(launched: bool) -> synth.SynthTrace:
    """Stream-wait calls and no event-record call (issue 43's crash); ``launched=False``: the
    GPU work has no launch call either (its sibling)."""
    tr = synth.SynthTrace()
    if launched:
        tr.launch("k1", 0, 1_000, 2_000, 5_000)
    else:
        tr.events.append(synth.SynthEvent("kernel", "k1", 2_000, 5_000, device=0, stream=7))
    tr.api("cudaStreamWaitEvent", 3_000, 500)
    tr.api("cudaStreamWaitEvent", 3_600, 500)
    if launched:
        tr.launch("k2", 4_200, 1_000, 20_000, 5_000, stream=13)
    else:
        tr.events.append(synth.SynthEvent("kernel", "k2", 20_000, 5_000, device=0, stream=13))
    return tr


@pytest.mark.parametrize("fmt", shapes.FORMATS)
@pytest.mark.parametrize("launched", [True, False], ids=["launched", "no_launch_calls"])
def test_stream_waits_without_event_records(fmt: str, launched: bool, tmp_path: Path) -> None:
    shape = _one_trace(_waits_without_records(launched), fmt)
    assert shapes_check.problems(shape, tmp_path, cli=True) == []
    assert shape.expected_busy() == {(0, 0): 10_000}  # the reference itself: 2 x 5 us


def _overlapping_collectives(rank: int) -> synth.SynthTrace:
    """Two all-reduces on two streams at once; rank 1 arrives 7 us after rank 0 at both."""
    tr = synth.SynthTrace(rank=rank, world_size=2, pid=1000 + rank)
    late = 7_000 * rank
    for stream, start in ((13, 1_000), (20, 2_000)):
        gpu = start + late
        tr.launch(shapes.NCCL_KERNEL, gpu - 500, 400, gpu, 11_000 - gpu, stream=stream)
    return tr


@pytest.mark.parametrize("fmt", shapes.FORMATS)
def test_overlapping_collectives_wait_in_wall_clock_ns(fmt: str, tmp_path: Path) -> None:
    """Found by the long profile: collectives on two streams at once were summed, so rank 0's
    ``comm_wait_ns`` (and its ``straggler_wait`` finding) claimed more than its window. Rank 0
    waits [1, 8) and [2, 9) us: 8 us of wall clock, not 14; its collectives cover [1, 11)."""
    traces = [_overlapping_collectives(r) for r in (0, 1)]
    shape = shapes.Shape(traces=traces, fmt=fmt, rank_dir=True, families=frozenset())
    assert shapes_check.problems(shape, tmp_path, cli=True) == []
    from traceforensics.analysis import analyze
    from traceforensics.ingest import load_path

    res = analyze(load_path(tmp_path / "ranks"))
    assert res.ranks is not None
    rows = {r.rank: r for r in res.ranks.per_rank}
    assert (rows[0].comm_ns, rows[0].comm_wait_ns, rows[0].comm_transfer_ns) == (
        10_000,
        8_000,
        2_000,
    )
    assert (rows[1].comm_ns, rows[1].comm_wait_ns) == (3_000, 0)
    assert rows[0].comm_ns == res.device(0, 0).comm_ns  # type: ignore[union-attr]
