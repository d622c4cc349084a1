"""Idle gaps of devices inside arbitrary windows, attributed by ``attribution.attribute_gaps``.

Shared by the whole-device view (``gaps.analyze_idle``: one window per device) and the per-step
view (``step_idle.step_breakdown``: one window per step). All times are integer ns. A gap clipped
by its window keeps the causes it has in the unclipped gap (the rule is told where the gap
really began)::

    GPU:     ==op0==|................ device gap ................|==op==
    window:                [lo ................ hi)
    clipped:               [s ................. e)                 attributed as part of
                    s0 (gap_begin: where the device gap began)     [s0, op start)
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from traceforensics.analysis.context import AnalysisContext
from traceforensics.analysis.idle.attribution import Parts, attribute_gaps
from traceforensics.analysis.idle.causes import CAUSES
from traceforensics.analysis.idle.late import dispatch_cuts
from traceforensics.analysis.idle.streamwait import LaunchIndex, gap_waits
from traceforensics.analysis.intervals import holes, sorted_unique
from traceforensics.model.units import I64


@dataclass
class WindowGaps:
    """Gaps of several windows, attributed: row i of ``matrix`` is gap i (ns per cause)."""

    win: I64
    dev: I64
    start: I64
    end: I64
    op: I64
    matrix: I64
    parts: Parts


def causes_dict(row: I64) -> dict[str, int]:
    """Cause id -> ns for every cause with time (report order)."""
    return {c: int(v) for c, v in zip(CAUSES, row, strict=True) if v > 0}


def full_causes(row: I64) -> dict[str, int]:
    """Cause id -> ns for every cause (zeros included), so consumers see a fixed key set."""
    return {c: int(v) for c, v in zip(CAUSES, row, strict=True)}


def window_gaps(ctx: AnalysisContext, dev: I64, lo: I64, hi: I64) -> WindowGaps:
    """Find and attribute the idle gaps of device ``dev[k]`` inside ``[lo[k], hi[k])`` (ns)."""
    parts_s: list[I64] = []
    parts_e: list[I64] = []
    parts_w: list[I64] = []
    for k in range(dev.size):
        us, ue = ctx.dev_union(int(dev[k]))
        a, b = np.searchsorted(ue, lo[k], side="right"), np.searchsorted(us, hi[k], side="left")
        gs, ge = holes(us[a:b], ue[a:b], int(lo[k]), int(hi[k]))
        parts_s.append(gs)
        parts_e.append(ge)
        parts_w.append(np.full(gs.size, k, dtype=np.int64))
    s = np.concatenate(parts_s) if parts_s else np.zeros(0, np.int64)
    e = np.concatenate(parts_e) if parts_e else np.zeros(0, np.int64)
    w = np.concatenate(parts_w) if parts_w else np.zeros(0, np.int64)
    g = dev[w] if w.size else np.zeros(0, np.int64)
    op = ending_ops(ctx, g, e)
    prev = ending_ops(ctx, g, s, before=True)
    s0 = gap_begin(ctx, g, s)
    launches = LaunchIndex.of(ctx)
    mat, parts = attribute_gaps(
        s,
        e,
        op,
        prev_op=prev,
        prev_comm=ctx.busy.prev_comm(g, s0),
        ops=ctx.ops,
        host=ctx.host,
        cuts=dispatch_cuts(ctx.host, launches),
        waits=gap_waits(ctx, op, launches),
        s0=s0,
    )
    return WindowGaps(w, g, s, e, op, mat, parts)


def gap_begin(ctx: AnalysisContext, dev: I64, s: I64) -> I64:
    """Where (ns) the unclipped device gap containing ``s`` began (``s`` itself when no GPU
    work of the device ended before it)."""
    out = s.copy()
    for g in sorted_unique(dev):
        m = dev == g
        _us, ue = ctx.dev_union(int(g))
        if ue.size == 0:  # only zero-length work: no GPU work ever ended before s
            continue
        i = np.searchsorted(ue, s[m], side="right") - 1
        out[m] = np.where(i >= 0, ue[np.maximum(i, 0)], s[m])
    return out


def ending_ops(ctx: AnalysisContext, dev: I64, t: I64, *, before: bool = False) -> I64:
    """Row of the first GPU op of device ``dev`` starting at or after ``t`` (ns; -1: none);
    with ``before``, the last op starting before ``t`` that has a known launching thread."""
    out = np.full(dev.size, -1, dtype=np.int64)
    for g in sorted_unique(dev):
        m = dev == g
        lo, hi = int(ctx.dev_lo[g]), int(ctx.dev_hi[g])
        i = lo + np.searchsorted(ctx.ops.start[lo:hi], t[m], side="left")
        if before:
            linked = np.maximum.accumulate(np.where(ctx.ops.thr[lo:hi] >= 0, np.arange(lo, hi), -1))
            j = linked[np.maximum(i - 1 - lo, 0)] if hi > lo else np.full(i.size, -1)
            out[m] = np.where(i - 1 >= lo, j, -1)
        else:
            out[m] = np.where(i < hi, i, -1)
    return out
