"""GPU busy fraction per time bin, per device — the curve a dashboard would have drawn — and the
utilization pass that classifies each device's curve.

For each device the busy union (the context's: kernel/memcpy/memset, all streams) is cut into
bins over the device's analysis window ``[lo, hi)`` (the idle pass's window,
``ctx.window_lo/hi``), with the one rule of ``bins.py``: the first bin starts exactly at ``lo``,
the width is ``bin_ms`` (default 100 ms) when the window holds at least ``MIN_PATTERN_BINS``
of them and a finer 1-2-5 width otherwise, and the last bin, cut at ``hi``, is divided by its
own length. The pattern (and its p10/p50/p90) is classified on the same bins, the partial last
one dropped (``bins.classified_bins``):

    window:   lo [....................................................) hi
    bins:        [  0  |  1  |  2  | ...                   | n-2 | n-1 )
    busy:          |=====|  |=|        |=========|
    value_k = busy ns in bin k / bin k's length      (timeline: all n bins; pattern: whole ones)
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from traceforensics.analysis.context import AnalysisContext, as_context
from traceforensics.analysis.options import AnalysisOptions
from traceforensics.analysis.utilization.bins import (
    MAX_UTILIZATION_BINS,
    MIN_PATTERN_BINS,
    bin_count,
    busy_fraction_bins,
    classified_bins,
    utilization_bin_ns,
)
from traceforensics.analysis.utilization.patterns import PatternResult, classify_utilization
from traceforensics.model.errors import OptionError
from traceforensics.model.session import TraceSession
from traceforensics.model.units import F64, NS_PER_MS, NS_PER_S

__all__ = [
    "MAX_UTILIZATION_BINS",
    "MIN_PATTERN_BINS",
    "DevicePattern",
    "UtilizationTimeline",
    "analyze_utilization",
    "busy_fraction_bins",
    "device_timeline",
]


@dataclass(frozen=True)
class UtilizationTimeline:
    """Busy fraction (0..1) of one device in consecutive bins of ``bin_ns`` from ``start_ns``
    (its analysis-window start, trace clock ns) to ``end_ns`` (the window end).
    ``values[k]`` covers ``[start_ns + k*bin_ns, min(start_ns + (k+1)*bin_ns, end_ns))``."""

    rank: int
    device: int
    bin_ns: int
    start_ns: int
    values: F64
    end_ns: int

    @property
    def interval_s(self) -> float:
        return self.bin_ns / NS_PER_S

    @property
    def classified(self) -> F64:
        """The bins the pattern is classified on: the partial last bin dropped unless it is
        the only one (``bins.classified_bins``)."""
        return self.values[: classified_bins(self.end_ns - self.start_ns, self.bin_ns)]

    def percent(self) -> F64:
        """The classified values in % for ``patterns.classify_utilization``."""
        return self.classified * 100.0

    def to_json(self) -> dict[str, Any]:
        """``{"bin_ms", "start_ns", "end_ns", "values"}`` for ``devices[].utilization``;
        values rounded to 4 decimals (0.1 µs of a 1 ms bin)."""
        return {
            "bin_ms": self.bin_ns / NS_PER_MS,
            "start_ns": self.start_ns,
            "end_ns": self.end_ns,
            "values": [round(float(v), 4) for v in self.values],
        }


@dataclass
class DevicePattern:
    """The utilization timeline of one device and the pattern of its curve (classified on the
    timeline's whole bins, ``UtilizationTimeline.classified``)."""

    rank: int
    device: int
    timeline: UtilizationTimeline
    pattern: PatternResult


def device_timeline(
    ctx: AnalysisContext, g: int, bin_ms: float | None = None
) -> UtilizationTimeline:
    """Busy-fraction timeline of device ``g`` over its analysis window, binned by
    ``bins.utilization_bin_ns`` (``bin_ms``: the options' ``utilization.bin_ms`` when None)."""
    lo, hi = int(ctx.window_lo[g]), int(ctx.window_hi[g])
    size = ctx.options.utilization.bin_ms if bin_ms is None else bin_ms
    bin_ns = utilization_bin_ns(hi - lo, size)
    s, e = ctx.dev_union(g)
    rank, device = ctx.devices[g]
    values = busy_fraction_bins(s, e, lo, hi, bin_ns)
    return UtilizationTimeline(rank, device, bin_ns, lo, values, hi)


def analyze_utilization(
    source: AnalysisContext | TraceSession, options: AnalysisOptions | None = None
) -> list[DevicePattern]:
    """One ``DevicePattern`` per device: its timeline (``device_timeline``, for JSON and plots)
    and the pattern of that curve. Raises ``OptionError`` when ``bin_ms`` would give more than
    ``MAX_UTILIZATION_BINS`` bins for a window."""
    ctx = as_context(source, options)
    if not ctx.devices:
        return []
    bin_ms = ctx.options.utilization.bin_ms
    for lo, hi in zip(ctx.window_lo.tolist(), ctx.window_hi.tolist(), strict=True):
        n_bins = bin_count(hi - lo, utilization_bin_ns(hi - lo, bin_ms))
        if n_bins > MAX_UTILIZATION_BINS:
            raise OptionError(
                f"a utilization bin of {bin_ms:g} ms gives {n_bins:,} bins for a "
                f"{(hi - lo) / NS_PER_S:.3g} s window (at most {MAX_UTILIZATION_BINS:,}); "
                "use a larger bin",
                "bin_ms",
            )
    out: list[DevicePattern] = []
    for g, (rank, device) in enumerate(ctx.devices):
        tl = device_timeline(ctx, g, bin_ms)
        pattern = classify_utilization(tl.percent(), tl.interval_s)
        out.append(DevicePattern(rank, device, tl, pattern))
    return out
