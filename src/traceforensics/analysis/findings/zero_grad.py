"""Gradient zeroing by fill kernels: ``optimizer.zero_grad()`` without ``set_to_none``.

PyTorch records ``Optimizer.zero_grad#<Optimizer>.zero_grad`` around the call. With
``set_to_none=False`` (the default before PyTorch 2.0) it launches one fill kernel (or memset)
per parameter; with ``set_to_none=True`` it launches none. Rule, per device:

- the **fill work**: the device's kernels and memsets whose launch call started inside a
  ``zero_grad`` range of the device's rank. None: no finding (the trace shows
  ``set_to_none`` applied, or no optimizer at all);
- ``recoverable = fill_ns + idle_ns``: the fill work's GPU time, plus the device's idle inside
  the ``zero_grad`` ranges (the GPU waiting while the host launched the fills), both inside
  the device's window. ``set_to_none=True`` removes both. Confidence ``high`` (the ranges and
  the launches are recorded).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Final

import numpy as np
import polars as pl

from traceforensics.analysis.context import AnalysisContext
from traceforensics.analysis.devices import DeviceRecord
from traceforensics.analysis.findings.busy_losses import EVIDENCE_KEPT, window_share
from traceforensics.analysis.findings.remedies import remedy
from traceforensics.analysis.findings.results import ZERO_GRAD, Finding
from traceforensics.analysis.idle.results import Evidence
from traceforensics.analysis.intervals import clip, cumulative, union
from traceforensics.analysis.names import matching
from traceforensics.analysis.program import Program
from traceforensics.model.units import fmt_ns, fmt_pct

#: The range PyTorch records around optimizer.zero_grad().
ZERO_GRAD_RE: Final = r"^Optimizer\.zero_grad#"
_RANGE_KINDS: Final = ("annotation", "cpu_op", "python")


def _ranges(
    ctx: AnalysisContext,
    rank: int,
    pattern: str,
    leave_out: str | None = None,
    kinds: tuple[str, ...] = _RANGE_KINDS,
) -> tuple[np.ndarray, np.ndarray, pl.DataFrame]:
    """The union of the rank's ranges of ``kinds`` named by ``pattern`` (and not by
    ``leave_out``): sorted disjoint starts, ends, and the rows."""
    ev = ctx.session.events
    named = matching(ev, pattern)
    if leave_out is not None:
        named = named & ~matching(ev, leave_out)
    rows = ev.filter(
        pl.col("kind").is_in(kinds)
        & (pl.col("rank") == rank)
        & named
        & pl.col("dur_ns").is_not_null()
    ).select(pl.col("name").cast(pl.String), "start_ns", "dur_ns", "tid")
    s = rows.get_column("start_ns").to_numpy().astype(np.int64)
    e = s + rows.get_column("dur_ns").to_numpy().astype(np.int64)
    us, ue = union(s, e) if s.size else (s, e)
    return us, ue, rows.sort("start_ns")


@dataclass(frozen=True)
class RangeWork:
    """The GPU work launched inside some host ranges of a device and the GPU idle inside them
    (within the device's window; ns): ``rows`` the ranges, ``spans`` their merged intervals
    (nested ranges count once), ``names`` the launched ops'."""

    rows: pl.DataFrame
    spans: int
    launched: int
    gpu_ns: int
    idle_ns: int
    names: list[str]


def range_work(
    ctx: AnalysisContext,
    rec: DeviceRecord,
    pattern: str,
    leave_out: str | None = None,
    kinds: tuple[str, ...] = _RANGE_KINDS,
) -> RangeWork | None:
    """The kernels and memsets of device ``rec`` (collectives left out: the communication
    findings count them) whose launch call started inside a range of ``kinds`` of its rank
    named by ``pattern`` (not ``leave_out``), with the device's idle inside those ranges;
    None without such a range."""
    us, ue, rows = _ranges(ctx, rec.rank, pattern, leave_out, kinds)
    if us.size == 0:
        return None
    lo, hi = rec.window_start_ns, rec.window_start_ns + rec.window_ns
    ops = ctx.work.filter(
        (pl.col("rank") == rec.rank)
        & (pl.col("device") == rec.device)
        & pl.col("kind").is_in(["kernel", "memset"])
        & ~pl.col("is_comm").fill_null(False)
        & pl.col("launch_start_ns").is_not_null()
        & (pl.col("start_ns") >= lo)
        & (pl.col("end_ns") <= hi)
    ).select(
        "launch_start_ns",
        (pl.col("end_ns") - pl.col("start_ns")).alias("dur_ns"),
        pl.col("name").cast(pl.String),
    )
    at = ops.get_column("launch_start_ns").to_numpy().astype(np.int64)
    i = np.searchsorted(us, at, side="right") - 1  # the range starting last before the launch
    inside = (i >= 0) & (at < ue[np.maximum(i, 0)])
    gpu_ns = int(ops.get_column("dur_ns").to_numpy()[inside].sum())
    cs, ce = clip(us, ue, lo, hi)
    g = ctx.devices.index((rec.rank, rec.device))
    bs, be = ctx.busy.of(g)
    busy_in = cumulative(bs, be, ce) - cumulative(bs, be, cs)
    idle_ns = int(np.sum(ce - cs, dtype=np.int64) - np.sum(busy_in, dtype=np.int64))
    names = ops.filter(pl.Series(inside)).get_column("name").unique().to_list()
    return RangeWork(rows, int(us.size), int(inside.sum()), gpu_ns, idle_ns, names)


def zero_grad_finding(ctx: AnalysisContext, rec: DeviceRecord, program: Program) -> list[Finding]:
    """The device's ``zero_grad`` finding, or none (rules in the module docstring)."""
    work = range_work(ctx, rec, ZERO_GRAD_RE)
    if work is None or work.launched == 0:
        return []
    fills, fill_ns, idle_ns, rows = work.launched, work.gpu_ns, work.idle_ns, work.rows
    ns = fill_ns + idle_ns
    share = window_share(ns, rec)
    title = (
        f"optimizer.zero_grad fills the gradients: {fills} kernels/memsets ({fmt_ns(fill_ns)}) "
        f"and {fmt_ns(idle_ns)} of GPU idle inside {rows.height} zero_grad ranges "
        f"({fmt_pct(share)} of the window)"
    )
    evidence = [
        Evidence(ZERO_GRAD, "annotation", name, int(s), int(d), tid, "zero_grad range")
        for name, s, d, tid in rows.head(EVIDENCE_KEPT).iter_rows()
    ]
    figures = {"fill_count": fills, "fill_ns": fill_ns, "idle_ns": idle_ns}
    return [
        Finding(
            ZERO_GRAD,
            rec.rank,
            rec.device,
            ns,
            share,
            title,
            remedy(ZERO_GRAD, program),
            "high",
            evidence,
            figures,
        )
    ]


__all__ = ["ZERO_GRAD_RE", "RangeWork", "range_work", "zero_grad_finding"]
