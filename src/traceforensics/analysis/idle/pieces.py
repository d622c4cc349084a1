"""Every idle gap split by cause and placed in time: where in the gap each cause's ns lie.

The idle pass (``attribution.attribute_gaps``) gives each gap a matrix row (ns per cause, summing
to the gap's length) and its ``Parts``; this pass lays the row out along the gap, part by part,
following the rule's own boundaries (all times integer ns)::

    GPU  ==op0==|........................ gap .........................|==op==
    host  [sync]| catch-up | DataLoader | aten::to .....[L: launch ]
                s      drain_end   p1        p2           tl         t2  wait_end  e
    pieces:     [s, drain_end) host_sync
                [drain_end, tl) the launching thread's class at each instant (``host_late``
                                cut at p1/p2 = min/max(disp_start, cap_end), its transforms)
                [tl, t2) the launch part's cause     [t2, wait_end) cross_stream_wait
                [wait_end, e) the queued cause (``qcause``)
    relaunch:   launch_overhead before ``catch_end`` in a drain's catch-up is host_sync

Host-late time is placed segment by segment of the thread's ``HostTimeline`` (the class of the
segment starting at each boundary, ``win``; -1 none), with ``host_late``'s transforms:
``cpu_compute`` in the dispatch part is ``launch_overhead``; in a drain's catch-up
``cpu_compute``, ``launch_overhead`` and unclassified time are ``host_sync``; other
unclassified time (and every instant of a gap with no known thread) is ``untraced``.
Adjacent pieces of one gap with the same cause are merged.

Exactness: per gap the pieces tile ``[s, e)`` and sum per cause to the gap's matrix row. A gap
where they would not (a divergence from the rule) is laid out from its matrix row instead, in
the rule's order (host side, launch, wait, queued), with ``placed`` False.
"""

from __future__ import annotations

import numpy as np
import polars as pl

from traceforensics.analysis.context import AnalysisContext, as_context
from traceforensics.analysis.host_timeline import HostTimeline
from traceforensics.analysis.idle.attribution import Parts
from traceforensics.analysis.idle.causes import (
    CAUSE_INDEX,
    CAUSES,
    COMMUNICATION,
    CPU_COMPUTE,
    CROSS_STREAM_WAIT,
    GPU_PICKUP,
    HOST_SYNC,
    LAUNCH_OVERHEAD,
    N_CAUSES,
    SYNC_CATCHUP_MAX_NS,
    UNTRACED,
)
from traceforensics.analysis.idle.windows import window_gaps
from traceforensics.analysis.options import AnalysisOptions
from traceforensics.model.session import TraceSession
from traceforensics.model.units import I64
from traceforensics.model.units import Mask as BoolArr

_CPU = CAUSE_INDEX[CPU_COMPUTE]
_LAUNCH = CAUSE_INDEX[LAUNCH_OVERHEAD]
_SYNC = CAUSE_INDEX[HOST_SYNC]
_WAIT = CAUSE_INDEX[CROSS_STREAM_WAIT]
_UNTRACED = CAUSE_INDEX[UNTRACED]

#: Fallback layout order (a gap the placement could not reproduce): host side first, then the
#: launch call, the cross-stream wait and the queued causes.
_TAIL = (LAUNCH_OVERHEAD, CROSS_STREAM_WAIT, COMMUNICATION, GPU_PICKUP, UNTRACED)
_ORDER = np.array(
    [_SYNC]
    + [CAUSE_INDEX[c] for c in CAUSES if c not in _TAIL and c != HOST_SYNC]
    + [CAUSE_INDEX[c] for c in _TAIL],
    dtype=np.int64,
)

SCHEMA = {
    "rank": pl.Int32,
    "device": pl.Int32,
    "gap_start_ns": pl.Int64,
    "start_ns": pl.Int64,
    "dur_ns": pl.Int64,
    "cause": pl.String,
    "placed": pl.Boolean,
}

#: Pieces of one chunk of gaps: gap row, start, end (ns), cause index, placed.
_Pieces = tuple[I64, I64, I64, I64, BoolArr]


def idle_pieces(
    source: AnalysisContext | TraceSession, options: AnalysisOptions | None = None
) -> pl.DataFrame:
    """Every idle gap of ``analyze_idle`` (each device's gaps in its analysis window) split by
    cause and placed in time (module docstring): columns ``rank``, ``device``, ``gap_start_ns``
    (the gap's start, clipped to the window), ``start_ns``, ``dur_ns`` (> 0), ``cause`` (a cause
    id) and ``placed`` (False: laid out from the matrix row, the rule could not be followed);
    sorted by rank, device, start_ns. Per device the pieces sum per cause exactly to
    ``idle_by_cause``. Gaps are placed chunk by chunk as ``window_gaps`` attributes them."""
    ctx = as_context(source, options)
    devs = np.arange(len(ctx.devices), dtype=np.int64)
    out: list[tuple[I64, I64, I64, I64, I64, BoolArr]] = []

    def sink(g: I64, s: I64, e: I64, op: I64, mat: I64, parts: Parts) -> None:
        if s.size == 0:
            return
        gap, start, end, cause, placed = place_gaps(ctx, s, e, op, mat, parts)
        out.append((g[gap], s[gap], start, end - start, cause, placed))

    window_gaps(ctx, devs, ctx.window_lo, ctx.window_hi, keep=0, each_chunk=sink)
    if not out:
        return pl.DataFrame(schema=SCHEMA)
    dev, gap_s, start, dur, cause, placed = (np.concatenate(c) for c in zip(*out, strict=True))
    rank = np.array([r for r, _ in ctx.devices], dtype=np.int32)
    device = np.array([d for _, d in ctx.devices], dtype=np.int32)
    return pl.DataFrame(
        {
            "rank": rank[dev],
            "device": device[dev],
            "gap_start_ns": gap_s,
            "start_ns": start,
            "dur_ns": dur,
            "cause": pl.Series(np.array(CAUSES, dtype=object)[cause], dtype=pl.String),
            "placed": placed,
        },
        schema=SCHEMA,
    ).sort("rank", "device", "start_ns")


def place_gaps(ctx: AnalysisContext, s: I64, e: I64, op: I64, mat: I64, parts: Parts) -> _Pieces:
    """Pieces of gaps ``[s, e)`` (ns) with matrix ``mat`` and ``parts``: ``(gap row, start,
    end, cause index, placed)``, sorted by gap then start, adjacent same-cause pieces merged."""
    p = parts
    ops = ctx.ops
    safe = np.maximum(op, 0)
    ended = (op >= 0) & (p.thr >= 0)
    lcause = np.where(ended, ops.launch_cause[safe].astype(np.int64), _LAUNCH)
    cap_end = np.where(
        p.drain, np.clip(p.drain_end + SYNC_CATCHUP_MAX_NS, p.drain_end, p.tl), p.drain_end
    )
    p1, p2 = np.minimum(p.dispatch_from, cap_end), np.maximum(p.dispatch_from, cap_end)
    # the relaunch cuts: launch_overhead before catch_end in a drain is host_sync
    cut_l = np.where(p.drain & (lcause == _LAUNCH), np.clip(p.catch_end, p.tl, p.t2), p.tl)
    cut_q = np.where(
        p.drain & (p.qcause == _LAUNCH), np.clip(p.catch_end, p.wait_end, e), p.wait_end
    )
    n = s.size
    rows = np.arange(n, dtype=np.int64)
    fixed = [
        (s, p.drain_end, np.full(n, _SYNC)),
        (p.tl, cut_l, np.full(n, _SYNC)),
        (cut_l, p.t2, lcause),
        (p.t2, p.wait_end, np.full(n, _WAIT)),
        (p.wait_end, cut_q, np.full(n, _SYNC)),
        (cut_q, e, p.qcause),
    ]
    gs, ss, es, cs = [], [], [], []
    for a, b, c in fixed:
        gs.append(rows)
        ss.append(a)
        es.append(b)
        cs.append(c.astype(np.int64))
    for lo, hi in ((p.drain_end, p1), (p1, p2), (p2, p.tl)):
        dispatch = lo >= p.dispatch_from
        catch = p.drain & (hi <= cap_end)
        g, a, b, c = host_pieces(ctx.host.tline, p.thr, lo, hi, dispatch, catch)
        gs.append(g)
        ss.append(a)
        es.append(b)
        cs.append(c)
    gap, start, end, cause = (np.concatenate(x) for x in (gs, ss, es, cs))
    keep = end > start
    gap, start, end, cause = gap[keep], start[keep], end[keep], cause[keep]
    order = np.lexsort((start, gap))
    gap, start, end, cause = merge(gap[order], start[order], end[order], cause[order])
    bad = ~matches(gap, start, end, cause, s, e, mat)
    if not bad.any():
        return gap, start, end, cause, np.ones(gap.size, dtype=np.bool_)
    good = ~bad[gap]
    fg, fs, fe, fc = fallback(np.flatnonzero(bad), s, mat)
    gap = np.concatenate((gap[good], fg))
    start = np.concatenate((start[good], fs))
    placed = np.concatenate((np.ones(int(good.sum()), np.bool_), np.zeros(fg.size, np.bool_)))
    order = np.lexsort((start, gap))
    return (
        gap[order],
        start[order],
        np.concatenate((end[good], fe))[order],
        np.concatenate((cause[good], fc))[order],
        placed[order],
    )


def host_pieces(
    tline: HostTimeline, thr: I64, lo: I64, hi: I64, dispatch: BoolArr, catch: BoolArr
) -> tuple[I64, I64, I64, I64]:
    """Host-late pieces of sub-windows ``[lo, hi)`` (ns) of the gaps, one per host segment of
    thread ``thr`` overlapping it: ``(gap row, start, end, cause index)``. ``dispatch``: the
    sub-window is in the dispatch part; ``catch``: in a drain's catch-up (``host_late``)."""
    sel = np.flatnonzero(hi > lo)
    t, a, b = thr[sel], lo[sel], hi[sel]
    known = (t >= 0) & (tline.keys.size > 0)
    if tline.keys.size:
        # boundaries strictly inside (lo, hi) cut the sub-window: count = their number + 1
        i0 = np.searchsorted(tline.keys, tline.key(np.maximum(t, 0), a), side="right") - 1
        i1 = np.searchsorted(tline.keys, tline.key(np.maximum(t, 0), b), side="left")
        # >= 1 always (key(lo) < key(hi)); the floor keeps np.repeat total on odd keys, and
        # a gap placed wrong through it is caught by ``matches``
        count = np.where(known, np.maximum(i1 - i0, 1), 1)
    else:
        i0 = np.full(sel.size, -1, dtype=np.int64)
        count = np.ones(sel.size, dtype=np.int64)
    first = np.cumsum(count) - count
    rep = np.repeat(np.arange(sel.size), count)
    j = np.arange(rep.size, dtype=np.int64) - first[rep]
    bidx = i0[rep] + j
    inner = j > 0  # a piece that starts at a boundary inside the sub-window
    mask = (1 << tline.shift) - 1
    kb = tline.keys[np.where(inner, bidx, 0)] if tline.keys.size else np.zeros(rep.size, np.int64)
    start = np.where(inner, (kb & mask) + tline.t0_ns, a[rep])
    end = np.empty_like(start)
    end[:-1] = start[1:]
    last = first + count - 1
    end[last] = b
    live = known[rep] & (bidx >= 0)
    cls = np.full(rep.size, -1, dtype=np.int64)
    cls[live] = tline.win[bidx[live]]
    gsel = sel[rep]
    cls = np.where(dispatch[gsel] & (cls == _CPU), _LAUNCH, cls)
    to_sync = catch[gsel] & ((cls == _CPU) | (cls == _LAUNCH) | (cls < 0))
    cls = np.where(to_sync, _SYNC, cls)
    cls = np.where(cls < 0, _UNTRACED, cls)
    return gsel, start, end, cls


def merge(gap: I64, start: I64, end: I64, cause: I64) -> tuple[I64, I64, I64, I64]:
    """Merge adjacent pieces (sorted by gap, start) of one gap with the same cause, when they
    touch (a piece not touching its predecessor is kept apart so the tiling check sees it)."""
    if gap.size == 0:
        return gap, start, end, cause
    new = np.ones(gap.size, dtype=np.bool_)
    new[1:] = (gap[1:] != gap[:-1]) | (cause[1:] != cause[:-1]) | (start[1:] != end[:-1])
    head = np.flatnonzero(new)
    tail = np.append(head[1:], gap.size) - 1
    return gap[head], start[head], end[tail], cause[head]


def matches(gap: I64, start: I64, end: I64, cause: I64, s: I64, e: I64, mat: I64) -> BoolArr:
    """Per gap: its pieces (sorted by gap, start) tile ``[s, e)`` and sum per cause to its
    matrix row."""
    n = s.size
    sums = np.zeros((n, N_CAUSES), dtype=np.int64)
    np.add.at(sums, (gap, cause), end - start)
    ok: BoolArr = (sums == mat).all(axis=1)
    if gap.size == 0:
        return ok & (e <= s)
    new = np.ones(gap.size, dtype=np.bool_)
    new[1:] = gap[1:] != gap[:-1]
    head = np.flatnonzero(new)
    tail = np.append(head[1:], gap.size) - 1
    has = np.zeros(n, dtype=np.bool_)
    has[gap[head]] = True
    first = np.full(n, -1, dtype=np.int64)
    lastend = np.full(n, -1, dtype=np.int64)
    first[gap[head]] = start[head]
    lastend[gap[tail]] = end[tail]
    ok &= has & (first == s) & (lastend == e)
    broken = ~new[1:] & (start[1:] != end[:-1])
    ok[gap[1:][broken]] = False
    return ok


def fallback(bad: I64, s: I64, mat: I64) -> tuple[I64, I64, I64, I64]:
    """Gaps ``bad`` laid out from their matrix rows in ``_ORDER`` from ``s``:
    ``(gap row, start, end, cause index)``, sorted by gap then start."""
    m = mat[bad][:, _ORDER]
    end = s[bad][:, None] + np.cumsum(m, axis=1)
    start = end - m
    g = np.broadcast_to(bad[:, None], m.shape)
    c = np.broadcast_to(_ORDER[None, :], m.shape)
    k = m > 0
    return g[k], start[k], end[k], c[k]
