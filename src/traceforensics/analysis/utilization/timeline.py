"""GPU busy fraction per time bin, per device — the curve a dashboard would have drawn.

For each (rank, device) the busy intervals (union of kernel/memcpy/memset, all streams; see
``intervals.busy_intervals``) are cut into bins of ``bin_ns`` from a common ``start_ns``; a
bin's value is the busy time inside it divided by the bin's length (the last bin may be
shorter: it is divided by its own length). Overlap is exact, computed from the cumulative busy
time B(t) at every bin edge:

    busy:     |=====|      |==|
    bins:   [   0   |   1   |   2   )
    value_k = (B(edge_k+1) - B(edge_k)) / (edge_k+1 - edge_k)
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Final

import numpy as np
import numpy.typing as npt
import polars as pl

from traceforensics.analysis.intervals import I64, busy_intervals
from traceforensics.analysis.utilization.patterns import PatternResult, classify_utilization
from traceforensics.model.schema import BUSY_KINDS
from traceforensics.model.session import TraceSession

F64 = npt.NDArray[np.float64]
DEFAULT_BIN_MS: Final = 100.0
NS_PER_MS: Final = 1_000_000


@dataclass(frozen=True)
class UtilizationTimeline:
    """Busy fraction (0..1) of one device in consecutive bins of ``bin_ns`` from ``start_ns``
    (trace clock ns). ``values[k]`` covers ``[start_ns + k*bin_ns, start_ns + (k+1)*bin_ns)``."""

    rank: int
    device: int
    bin_ns: int
    start_ns: int
    values: F64

    @property
    def interval_s(self) -> float:
        return self.bin_ns / 1e9

    def percent(self) -> F64:
        """Values in % for ``patterns.classify_utilization``."""
        return self.values * 100.0

    def to_json(self) -> dict[str, Any]:
        """``{"bin_ms", "start_ns", "values"}`` for ``devices[].utilization``; values rounded
        to 4 decimals (0.1 µs of a 1 ms bin)."""
        return {
            "bin_ms": self.bin_ns / NS_PER_MS,
            "start_ns": self.start_ns,
            "values": [round(float(v), 4) for v in self.values],
        }


def cumulative_busy(starts: I64, ends: I64, at: I64) -> I64:
    """B(t): busy ns before each time in ``at``, for sorted disjoint ``[starts, ends)``."""
    lengths = np.concatenate(([0], np.cumsum(ends - starts, dtype=np.int64)))
    # intervals wholly before t: those with end <= t
    full = np.searchsorted(ends, at, side="right")
    out = lengths[full]
    # the next interval may have started before t
    nxt = np.minimum(full, starts.size - 1)
    partial = (full < starts.size) & (starts[nxt] < at) if starts.size else np.zeros_like(at, bool)
    if starts.size:
        out = out + np.where(partial, at - starts[nxt], 0)
    return out.astype(np.int64)


def busy_fraction_bins(starts: I64, ends: I64, start_ns: int, end_ns: int, bin_ns: int) -> F64:
    """Busy fraction per bin of disjoint sorted intervals over ``[start_ns, end_ns)``."""
    if bin_ns <= 0:
        raise ValueError("bin_ns must be positive")
    if end_ns <= start_ns:
        return np.zeros(0, dtype=np.float64)
    edges = np.arange(start_ns, end_ns, bin_ns, dtype=np.int64)
    edges = np.append(edges, np.int64(end_ns))
    busy = np.diff(cumulative_busy(starts, ends, edges))
    return busy / np.diff(edges).astype(np.float64)


def trace_window(session: TraceSession) -> tuple[int, int]:
    """``[first start, last end)`` over all events (ns, trace clock); (0, 0) when empty."""
    ev = session.events
    if ev.height == 0:
        return 0, 0
    row = ev.select(
        pl.col("start_ns").min().alias("lo"),
        (pl.col("start_ns") + pl.col("dur_ns")).max().alias("hi"),
    ).row(0)
    return int(row[0]), int(row[1])


def gpu_devices(session: TraceSession) -> list[tuple[int, int]]:
    """(rank, device) pairs that have busy work rows, sorted."""
    rows = (
        session.events.filter(
            pl.col("kind").is_in(list(BUSY_KINDS)) & pl.col("device").is_not_null()
        )
        .select("rank", "device")
        .unique()
        .sort("rank", "device")
    )
    return [(int(r), int(d)) for r, d in rows.iter_rows()]


def device_utilization(
    session: TraceSession,
    rank: int,
    device: int,
    bin_ms: float = DEFAULT_BIN_MS,
    window: tuple[int, int] | None = None,
) -> UtilizationTimeline:
    """Busy-fraction timeline of one device; ``window`` defaults to ``trace_window``."""
    lo, hi = window if window is not None else trace_window(session)
    bin_ns = max(round(bin_ms * NS_PER_MS), 1)
    s, e = busy_intervals(session.events, rank, device)
    return UtilizationTimeline(rank, device, bin_ns, lo, busy_fraction_bins(s, e, lo, hi, bin_ns))


def utilization_timelines(
    session: TraceSession, bin_ms: float = DEFAULT_BIN_MS
) -> list[UtilizationTimeline]:
    """One timeline per (rank, device), all on the same bins (the whole trace window)."""
    window = trace_window(session)
    return [device_utilization(session, r, d, bin_ms, window) for r, d in gpu_devices(session)]


def pattern_bin_ms(span_ns: int, bin_ms: float = DEFAULT_BIN_MS, min_bins: int = 100) -> float:
    """Bin size for classifying a short trace: ``bin_ms`` unless that gives fewer than
    ``min_bins`` bins, then span/min_bins (never under 1 ms). A 1 s trace at 100 ms has only 10
    bins — too few to see a pattern — so it is classified at 10 ms."""
    if span_ns <= 0:
        return bin_ms
    return max(min(bin_ms, span_ns / NS_PER_MS / min_bins), 1.0)


def classify_device(
    session: TraceSession, rank: int, device: int, bin_ms: float = DEFAULT_BIN_MS
) -> tuple[UtilizationTimeline, PatternResult]:
    """Pattern of one device's trace-derived curve, binned at ``pattern_bin_ms`` (finer than
    ``bin_ms`` for short traces); returns the timeline it was classified on and the result."""
    window = trace_window(session)
    tl = device_utilization(
        session, rank, device, pattern_bin_ms(window[1] - window[0], bin_ms), window
    )
    return tl, classify_utilization(tl.percent(), tl.interval_s)
