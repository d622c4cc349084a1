"""Busy-fraction timeline: exact per-bin overlap, cross-checked by a plain-Python computation."""

from __future__ import annotations

import numpy as np
import polars as pl
import pytest

from tests.conftest import plain_union
from traceforensics.analysis.options import AnalysisOptions
from traceforensics.analysis.utilization.bins import utilization_bin_ns
from traceforensics.analysis.utilization.timeline import (
    UtilizationTimeline,
    analyze_utilization,
    busy_fraction_bins,
)
from traceforensics.model.session import TraceMeta, TraceSession


def _timelines(session: TraceSession, bin_ms: float = 100.0) -> list[UtilizationTimeline]:
    """The utilization pass's timelines at ``bin_ms``."""
    return [p.timeline for p in analyze_utilization(session, AnalysisOptions.of(bin_ms=bin_ms))]


def _session(rows: list[tuple[str, int, int, int, int]]) -> TraceSession:
    kind, start, dur, device, stream = zip(*rows, strict=True)
    frame = pl.DataFrame(
        {
            "event_id": list(range(len(rows))),
            "kind": list(kind),
            "start_ns": list(start),
            "dur_ns": list(dur),
            "rank": [0] * len(rows),
            "device": [None if d < 0 else d for d in device],
            "stream": [None if s < 0 else s for s in stream],
            "name": ["k"] * len(rows),
        }
    )
    return TraceSession.from_frames(frame, TraceMeta(source_format="test"))


def _plain(intervals: list[tuple[int, int]], lo: int, hi: int, bin_ns: int) -> list[float]:
    """Per bin, per nanosecond-free: union by sweeping sorted intervals, then overlap each bin."""
    merged = plain_union(intervals)
    out = []
    b = lo
    while b < hi:
        be = min(b + bin_ns, hi)
        busy = sum(max(0, min(e, be) - max(s, b)) for s, e in merged)
        out.append(busy / (be - b))
        b += bin_ns
    return out


def test_bins_match_plain_python_on_random_events() -> None:
    rng = np.random.default_rng(3)
    rows = []
    for _ in range(300):
        dev = int(rng.integers(0, 2))
        rows.append(
            (
                str(rng.choice(["kernel", "memcpy", "memset"])),
                int(rng.integers(0, 10_000_000)),
                int(rng.integers(0, 400_000)),
                dev,
                int(rng.integers(1, 4)),
            )
        )
    rows.append(("cpu_op", 0, 12_345_678, -1, -1))  # host row: outside the device window
    rows.append(("gpu_sync", 100, 9_000_000, 0, 1))  # a wait, not work
    session = _session(rows)
    timelines = _timelines(session, bin_ms=0.07)
    assert [(t.rank, t.device) for t in timelines] == [(0, 0), (0, 1)]
    for tl in timelines:
        ivs = [
            (r[1], r[1] + r[2])
            for r in rows
            if r[3] == tl.device and r[0] in ("kernel", "memcpy", "memset")
        ]
        # the device's analysis window: its first to last GPU work (not the host row)
        lo, hi = min(s for s, _ in ivs), max(e for _, e in ivs)
        assert (tl.start_ns, tl.end_ns) == (lo, hi) and tl.bin_ns == 70_000
        want = _plain(ivs, lo, hi, 70_000)
        assert len(tl.values) == len(want)
        assert np.allclose(tl.values, want, atol=1e-12)
        assert np.all((tl.values >= 0) & (tl.values <= 1))


def test_overlapping_streams_count_once_and_json_shape() -> None:
    session = _session(
        [
            ("kernel", 0, 150_000_000, 0, 1),
            ("kernel", 50_000_000, 100_000_000, 0, 2),  # inside the first: no double count
            ("memcpy", 250_000_000, 25_000_000, 0, 3),
        ]
    )
    (tl,) = _timelines(session, bin_ms=25.0)
    # a 275 ms window holds < 100 bins of 25 ms: 2 ms bins (bins.utilization_bin_ns); busy
    # [0, 150) ms (two streams, counted once), idle [150, 250), busy [250, 275)
    assert tl.bin_ns == 2_000_000 and tl.values.size == 138  # 137 whole bins + 1 ms
    assert tl.values.tolist() == [1.0] * 75 + [0.0] * 50 + [1.0] * 13
    js = tl.to_json()
    assert (js["bin_ms"], js["start_ns"], js["end_ns"]) == (2.0, 0, 275_000_000)
    assert tl.interval_s == 0.002
    (tl,) = _timelines(session, bin_ms=2.5)  # 110 bins of 2.5 ms: the asked-for bin
    assert tl.bin_ns == 2_500_000
    assert tl.values.tolist() == [1.0] * 60 + [0.0] * 40 + [1.0] * 10


def test_partial_last_bin_is_divided_by_its_own_length() -> None:
    s = np.array([250], dtype=np.int64)
    e = np.array([275], dtype=np.int64)
    assert list(busy_fraction_bins(s, e, 0, 275, 100)) == [0.0, 0.0, pytest.approx(25 / 75)]


def test_bin_for_short_windows() -> None:
    # the one rule (tests/test_utilization_bins.py has the rest): the asked-for bin when the
    # window holds 100 of them, else a 1-2-5 bin giving at least 100
    assert utilization_bin_ns(60 * 10**9, 100.0) == 100_000_000
    assert utilization_bin_ns(1_050_000_000, 100.0) == 10_000_000
    assert utilization_bin_ns(10_000_000, 100.0) == 100_000
