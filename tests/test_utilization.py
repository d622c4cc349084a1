"""Busy-fraction timeline: exact per-bin overlap, cross-checked by a plain-Python computation."""

from __future__ import annotations

import numpy as np
import polars as pl
import pytest

from tests.conftest import plain_union
from traceforensics.analysis.options import AnalysisOptions
from traceforensics.analysis.utilization.timeline import (
    UtilizationTimeline,
    analyze_utilization,
    busy_fraction_bins,
    pattern_bin_ms,
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
    rows.append(("cpu_op", 0, 12_345_678, -1, -1))  # host row: widens the window, never busy
    rows.append(("gpu_sync", 100, 9_000_000, 0, 1))  # a wait, not work
    session = _session(rows)
    timelines = _timelines(session, bin_ms=0.7)
    assert [(t.rank, t.device) for t in timelines] == [(0, 0), (0, 1)]
    lo = min(r[1] for r in rows)
    hi = max(r[1] + r[2] for r in rows)
    for tl in timelines:
        assert tl.start_ns == lo and tl.bin_ns == 700_000
        ivs = [
            (r[1], r[1] + r[2])
            for r in rows
            if r[3] == tl.device and r[0] in ("kernel", "memcpy", "memset")
        ]
        want = _plain(ivs, lo, hi, 700_000)
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
    (tl,) = _timelines(session)
    # bins [0,100) [100,200) [200,275) ms: 100, 50 and 25 busy ms
    assert list(tl.values) == [1.0, 0.5, pytest.approx(25 / 75)]
    assert tl.to_json() == {"bin_ms": 100.0, "start_ns": 0, "values": [1.0, 0.5, 0.3333]}
    assert tl.interval_s == 0.1


def test_partial_last_bin_is_divided_by_its_own_length() -> None:
    s = np.array([250], dtype=np.int64)
    e = np.array([275], dtype=np.int64)
    assert list(busy_fraction_bins(s, e, 0, 275, 100)) == [0.0, 0.0, pytest.approx(25 / 75)]


def test_pattern_bin_for_short_traces() -> None:
    assert pattern_bin_ms(60 * 10**9, 100.0) == 100.0
    assert pattern_bin_ms(1_050_000_000, 100.0) == pytest.approx(10.5)
    assert pattern_bin_ms(10_000_000, 100.0) == 1.0
