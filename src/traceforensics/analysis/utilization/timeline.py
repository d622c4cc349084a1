"""GPU busy fraction per time bin, per device — the curve a dashboard would have drawn — and the
utilization pass that classifies each device's curve.

For each device the busy union (the context's: kernel/memcpy/memset, all streams) is cut into
bins of ``bin_ns`` from a common ``start_ns`` (the first event of the trace); a bin's value is
the busy time inside it divided by the bin's length (the last bin may be shorter: it is divided
by its own length). Overlap is exact, computed from the cumulative busy time B(t) at every bin
edge:

    busy:     |=====|      |==|
    bins:   [   0   |   1   |   2   )
    value_k = (B(edge_k+1) - B(edge_k)) / (edge_k+1 - edge_k)
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Final

import numpy as np

from traceforensics.analysis.context import AnalysisContext, as_context
from traceforensics.analysis.intervals import cumulative
from traceforensics.analysis.options import AnalysisOptions
from traceforensics.analysis.utilization.patterns import PatternResult, classify_utilization
from traceforensics.model.errors import OptionError
from traceforensics.model.session import TraceSession
from traceforensics.model.units import F64, I64, NS_PER_MS, NS_PER_S

#: Most utilization bins per device (a 1 ms bin covers ~17 minutes of trace).
MAX_UTILIZATION_BINS: Final = 1_000_000
#: A curve is classified on at least this many bins (finer bins for short traces).
MIN_PATTERN_BINS: Final = 100


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
        return self.bin_ns / NS_PER_S

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


@dataclass
class DevicePattern:
    """The utilization timeline of one device (at ``bin_ms``) and the pattern of its curve
    (classified at ``pattern_bin_ms``)."""

    rank: int
    device: int
    timeline: UtilizationTimeline
    pattern: PatternResult


def busy_fraction_bins(starts: I64, ends: I64, start_ns: int, end_ns: int, bin_ns: int) -> F64:
    """Busy fraction per bin of disjoint sorted intervals over ``[start_ns, end_ns)``."""
    if bin_ns <= 0:
        raise ValueError("bin_ns must be positive")
    if end_ns <= start_ns:
        return np.zeros(0, dtype=np.float64)
    edges = np.arange(start_ns, end_ns, bin_ns, dtype=np.int64)
    edges = np.append(edges, np.int64(end_ns))
    busy = np.diff(cumulative(starts, ends, edges))
    out: F64 = busy / np.diff(edges).astype(np.float64)
    return out


def device_timeline(ctx: AnalysisContext, g: int, bin_ms: float) -> UtilizationTimeline:
    """Busy-fraction timeline of device ``g`` over the whole trace (``ctx.trace_span``)."""
    lo, hi = ctx.trace_span
    bin_ns = max(round(bin_ms * NS_PER_MS), 1)
    s, e = ctx.dev_union(g)
    rank, device = ctx.devices[g]
    return UtilizationTimeline(rank, device, bin_ns, lo, busy_fraction_bins(s, e, lo, hi, bin_ns))


def pattern_bin_ms(span_ns: int, bin_ms: float, min_bins: int = MIN_PATTERN_BINS) -> float:
    """Bin size for classifying a short trace: ``bin_ms`` unless that gives fewer than
    ``min_bins`` bins, then span/min_bins (never under 1 ms). A 1 s trace at 100 ms has only 10
    bins — too few to see a pattern — so it is classified at 10 ms."""
    if span_ns <= 0:
        return bin_ms
    return max(min(bin_ms, span_ns / NS_PER_MS / min_bins), 1.0)


def analyze_utilization(
    source: AnalysisContext | TraceSession, options: AnalysisOptions | None = None
) -> list[DevicePattern]:
    """One ``DevicePattern`` per device: the timeline at ``bin_ms`` (for JSON and plots) and
    the pattern of the curve binned at ``pattern_bin_ms`` (fine enough for the trace's length).
    Raises ``InputError`` when ``bin_ms`` would give more than ``MAX_UTILIZATION_BINS`` bins."""
    ctx = as_context(source, options)
    if not ctx.devices:
        return []
    bin_ms = ctx.options.utilization.bin_ms
    lo, hi = ctx.trace_span
    n_bins = (hi - lo) / (bin_ms * NS_PER_MS)
    if n_bins > MAX_UTILIZATION_BINS:
        raise OptionError(
            f"a utilization bin of {bin_ms:g} ms gives {n_bins:.3g} bins for a "
            f"{(hi - lo) / NS_PER_S:.3g} s trace (at most {MAX_UTILIZATION_BINS:,}); "
            "use a larger bin",
            "bin_ms",
        )
    fine_ms = pattern_bin_ms(hi - lo, bin_ms)
    out: list[DevicePattern] = []
    for g, (rank, device) in enumerate(ctx.devices):
        fine = device_timeline(ctx, g, fine_ms)
        pattern = classify_utilization(fine.percent(), fine.interval_s)
        out.append(DevicePattern(rank, device, device_timeline(ctx, g, bin_ms), pattern))
    return out
