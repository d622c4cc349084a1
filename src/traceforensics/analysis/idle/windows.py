"""Idle gaps of devices inside arbitrary windows, attributed by ``attribution.attribute_gaps``.

Shared by the whole-device view (``gaps.analyze_idle``: one window per device) and the per-step
view (``step_idle.step_breakdown``: one window per step). All times are integer ns. A gap clipped
by its window keeps the causes it has in the unclipped gap (the rule is told where the gap
really began)::

    GPU:     ==op0==|................ device gap ................|==op==
    window:                [lo ................ hi)
    clipped:               [s ................. e)                 attributed as part of
                    s0 (gap_begin: where the device gap began)     [s0, op start)

Gaps are attributed ``CHUNK_GAPS`` at a time. Each gap is attributed on its own, so the chunk
size never changes a result; it bounds memory (the gap x cause matrix of 2M gaps is 180 MB and
the rule's temporaries several times that). What is kept of the attribution: per window, the
ns per cause summed over its gaps; per *kept* gap (the ``keep`` longest, chosen by duration
before any attribution), its matrix row, ending op and ``Parts`` (the evidence reads them)::

    gaps:    [chunk 0: CHUNK_GAPS gaps][chunk 1 ...][...][last chunk]
    each:    attribute -> add rows into by_window[win] -> keep rows of kept gaps -> drop
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import numpy as np

from traceforensics.analysis.context import AnalysisContext
from traceforensics.analysis.idle.attribution import Parts, attribute_gaps
from traceforensics.analysis.idle.causes import CAUSES, N_CAUSES
from traceforensics.analysis.idle.examples import CauseBest
from traceforensics.analysis.idle.late import dispatch_cuts
from traceforensics.analysis.idle.streamwait import LaunchIndex, gap_waits
from traceforensics.analysis.intervals import holes, sorted_unique
from traceforensics.model.units import I64

#: Gaps attributed per ``attribute_gaps`` call: 131 072 gaps x 13 causes x 8 bytes = 13.6 MB
#: per gap x cause matrix (the rule holds a few at a time). Any size gives the same results.
CHUNK_GAPS = 1 << 17

#: Receives every chunk of attributed gaps (``window_gaps(..., each_chunk=...)``): the devices,
#: ``[s, e)`` (ns), the op ending each gap, the gap x cause matrix and the ``Parts``, row j of
#: each belonging to gap j of the chunk (chunks arrive in gap order).
ChunkSink = Callable[[I64, I64, I64, I64, I64, Parts], None]


@dataclass
class WindowGaps:
    """Gaps of several windows, attributed (``window_gaps``); all times ns.

    Every gap i (window order, then time): window ``win``, ``[start, end)``; its device is
    ``window_dev[win[i]]`` (one per window, not one per gap: 8 bytes per gap less).
    Every window k: ``by_window[k, c]``, ns of cause c summed over its gaps (the row sums to
    ``idle[k]``, the window's idle); ``n_gaps[k]``.
    Kept gaps: ``kept[j]`` is a gap index (longest first; ties: earliest start, then window
    order); row j of ``op`` (the op ending the gap, -1: none), ``matrix`` (ns per cause, sums to
    the gap's length) and ``parts`` belongs to gap ``kept[j]``.
    ``best[k, c]`` (with ``window_gaps(..., best=True)``; else None): the gap of window k with
    the most ns of cause c (ties: the earliest), -1 when no gap of k has any.
    """

    win: I64
    window_dev: I64
    start: I64
    end: I64
    by_window: I64
    idle: I64
    n_gaps: I64
    kept: I64
    op: I64
    matrix: I64
    parts: Parts
    best: I64 | None = None


def causes_dict(row: I64) -> dict[str, int]:
    """Cause id -> ns for every cause with time (report order)."""
    return {c: int(v) for c, v in zip(CAUSES, row, strict=True) if v > 0}


def full_causes(row: I64) -> dict[str, int]:
    """Cause id -> ns for every cause (zeros included), so consumers see a fixed key set."""
    return {c: int(v) for c, v in zip(CAUSES, row, strict=True)}


def in_window(starts: I64, ends: I64, lo: int, hi: int) -> tuple[I64, I64]:
    """The intervals of disjoint sorted ``[starts, ends)`` that can overlap ``[lo, hi)`` (ns),
    as views (two ``searchsorted``): clipping them to the window gives the same result as
    clipping all of them."""
    a = int(np.searchsorted(ends, lo, side="right"))
    b = int(np.searchsorted(starts, hi, side="left"))
    return starts[a:b], ends[a:b]


def window_gaps(
    ctx: AnalysisContext,
    dev: I64,
    lo: I64,
    hi: I64,
    *,
    keep: int | None = None,
    best: bool = False,
    each_chunk: ChunkSink | None = None,
) -> WindowGaps:
    """Find and attribute the idle gaps of device ``dev[k]`` inside ``[lo[k], hi[k])`` (ns), in
    chunks of ``CHUNK_GAPS`` gaps; keep the rows of the ``keep`` longest gaps (all: None);
    with ``best``, also the gap with the most ns of each cause per window (``WindowGaps.best``:
    two ints per window and cause). ``each_chunk``, when given, is handed every chunk's
    attribution before it is dropped (``ChunkSink``; for passes that read every gap's parts
    without holding all of them at once)."""
    parts_s: list[I64] = []
    parts_e: list[I64] = []
    parts_w: list[I64] = []
    for k in range(dev.size):
        w_lo, w_hi = int(lo[k]), int(hi[k])
        gs, ge = holes(*in_window(*ctx.dev_union(int(dev[k])), w_lo, w_hi), w_lo, w_hi)
        parts_s.append(gs)
        parts_e.append(ge)
        parts_w.append(np.full(gs.size, k, dtype=np.int64))
    s = np.concatenate(parts_s) if parts_s else np.zeros(0, np.int64)
    e = np.concatenate(parts_e) if parts_e else np.zeros(0, np.int64)
    w = np.concatenate(parts_w) if parts_w else np.zeros(0, np.int64)
    del parts_s, parts_e, parts_w
    n_win, n = dev.size, s.size
    kept = longest(s, e, keep)
    kept_sorted = np.sort(kept)
    launches, cuts, linked = _rule_inputs(ctx)
    by_window = np.zeros((n_win, N_CAUSES), dtype=np.int64)
    tops = CauseBest(n_win) if best else None
    ops: list[I64] = []
    rows: list[I64] = []
    parts: list[Parts] = []
    for a in range(0, max(n, 1), CHUNK_GAPS):  # one (empty) chunk when there is no gap
        b = min(a + CHUNK_GAPS, n)
        g = dev[w[a:b]]  # the chunk's devices
        op, mat, pt = _attribute(ctx, g, s[a:b], e[a:b], launches, cuts, linked)
        by_window += window_sums(w[a:b], mat, n_win)
        if each_chunk is not None:
            each_chunk(g, s[a:b], e[a:b], op, mat, pt)
        if tops is not None:
            tops.update(w[a:b], mat, a)
        j = kept_sorted[np.searchsorted(kept_sorted, a) : np.searchsorted(kept_sorted, b)] - a
        ops.append(op[j])
        rows.append(mat[j])
        parts.append(pt.take(j))
        del op, mat, pt, g  # this chunk's matrix and parts go before the next chunk's
    pos = np.searchsorted(kept_sorted, kept)  # kept_sorted[pos] == kept: back to kept order
    return WindowGaps(
        w,
        dev,
        s,
        e,
        by_window,
        window_sums(w, e - s, n_win),
        np.bincount(w, minlength=n_win).astype(np.int64),
        kept,
        np.concatenate(ops)[pos],
        np.concatenate(rows)[pos],
        Parts.concat(parts).take(pos),
        None if tops is None else tops.gap,
    )


def _rule_inputs(ctx: AnalysisContext) -> tuple[LaunchIndex, I64, I64]:
    """What the rule reads besides the gaps: the launch index, the dispatch cuts and
    ``last_linked``. The launch index is read by the dispatch cuts and the stream-wait rule
    only: 16 bytes per launched op, not built when neither has anything to look at (no cutting
    rows, no wait calls)."""
    needed = ctx.host.cut_rows.size > 0 or ctx.host.waits.wait_keys.size > 0
    launches = LaunchIndex.of(ctx) if needed else LaunchIndex.empty()
    return launches, dispatch_cuts(ctx.host, launches), last_linked(ctx)


def attribute_some(ctx: AnalysisContext, dev: I64, s: I64, e: I64) -> tuple[I64, I64, Parts]:
    """Attribute a few gaps ``[s, e)`` of devices ``dev`` (ns) again, on their own: each gap is
    attributed independently, so the result is the one ``window_gaps`` had for them
    (``(op ending each gap, matrix, parts)``)."""
    launches, cuts, linked = _rule_inputs(ctx)
    return _attribute(ctx, dev, s, e, launches, cuts, linked)


def _attribute(
    ctx: AnalysisContext,
    g: I64,
    s: I64,
    e: I64,
    launches: LaunchIndex,
    cuts: I64,
    linked: I64,
) -> tuple[I64, I64, Parts]:
    """``attribute_gaps`` on gaps ``[s, e)`` of devices ``g`` (ns): ``(op ending each gap,
    matrix, parts)``; ``linked``: ``last_linked(ctx)``."""
    op = ending_ops(ctx, g, e)
    prev = ending_ops(ctx, g, s, before=True, linked=linked)
    s0 = gap_begin(ctx, g, s)
    mat, parts = attribute_gaps(
        s,
        e,
        op,
        prev_op=prev,
        prev_comm=ctx.busy.prev_comm(g, s0),
        ops=ctx.ops,
        host=ctx.host,
        cuts=cuts,
        waits=gap_waits(ctx, op, launches),
        s0=s0,
    )
    return op, mat, parts


def longest(s: I64, e: I64, n: int | None) -> I64:
    """Indices of the ``n`` longest gaps ``[s, e)`` (all of them: None; none: ``n <= 0``),
    longest first; ties: earliest start, then lowest index (what a stable
    ``np.lexsort((s, -(e - s)))`` of all gaps gives, computed on the candidates only)."""
    dur = e - s
    if n is not None and n <= 0:
        return np.zeros(0, dtype=np.int64)
    if n is None or n >= dur.size:
        cand = np.arange(dur.size, dtype=np.int64)
    else:
        cut = np.partition(dur, dur.size - n)[dur.size - n]  # the n-th longest duration
        cand = np.flatnonzero(dur >= cut)
    out: I64 = cand[np.lexsort((s[cand], -dur[cand]))][: dur.size if n is None else n]
    return out


def window_sums(win: I64, values: I64, n: int) -> I64:
    """Exact int64 sums of the rows of ``values`` per window, shape ``(n, ...)``; ``win``: the
    window of each row, ascending (so each window is one run: ``np.add.reduceat``)."""
    out = np.zeros((n, *values.shape[1:]), dtype=np.int64)
    if win.size:
        first = np.flatnonzero(np.concatenate(([True], win[1:] != win[:-1])))
        out[win[first]] = np.add.reduceat(values, first, axis=0)
    return out


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


def ending_ops(
    ctx: AnalysisContext, dev: I64, t: I64, *, before: bool = False, linked: I64 | None = None
) -> I64:
    """Row of the first GPU op of device ``dev`` starting at or after ``t`` (ns; -1: none);
    with ``before``, the last op starting before ``t`` that has a known launching thread
    (``linked``: ``last_linked(ctx)``, computed here when not given)."""
    out = np.full(dev.size, -1, dtype=np.int64)
    if before and linked is None:
        linked = last_linked(ctx)
    for g in sorted_unique(dev):
        m = dev == g
        lo, hi = int(ctx.dev_lo[g]), int(ctx.dev_hi[g])
        i = lo + np.searchsorted(ctx.ops.start[lo:hi], t[m], side="left")
        if before and linked is not None:
            j = linked[np.maximum(i - 1, 0)]
            out[m] = np.where((i - 1 >= lo) & (j >= lo), j, -1)  # j < lo: another device's
        else:
            out[m] = np.where(i < hi, i, -1)
    return out


def last_linked(ctx: AnalysisContext) -> I64:
    """For each row of ``ctx.ops``, the last row at or before it with a known launching
    thread (-1: none), over the whole table: computed once per idle pass, not per chunk of
    gaps (each time 24 bytes per op of the device and a pass over them)."""
    rows = np.arange(ctx.ops.thr.size, dtype=np.int64)
    out: I64 = np.maximum.accumulate(np.where(ctx.ops.thr >= 0, rows, -1))
    return out
