"""The attribution rule on hand-built event tables, one rule per test.

Expected splits are worked out by hand from each scenario's timeline (written next to it), not
copied from the tool.
"""

from __future__ import annotations

import random
from typing import Any

import polars as pl
import pytest

from tests.conftest import nonempty, plain_union
from traceforensics.analysis import AnalysisOptions, analyze
from traceforensics.analysis.idle.causes import (
    DISPATCH_MAX_NS,
    QUEUED_LAUNCH_LATENCY_MAX_NS,
    SLOW_LAUNCH_CALL_MIN_NS,
    SYNC_CATCHUP_MAX_NS,
    SYNC_DRAIN_SLACK_NS,
)
from traceforensics.model.session import TraceMeta, TraceSession

US = 1_000  # all scenario times are in µs-sized ns steps to stay readable


class Tl:
    """Minimal timeline builder (independent of tools/synth.py)."""

    def __init__(self) -> None:
        self.rows: list[dict[str, Any]] = []
        self.corr = 0

    def host(self, kind: str, name: str, start: int, end: int, tid: int = 1) -> None:
        self.rows.append(
            {
                "kind": kind,
                "name": name,
                "start_ns": start,
                "dur_ns": end - start,
                "pid": 1,
                "tid": tid,
            }
        )

    def launch(
        self,
        api: tuple[int, int],
        gpu: tuple[int, int],
        *,
        tid: int = 1,
        stream: int = 7,
        kind: str = "kernel",
        api_name: str = "cudaLaunchKernel",
        is_comm: bool = False,
        linked: bool = True,
    ) -> None:
        self.corr += 1
        self.rows.append(
            {
                "kind": "cuda_api",
                "name": api_name,
                "start_ns": api[0],
                "dur_ns": api[1] - api[0],
                "pid": 1,
                "tid": tid,
                "correlation": self.corr,
            }
        )
        self.rows.append(
            {
                "kind": kind,
                "name": f"{kind}{self.corr}",
                "start_ns": gpu[0],
                "dur_ns": gpu[1] - gpu[0],
                "device": 0,
                "stream": stream,
                "correlation": self.corr if linked else None,
                "is_comm": is_comm,
            }
        )

    def sync_record(self, name: str, start: int, stream: int) -> None:
        self.rows.append(
            {
                "kind": "gpu_sync",
                "name": name,
                "start_ns": start,
                "dur_ns": 1,
                "device": 0,
                "stream": stream,
            }
        )

    def session(self) -> TraceSession:
        rows = [{"event_id": i, "rank": 0, "is_comm": False, **r} for i, r in enumerate(self.rows)]
        frame = pl.from_dicts(rows, infer_schema_length=None)
        return TraceSession.from_frames(frame, TraceMeta(source_format="test"))


def only_gap(tl: Tl, window: str = "device") -> dict[str, int]:
    res = analyze(tl.session(), AnalysisOptions.of(window=window))
    assert len(res.idle.gaps) == 1, res.idle.gaps
    return res.idle.gaps[0].causes


def base(sync_end: int) -> Tl:
    """k1 GPU [100,200) µs; host: sync call returns at sync_end; DataLoader [220,260);
    aten::add [260,300) dispatching the launch [290,295) of k2 GPU [300,400)."""
    tl = Tl()
    tl.launch((10 * US, 15 * US), (100 * US, 200 * US))
    tl.host("cuda_api", "cudaStreamSynchronize", 20 * US, sync_end)
    tl.host("annotation", "enumerate(DataLoader)#_Iter.__next__", 220 * US, 260 * US)
    tl.host("cpu_op", "aten::add", 260 * US, 300 * US)
    tl.launch((290 * US, 295 * US), (300 * US, 400 * US))
    return tl


def test_sync_drain_then_catch_up() -> None:
    # gap [200,300): [200,205) waiting for the sync to return, [205,220) untraced catch-up and
    # [260,290) dispatch catch-up -> host_sync (50); DataLoader keeps its cause (40); launch
    # call [290,295) + pick-up [295,300) of the relaunch, inside the catch-up -> host_sync too
    # (issue 44: the relaunch after a sync is the sync's cost; was launch_overhead).
    causes = only_gap(base(205 * US))
    assert causes == {"host_sync": 60 * US, "data_loading": 40 * US}


def test_sync_drain_slack_boundary() -> None:
    # returned exactly SYNC_DRAIN_SLACK_NS before the gap: still the drain
    at = 200 * US - SYNC_DRAIN_SLACK_NS
    # (the sync returned before the gap: no wait part, catch-up 20 + dispatch 30 + the
    # relaunch's call and pick-up 10, issue 44)
    assert only_gap(base(at)).get("host_sync") == 60 * US
    # one ns earlier: no drain; catch-up is untraced (15+5) and dispatch launch_overhead (30+10)
    causes = only_gap(base(at - 1))
    assert causes == {"untraced": 20 * US, "data_loading": 40 * US, "launch_overhead": 40 * US}


def test_dispatch_window_stops_at_touching_sibling() -> None:
    # aten::empty [200,250) and aten::add [250,300) touch: only aten::add dispatches the launch
    tl = Tl()
    tl.launch((10 * US, 15 * US), (100 * US, 200 * US))
    tl.host("cpu_op", "aten::empty", 200 * US, 250 * US)
    tl.host("cpu_op", "aten::add", 250 * US, 300 * US)
    tl.launch((290 * US, 295 * US), (300 * US, 400 * US))
    assert only_gap(tl) == {"cpu_compute": 50 * US, "launch_overhead": 50 * US}


def test_launching_thread_decides() -> None:
    # thread 1 is in the DataLoader, but k2 is launched by thread 2 that recorded nothing
    tl = Tl()
    tl.launch((10 * US, 15 * US), (100 * US, 200 * US))
    tl.host("annotation", "enumerate(DataLoader)#x", 150 * US, 400 * US, tid=1)
    tl.host("cpu_op", "aten::relu", 50 * US, 60 * US, tid=2)
    tl.launch((290 * US, 295 * US), (300 * US, 400 * US), tid=2)
    assert only_gap(tl) == {"untraced": 90 * US, "launch_overhead": 10 * US}


def test_pageable_copy_call_is_memcpy() -> None:
    # copy call [210,900) stages on the host; the DMA starts at 800 and ends the gap
    tl = Tl()
    tl.launch((10 * US, 15 * US), (100 * US, 200 * US))
    tl.launch((210 * US, 900 * US), (800 * US, 850 * US), kind="memcpy", api_name="cudaMemcpyAsync")
    assert only_gap(tl) == {"untraced": 10 * US, "memcpy": 590 * US}


@pytest.mark.parametrize(
    ("queued", "wait", "comm", "expected"),
    [
        # launched long before the gap: pick-up, not launch overhead (issue 44)
        (QUEUED_LAUNCH_LATENCY_MAX_NS, False, False, "gpu_pickup"),
        (QUEUED_LAUNCH_LATENCY_MAX_NS + 1, False, False, "untraced"),
        (100 * US, True, False, "cross_stream_wait"),
        (100 * US, False, True, "communication"),
    ],
)
def test_queued_work(queued: int, wait: bool, comm: bool, expected: str) -> None:
    # k2 on stream 9 was launched at [50,55) long before the gap [200, 200+queued)
    tl = Tl()
    tl.launch((10 * US, 15 * US), (100 * US, 200 * US))
    if wait:
        tl.sync_record("Stream Wait Event", 45 * US, stream=9)
    tl.launch((50 * US, 55 * US), (200 * US + queued, 500 * US), stream=9, is_comm=comm)
    assert only_gap(tl) == {expected: queued}


def test_stale_wait_record_does_not_count() -> None:
    # the wait record precedes an earlier launch on stream 9, so it gated that one, not k3
    tl = Tl()
    tl.sync_record("Stream Wait Event", 5 * US, stream=9)
    tl.launch((8 * US, 9 * US), (20 * US, 30 * US), stream=9)
    tl.launch((10 * US, 15 * US), (100 * US, 200 * US))
    tl.launch((50 * US, 55 * US), (300 * US, 500 * US), stream=9)
    res = analyze(tl.session(), AnalysisOptions.of(window="device"))
    big = max(res.idle.gaps, key=lambda g: g.dur_ns)
    assert big.causes == {"untraced": 100 * US}


def test_unlinked_op_is_untraced_and_trailing_gap_uses_last_thread() -> None:
    tl = Tl()
    tl.launch((10 * US, 15 * US), (100 * US, 200 * US))
    tl.launch((250 * US, 255 * US), (300 * US, 400 * US), linked=False)
    tl.host("annotation", "enumerate(DataLoader)#x", 350 * US, 1000 * US)
    res = analyze(tl.session(), AnalysisOptions.of(window="trace"))
    by_start = {g.start_ns: g.causes for g in res.idle.gaps}
    assert by_start[200 * US] == {"untraced": 100 * US}
    # trailing [400,1000): the thread that launched the last work is in the DataLoader
    assert by_start[400 * US] == {"data_loading": 600 * US}
    # leading [10,100): k1's launch call [10,15) then queued [15,100) > threshold -> untraced
    assert by_start[10 * US] == {"launch_overhead": 5 * US, "untraced": 85 * US}


def _union_total(spans: list[tuple[int, int]], lo: int, hi: int) -> int:
    """Plain-Python busy time of ``spans`` inside [lo, hi)."""
    clipped = [(max(s, lo), min(e, hi)) for s, e in spans]
    return sum(e - s for s, e in plain_union(clipped))


@pytest.mark.parametrize("seed", range(12))
def test_random_timelines_split_exactly(seed: int) -> None:
    rng = random.Random(seed)
    tl = Tl()
    names = [
        "aten::mm",
        "enumerate(DataLoader)#x",
        "cudaFree",
        "checkpoint",
        "nccl:all_reduce",
        "aten::item",
        "my_range",
    ]
    for _ in range(60):
        tid = rng.choice([1, 2])
        s = rng.randrange(0, 5_000_000)
        e = s + rng.randrange(1, 400_000)
        name = rng.choice(names)
        kind = "cuda_api" if name.startswith("cuda") else rng.choice(["cpu_op", "annotation"])
        tl.host(kind, name, s, e, tid=tid)
    spans = []
    for _ in range(40):
        ls = rng.randrange(0, 5_000_000)
        gs = ls + rng.randrange(0, 300_000)
        ge = gs + rng.randrange(1, 200_000)
        tl.launch(
            (ls, ls + rng.randrange(1, 20_000)),
            (gs, ge),
            tid=rng.choice([1, 2]),
            stream=rng.choice([7, 9]),
            linked=rng.random() > 0.1,
        )
        spans.append((gs, ge))
    res = analyze(tl.session(), AnalysisOptions.of(window="trace", top_gaps=10_000))
    (dev,) = res.devices
    lo, hi = dev.window_start_ns, dev.window_start_ns + dev.window_ns
    assert dev.busy_ns == _union_total(spans, lo, hi)
    assert dev.idle_ns == dev.window_ns - dev.busy_ns
    assert sum(dev.idle_by_cause.values()) == dev.idle_ns
    assert min(dev.idle_by_cause.values()) >= 0
    assert sum(g.dur_ns for g in res.idle.gaps) == dev.idle_ns
    for g in nonempty(res.idle.gaps):
        assert sum(g.causes.values()) == g.dur_ns
        assert all(v > 0 for v in g.causes.values())


def test_sync_issued_inside_the_gap_drains_nothing() -> None:
    # the GPU is idle from 200; a cudaDeviceSynchronize at [250,252) returns at once: only its
    # own 2 µs are host_sync (thread class), the rest is untraced, not "drain"
    tl = Tl()
    tl.launch((10 * US, 15 * US), (100 * US, 200 * US))
    tl.host("cuda_api", "cudaDeviceSynchronize", 250 * US, 252 * US)
    tl.launch((290 * US, 295 * US), (300 * US, 400 * US))
    assert only_gap(tl) == {"untraced": 88 * US, "host_sync": 2 * US, "launch_overhead": 10 * US}


@pytest.mark.parametrize(
    ("own_ns", "cpu_ns"),
    [
        (1_500 * US, 0),  # no child: all of the operator's own time is dispatch (no 1 ms cap)
        (DISPATCH_MAX_NS, 0),  # at the sanity bound
        (DISPATCH_MAX_NS + 500 * US, 500 * US),  # beyond it: the excess is the op's CPU work
    ],
)
def test_dispatch_is_the_operators_own_time(own_ns: int, cpu_ns: int) -> None:
    # aten::add runs own_ns with no child before its launch: dispatch, up to DISPATCH_MAX_NS
    tl = Tl()
    tl.launch((10 * US, 15 * US), (100 * US, 200 * US))
    t_launch = 200 * US + own_ns
    tl.host("cpu_op", "aten::add", 200 * US, t_launch + 10 * US)
    tl.launch((t_launch, t_launch + 5 * US), (t_launch + 10 * US, t_launch + 50 * US))
    expected = {"launch_overhead": own_ns - cpu_ns + 10 * US}
    if cpu_ns:
        expected["cpu_compute"] = cpu_ns
    assert only_gap(tl) == expected


@pytest.mark.parametrize(
    ("call_ns", "cause"),
    [(SLOW_LAUNCH_CALL_MIN_NS, "launch_overhead"), (SLOW_LAUNCH_CALL_MIN_NS + 1, "compilation")],
)
def test_slow_launch_call_is_module_loading(call_ns: int, cause: str) -> None:
    tl = Tl()
    tl.launch((10 * US, 15 * US), (100 * US, 200 * US))
    end = 300 * US + call_ns
    tl.launch((300 * US, end), (end + 1 * US, end + 50 * US))
    causes = only_gap(tl)
    assert causes.pop("untraced") == 100 * US
    assert causes.get(cause, 0) >= call_ns


def test_catch_up_is_capped() -> None:
    # the sync returns 5 µs into the gap; then 3 ms of untraced Python before the launch
    tl = Tl()
    tl.launch((10 * US, 15 * US), (100 * US, 200 * US))
    tl.host("cuda_api", "cudaStreamSynchronize", 20 * US, 205 * US)
    t_launch = 205 * US + 3_000 * US
    tl.launch((t_launch, t_launch + 5 * US), (t_launch + 10 * US, t_launch + 50 * US))
    assert only_gap(tl) == {
        "host_sync": 5 * US + SYNC_CATCHUP_MAX_NS,
        "untraced": 3_000 * US - SYNC_CATCHUP_MAX_NS,
        "launch_overhead": 10 * US,
    }
