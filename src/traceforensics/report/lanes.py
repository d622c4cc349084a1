"""The data behind the timeline and utilization figures: each device's busy intervals (total and
per kind), its analysis window, and the busy fraction per bin aligned to that window.

An ``Analysis`` keeps results, not the busy intervals, so they are rebuilt here from the
analysed session's GPU rows with the analysis' own busy union (``analysis.busy.device_busy``,
the one rule: all streams, overlapping work counted once, per kind as well) — never a second
union rule in the report. Binning is the analysis' one rule (``analysis/utilization/bins.py``:
``utilization_bin_ns`` for the width, ``busy_fraction_bins`` for exact overlap from the
cumulative busy time), so the plotted curve is the JSON ``devices[].utilization`` timeline and
the curve behind the terminal's p10/p50/p90, bin for bin:

    window:   [lo ............................................ hi)
    bins:     [ 0  | 1  | 2  | ...                        | n-1 )   (the last may be shorter;
    busy:       |=====|    |==|                                      it is divided by its own
    value_k = busy ns inside bin k / bin k's length                  length)
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import NamedTuple

import numpy as np
import polars as pl

from traceforensics.analysis.busy import device_busy
from traceforensics.analysis.intervals import clip, holes
from traceforensics.analysis.pipeline import Analysis
from traceforensics.analysis.utilization.bins import busy_fraction_bins, utilization_bin_ns
from traceforensics.model.schema import BUSY_CLASSES, BUSY_KINDS
from traceforensics.model.units import F64, I64


class Bins(NamedTuple):
    """Busy fraction (0..1) per bin: ``values[k]`` covers ``[start_ns + k * bin_ns, start_ns +
    (k + 1) * bin_ns)`` clipped to the window (trace-clock ns)."""

    start_ns: int
    bin_ns: int
    values: F64


@dataclass
class DeviceLanes:
    """One device's busy intervals inside its analysis window ``[lo, hi)`` (trace-clock ns).

    ``busy``: disjoint sorted (starts, ends) of all GPU work; ``kinds``: the same per busy kind
    (``BUSY_CLASSES``: kernel, communication, memcpy, memset), only kinds with work;
    ``bin_ms``: the analysis' ``utilization.bin_ms`` (``--bin-ms``), for the bin rule."""

    rank: int
    device: int
    name: str
    lo: int
    hi: int
    busy: tuple[I64, I64]
    kinds: dict[str, tuple[I64, I64]] = field(default_factory=dict)
    bin_ms: float = 100.0

    @property
    def span_ns(self) -> int:
        return self.hi - self.lo

    def idle(self) -> tuple[I64, I64]:
        """The window's idle gaps (holes of the busy union), disjoint and sorted."""
        return holes(self.busy[0], self.busy[1], self.lo, self.hi)

    def utilization(self, bin_ns: int | None = None) -> Bins:
        """Busy fraction per bin over the window, the first bin starting at ``lo``; ``bin_ns``
        defaults to the analysis' rule (``bins.utilization_bin_ns`` of the window at
        ``bin_ms``), the bins of the JSON timeline and of the pattern."""
        size = bin_ns or utilization_bin_ns(self.span_ns, self.bin_ms)
        values = busy_fraction_bins(self.busy[0], self.busy[1], self.lo, self.hi, size)
        return Bins(self.lo, size, values)


def device_lanes(analysis: Analysis) -> list[DeviceLanes]:
    """``DeviceLanes`` of every device of ``analysis``, in its device order."""
    if not analysis.devices:
        return []
    work = (
        analysis.session.events.lazy()
        .filter(pl.col("kind").is_in(BUSY_KINDS) & pl.col("device").is_not_null())
        .select(
            "rank",
            "device",
            pl.col("kind").cast(pl.String),
            "start_ns",
            (pl.col("start_ns") + pl.col("dur_ns")).alias("end_ns"),
            pl.col("is_comm").fill_null(False),
        )
        .with_columns((pl.struct("rank", "device").rank("dense") - 1).cast(pl.Int64).alias("dev"))
        .sort("dev", "start_ns")
        .collect()
    )
    keys = work.select("rank", "device", "dev").unique("dev").sort("dev").rows()
    index = {(int(r), int(d)): int(g) for r, d, g in keys}
    starts = work.get_column("start_ns").to_numpy()
    ends = work.get_column("end_ns").to_numpy()
    t0 = int(starts.min()) if starts.size else 0
    t1 = int(ends.max()) if ends.size else 0
    busy = device_busy(work, len(keys), t0, max(t1 - t0, 0) + 1)
    out: list[DeviceLanes] = []
    empty = np.zeros(0, np.int64)
    for d in analysis.devices:
        lo, hi = d.window_start_ns, d.window_start_ns + d.window_ns
        g = index.get((d.rank, d.device))
        lanes = DeviceLanes(
            d.rank,
            d.device,
            d.name,
            lo,
            hi,
            (empty, empty),
            bin_ms=analysis.options.utilization.bin_ms,
        )
        if g is not None:
            # clipped: a ``--from`` range or ``--window trace`` can cut work at the edges
            lanes.busy = clip(*busy.of(g), lo, hi)
            for cls, kind in enumerate(BUSY_CLASSES):
                s, e = clip(*busy.kind(g, cls), lo, hi)
                if s.size:
                    lanes.kinds[kind] = (s, e)
        out.append(lanes)
    return out


def coalesce(s: I64, e: I64, min_hole_ns: float) -> tuple[I64, I64]:
    """Drawing resolution only: join intervals whose hole is shorter than ``min_hole_ns``
    (less than a pixel), so a trace with a million kernels draws a few thousand bars instead of
    taking minutes; busy fractions and totals never go through this."""
    if s.size < 2:
        return s, e
    wide = (s[1:] - e[:-1]) >= min_hole_ns
    first = np.concatenate(([True], wide))
    last = np.concatenate((wide, [True]))
    return s[first], e[last]
