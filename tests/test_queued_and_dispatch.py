"""Issue 11, items 4 and 5: what queued work waited for, and dispatch vs CPU work.

Every scenario is a ``tools/synth.py`` trace written as Kineto JSON and as an Nsight Systems
export, loaded back through the ingesters. The expected ns are worked out by hand from each
timeline (drawn next to it, times in µs relative to the trace start), not copied from the tool.
"""

from __future__ import annotations

from pathlib import Path

import pytest

import synth
from traceforensics.analysis import AnalysisOptions, analyze
from traceforensics.analysis.idle.gaps import Gap
from traceforensics.ingest import load_path
from traceforensics.model.session import TraceSession

US = 1_000
FORMATS = ["kineto", "nsys"]


def _load(tr: synth.SynthTrace, fmt: str, tmp: Path) -> tuple[TraceSession, int]:
    """Write ``tr`` in ``fmt``, load it back; also the offset from builder to table time."""
    if fmt == "kineto":
        return load_path(tr.write_kineto(tmp / "t.pt.trace.json")), int(tr.base_ns)
    return load_path(tr.write_nsys(tmp / "t.sqlite")), 0


def _gap_at(session: TraceSession, start_ns: int) -> Gap:
    res = analyze(session, AnalysisOptions.of(window="device", top_gaps=100))
    (gap,) = [g for g in res.idle.gaps if g.start_ns == start_ns]
    assert sum(gap.causes.values()) == gap.dur_ns
    return gap


# ------------------------------------------------------------------ item 4: queued work
def _cross_stream(record_after: str = "y", sync_record: bool = False) -> synth.SynthTrace:
    """device 0 / stream 7 waits on an event recorded after a 3 ms kernel on stream 13::

        host      [L k1][L y s13][EventRecord][StreamWaitEvent][L x s7]
                  10    20       30           40               50..55
        device 1  s13         |=============== y 50..3050 ===============|
        device 0  s7  ==k1 100..200==|.......... idle ..........|.2.|== x 3052..3152 ==

    ``record_after="k1"``: the event is recorded after k1 on stream 7 itself (no cross-stream
    dependency). ``sync_record``: Kineto/CUPTI's ``Stream Wait Event`` record goes with the
    wait call (same correlation id).
    """
    tr = synth.SynthTrace()
    tr.launch("k1", 10 * US, 5 * US, 100 * US, 100 * US, stream=7)
    if record_after == "y":
        tr.launch("y_long", 20 * US, 5 * US, 50 * US, 3_000 * US, stream=13, device=1)
    tr.api("cudaEventRecord", 30 * US, 2 * US)
    corr = tr.new_correlation()
    tr.api("cudaStreamWaitEvent", 40 * US, 3 * US, correlation=corr)
    if sync_record:
        tr.gpu_sync("Stream Wait Event", 41 * US, 1 * US, stream=7, correlation=corr)
    tr.launch("x", 50 * US, 5 * US, 3_052 * US, 100 * US, stream=7)
    return tr


@pytest.mark.parametrize("sync_record", [False, True])
@pytest.mark.parametrize("fmt", FORMATS)
def test_cross_stream_wait_is_charged_until_the_waited_work_ends(
    fmt: str, sync_record: bool, tmp_path: Path
) -> None:
    session, off = _load(_cross_stream(sync_record=sync_record), fmt, tmp_path)
    gap = _gap_at(session, off + 200 * US)
    # queued [200, 3050): waiting on y (stream 13); [3050, 3052): pick-up latency (<= 50 µs)
    # of x, launched at 50 before the gap: gpu_pickup (issue 44; was launch_overhead)
    assert gap.causes == {"cross_stream_wait": 2_850 * US, "gpu_pickup": 2 * US}
    wait = [e for e in gap.evidence if e.name == "cudaStreamWaitEvent"]
    assert len(wait) == 1
    assert (wait[0].cause, wait[0].kind, wait[0].start_ns) == (
        "cross_stream_wait",
        "cuda_api",
        off + 40 * US,
    )
    assert "stream 7 waited on an event" in wait[0].detail
    (waited,) = [e for e in gap.evidence if e.name == "y_long"]
    assert (waited.cause, waited.start_ns, waited.dur_ns) == (
        "cross_stream_wait",
        off + 50 * US,
        3_000 * US,
    )
    assert "device 1, stream 13" in waited.detail
    assert any(e.name == "cudaEventRecord" and "stream 13" in e.detail for e in gap.evidence)
    # the first line is the queued op, charged to what held it back
    assert (gap.evidence[0].name, gap.evidence[0].cause) == ("x", "cross_stream_wait")


@pytest.mark.parametrize("fmt", FORMATS)
def test_wait_on_the_own_stream_is_no_dependency(fmt: str, tmp_path: Path) -> None:
    # the event is recorded after k1 on stream 7 itself: waiting on it holds nothing back, and
    # nothing else explains the 2.852 ms x sat in the queue
    session, off = _load(_cross_stream(record_after="k1"), fmt, tmp_path)
    gap = _gap_at(session, off + 200 * US)
    assert gap.causes == {"untraced": 2_852 * US}
    (why,) = [e for e in gap.evidence if e.cause == "untraced" and e.kind == "none"]
    assert "waited on k1 (stream 7), on the op's own stream" in why.detail


@pytest.mark.parametrize("fmt", FORMATS)
def test_satisfied_wait_explains_nothing(fmt: str, tmp_path: Path) -> None:
    """The waited-on kernel ``y`` (device 1) ended at 150, before device 0 went idle at 200::

    device 1  s13  |= y 50..150 =|
    device 0  s7   ==k1 100..200==|............ queued ............|== x 3052 ==
    """
    tr = synth.SynthTrace()
    tr.launch("k1", 10 * US, 5 * US, 100 * US, 100 * US, stream=7)
    tr.launch("y_short", 20 * US, 5 * US, 50 * US, 100 * US, stream=13, device=1)
    tr.api("cudaEventRecord", 30 * US, 2 * US)
    tr.api("cudaStreamWaitEvent", 40 * US, 3 * US)
    tr.launch("x", 50 * US, 5 * US, 3_052 * US, 100 * US, stream=7)
    session, off = _load(tr, fmt, tmp_path)
    gap = _gap_at(session, off + 200 * US)
    assert gap.causes == {"untraced": 2_852 * US}
    (why,) = [e for e in gap.evidence if e.cause == "untraced" and e.kind == "none"]
    assert "waited on y_short" in why.detail and "had ended" in why.detail


@pytest.mark.parametrize("fmt", FORMATS)
def test_queued_with_nothing_recorded_is_untraced(fmt: str, tmp_path: Path) -> None:
    """``x`` was launched at 50 (the call returned at 55) and starts at 2100 with no wait call,
    no wait record and no collective before it::

        host      [L k1]     [L x]
        stream 7  ==k1 100..200==|............ queued 1900 ............|== x 2100 ==
    """
    tr = synth.SynthTrace()
    tr.launch("k1", 10 * US, 5 * US, 100 * US, 100 * US, stream=7)
    tr.cpu_range("aten::relu", 45 * US, 15 * US)
    tr.launch("x", 50 * US, 5 * US, 2_100 * US, 100 * US, stream=7)
    session, off = _load(tr, fmt, tmp_path)
    gap = _gap_at(session, off + 200 * US)
    assert gap.causes == {"untraced": 1_900 * US}
    (why,) = [e for e in gap.evidence if e.cause == "untraced" and e.kind == "none"]
    assert (why.start_ns, why.dur_ns) == (off + 200 * US, 1_900 * US)
    assert "nothing recorded explains the wait" in why.detail


@pytest.mark.parametrize("fmt", FORMATS)
def test_same_stream_busy_is_no_gap(fmt: str, tmp_path: Path) -> None:
    # x queued behind a 2 ms kernel on its own stream: the device is busy, there is no gap
    tr = synth.SynthTrace()
    tr.launch("k_long", 10 * US, 5 * US, 100 * US, 2_000 * US, stream=7)
    tr.launch("x", 20 * US, 5 * US, 2_100 * US, 100 * US, stream=7)
    session, _ = _load(tr, fmt, tmp_path)
    res = analyze(session, AnalysisOptions.of(window="device"))
    (dev,) = res.devices
    assert dev.idle_ns == 0 and res.idle.gaps == []


# ------------------------------------------------------------------ item 5: dispatch
@pytest.mark.parametrize("fmt", FORMATS)
def test_long_own_dispatch_is_all_launch_overhead(fmt: str, tmp_path: Path) -> None:
    """``aten::addmm`` spends 3 ms of its own time (no child) before its launch call::

    GPU   ==k1 100..200==|................... gap ...................|== k2 3215 ==
    host  aten::addmm 200 .................................[L 3200..3210]
          [200, 3200) dispatch   [3200, 3210) launch call   [3210, 3215) queued
    """
    tr = synth.SynthTrace()
    tr.launch("k1", 10 * US, 5 * US, 100 * US, 100 * US)
    tr.cpu_range("aten::addmm", 200 * US, 3_020 * US)
    tr.launch("k2", 3_200 * US, 10 * US, 3_215 * US, 100 * US)
    session, off = _load(tr, fmt, tmp_path)
    gap = _gap_at(session, off + 200 * US)
    # the old rule capped dispatch at 1 ms: 2 ms cpu_compute + 1.015 ms launch_overhead
    assert gap.causes == {"launch_overhead": 3_015 * US}


def _child_then_dispatch(child: str, child_kind: str, own_before_ns: int) -> synth.SynthTrace:
    """``aten::index`` runs ``own_before_ns`` of its own time, then a 3 ms child that does other
    work, then dispatches its launch for 50 µs::

        GPU   ==k1 100..200==|....................... gap .......................|== k2 ==
        host  aten::index 200 ..............................................[L]
                 own  |=========== child (3 ms) ===========| dispatch 50 µs
              200   c0                                    c1              c1+50  +10  +5
    """
    tr = synth.SynthTrace()
    tr.launch("k1", 10 * US, 5 * US, 100 * US, 100 * US)
    c0 = 200 * US + own_before_ns
    c1 = c0 + 3_000 * US
    tr.cpu_range("aten::index", 200 * US, c1 + 70 * US - 200 * US)
    tr.cpu_range(child, c0, 3_000 * US, kind=child_kind)
    tr.launch("k2", c1 + 50 * US, 10 * US, c1 + 65 * US, 100 * US)
    return tr


@pytest.mark.parametrize(
    ("child", "kind", "cause"),
    [
        ("aten::nonzero", "cpu_op", "cpu_compute"),
        ("load_batch", "annotation", "data_loading"),
        ("aten::_local_scalar_dense", "cpu_op", "host_sync"),
    ],
)
@pytest.mark.parametrize("fmt", FORMATS)
def test_child_keeps_its_class_and_dispatch_starts_after_it(
    fmt: str, child: str, kind: str, cause: str, tmp_path: Path
) -> None:
    session, off = _load(_child_then_dispatch(child, kind, 0), fmt, tmp_path)
    gap = _gap_at(session, off + 200 * US)
    # child 3 ms -> its class; dispatch 50 + launch call 10 + queued 5 -> launch_overhead
    assert gap.causes == {cause: 3_000 * US, "launch_overhead": 65 * US}
    (disp,) = [e for e in gap.evidence if e.detail.startswith("operator dispatching")]
    assert disp.name == "aten::index"


@pytest.mark.parametrize("fmt", FORMATS)
def test_own_time_before_the_last_child_is_cpu_work(fmt: str, tmp_path: Path) -> None:
    # 400 µs of aten::index's own time before its child: not dispatch (the dispatch window runs
    # from the end of the last child to the launch call), so cpu_compute with the child's 3 ms
    session, off = _load(_child_then_dispatch("aten::nonzero", "cpu_op", 400 * US), fmt, tmp_path)
    gap = _gap_at(session, off + 200 * US)
    assert gap.causes == {"cpu_compute": 3_400 * US, "launch_overhead": 65 * US}


@pytest.mark.parametrize("fmt", FORMATS)
def test_child_that_launched_work_is_dispatch_too(fmt: str, tmp_path: Path) -> None:
    """A run of tiny kernels whose GPU time rounds to zero sits in one gap; the earlier
    ``aten::zero_`` children launched work of their own, so they do not end the dispatch::

        GPU   ==k1 100..200==|................. gap ..................|== f3 390 ==
        host  aten::_foreach_zero_ 200 ........................................ 400
                [zero_ 210..240 [L f1]] [zero_ 270..300 [L f2]] [zero_ 330..395 [L f3 370..380]]
        GPU                  f1 (0 ns at 235)      f2 (0 ns at 295)
    """
    tr = synth.SynthTrace()
    tr.launch("k1", 10 * US, 5 * US, 100 * US, 100 * US)
    tr.cpu_range("aten::_foreach_zero_", 200 * US, 200 * US)
    for i, (a, b) in enumerate(((210, 240), (270, 300))):
        tr.cpu_range("aten::zero_", a * US, (b - a) * US)
        tr.launch(f"f{i + 1}", (a + 10) * US, 10 * US, (a + 25) * US, 0)
    tr.cpu_range("aten::zero_", 330 * US, 65 * US)
    tr.launch("f3", 370 * US, 10 * US, 390 * US, 1 * US)
    session, off = _load(tr, fmt, tmp_path)
    gap = _gap_at(session, off + 200 * US)
    assert gap.causes == {"launch_overhead": 190 * US}


# ------------------------------------------- issue 43: a wait call with no record call traced
@pytest.mark.parametrize("fmt", FORMATS)
def test_wait_without_any_record_call_charges_the_wait(fmt: str, tmp_path: Path) -> None:
    """PyTorch records events through the caching allocator and NCCL without a traced
    ``cudaEventRecord``: a trace has wait calls and no record call at all (a lookup into the
    empty record list crashed). What the wait held ``x`` for is unknown, so the wait covers the
    whole queued part::

        host      [L k1]      [StreamWaitEvent][L x s7]
                  10          40               50..55
        stream 7  ==k1 100..200==|........ queued 2852 ........|== x 3052 ==
    """
    tr = synth.SynthTrace()
    tr.launch("k1", 10 * US, 5 * US, 100 * US, 100 * US, stream=7)
    tr.api("cudaStreamWaitEvent", 40 * US, 3 * US)
    tr.launch("x", 50 * US, 5 * US, 3_052 * US, 100 * US, stream=7)
    session, off = _load(tr, fmt, tmp_path)
    gap = _gap_at(session, off + 200 * US)
    assert gap.causes == {"cross_stream_wait": 2_852 * US}
    (wait,) = [e for e in gap.evidence if e.name == "cudaStreamWaitEvent"]
    assert wait.start_ns == off + 40 * US
    assert not [e for e in gap.evidence if e.name == "cudaEventRecord"]


@pytest.mark.parametrize("fmt", FORMATS)
def test_wait_calls_with_no_linked_launch_at_all(fmt: str, tmp_path: Path) -> None:
    """Wait and record calls are traced but no GPU op has a launch call (the launch index is
    empty): nothing links an op to a thread, so no wait is charged and the gap is untraced::

        host      [EventRecord][StreamWaitEvent]
        stream 7  ==k1 100..200==|........ 1800 ........|== x 2000 ==   (no launch calls)
    """
    tr = synth.SynthTrace()
    tr.api("cudaEventRecord", 30 * US, 2 * US)
    tr.api("cudaStreamWaitEvent", 40 * US, 3 * US)
    for name, start in (("k1", 100 * US), ("x", 2_000 * US)):
        tr._add(synth.SynthEvent("kernel", name, start, 100 * US, device=0, stream=7))
    session, _off = _load(tr, fmt, tmp_path)
    res = analyze(session, AnalysisOptions.of(window="device", top_gaps=100))
    (dev,) = res.devices
    assert (dev.window_ns, dev.busy_ns) == (2_000 * US, 200 * US)
    assert sum(dev.idle_by_cause.values()) == dev.idle_ns == 1_800 * US
    assert {c: ns for c, ns in dev.idle_by_cause.items() if ns} == {"untraced": 1_800 * US}
