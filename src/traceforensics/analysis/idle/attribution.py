"""The attribution rule: split every idle gap of a device exactly over causes.

For a gap ``[s, e)`` on device d, let *op* be the first GPU work starting at ``e`` (the op that
ends the gap) and *L* = ``[launch_start, launch_end)`` its launch call (``links``: one launch
link per GPU op). Clamp ``tl = clamp(launch_start, s, e)`` and ``t2 = clamp(launch_end, tl,
e)``::

    GPU  ====op0====|..................... gap ......................|===op===
    host   ...sync][ catch-up | DataLoader __next__ | aten::to ][L: launch ]
                   s         drain_end              op_start    tl         t2  e
    parts:   [s, drain_end) host_sync (sync-drain)  [op_start, tl) dispatch   [t2, e) queued
             [drain_end, tl) by thread class        [tl, t2) launch call

1. Host-late part ``[s, tl)`` (the launch had not been issued when the GPU went idle): each
   instant gets the class of the launching thread at that instant (``host_timeline``). With
   ``op_start`` = start of the outermost generic operator (cpu_op of class cpu_compute)
   enclosing L, ``cpu_compute`` inside ``[max(op_start, tl - DISPATCH_MAX_NS), tl)`` is
   ``launch_overhead`` (that operator was dispatching this very launch).
   *Sync-drain rule* (takes precedence): if a synchronizing call on that thread that began
   before ``s`` returned at ``se`` with ``|se - s| <= SYNC_DRAIN_SLACK_NS`` (and ``se <= tl``),
   the queue ran dry because of it:
   ``[s, clamp(se, s, tl))`` is ``host_sync``, and for ``SYNC_CATCHUP_MAX_NS`` afterwards every
   instant whose class is ``cpu_compute``, ``launch_overhead`` or nothing (the host catching up)
   is ``host_sync`` too; instants in a specific cause (data_loading, memcpy, io, ...) keep it.
2. Launch part ``[tl, t2)`` (the host was inside L): ``memcpy`` when L is a copy call (pageable
   copies stage on the host inside the call); ``compilation`` when L is another call longer
   than ``SLOW_LAUNCH_CALL_MIN_NS`` (lazy module loading / JIT); else ``launch_overhead``.
3. Queued part ``[t2, e)`` (L had returned; the work was queued but did not run):
   ``cross_stream_wait`` when a stream-wait record on op's stream was issued between the
   previous launch on that stream and L; else ``communication`` when op or the op that ended
   just before the gap is communication; else ``launch_overhead`` when the part is at most
   ``QUEUED_LAUNCH_LATENCY_MAX_NS`` (GPU-side pickup latency); else ``untraced``.
4. A gap whose op has no launch call is ``untraced``. A gap with no op after it inside the
   data (the trailing gap of the trace) is host-late as a whole, classified on the thread that
   launched the last GPU work before it.
Unclassified host time inside part 1 is ``untraced``. The parts tile ``[s, e)``, so the
attributed ns of a gap sum exactly to its length.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from traceforensics.analysis.context import OpTable
from traceforensics.analysis.idle.causes import (
    CAUSE_INDEX,
    COMMUNICATION,
    CPU_COMPUTE,
    CROSS_STREAM_WAIT,
    DISPATCH_MAX_NS,
    HOST_SYNC,
    LAUNCH_OVERHEAD,
    N_CAUSES,
    QUEUED_LAUNCH_LATENCY_MAX_NS,
    SYNC_CATCHUP_MAX_NS,
    SYNC_DRAIN_SLACK_NS,
    UNTRACED,
)
from traceforensics.analysis.idle.host_timeline import HostTimeline
from traceforensics.analysis.idle.prepare import SyncIndex
from traceforensics.model.units import I64
from traceforensics.model.units import Mask as BoolArr

_CPU = CAUSE_INDEX[CPU_COMPUTE]
_LAUNCH = CAUSE_INDEX[LAUNCH_OVERHEAD]
_SYNC = CAUSE_INDEX[HOST_SYNC]
_UNTRACED = CAUSE_INDEX[UNTRACED]


@dataclass
class Parts:
    """Per-gap boundaries of the rule (for evidence): drain end, dispatch start, tl, t2."""

    drain_end: I64
    dispatch_from: I64
    tl: I64
    t2: I64
    drain: BoolArr
    sync_row: I64
    thr: I64
    qcause: I64


def last_sync(
    sync: SyncIndex, tline: HostTimeline, thr: I64, before_ns: I64
) -> tuple[I64, I64, I64]:
    """Latest sync call on thread ``thr`` ending at or before ``before_ns`` (ns):
    ``(start, end, row)``; ``row`` -1 when none."""
    if sync.keys.size == 0:
        z = np.zeros(thr.size, np.int64)
        return z, z, np.full(thr.size, -1, np.int64)
    q = tline.key(np.maximum(thr, 0), before_ns)
    idx = np.searchsorted(sync.keys, q, side="right") - 1
    safe = np.maximum(idx, 0)
    same = (idx >= 0) & ((sync.keys[safe] >> tline.shift) == thr) & (thr >= 0)
    return sync.start[safe], sync.end[safe], np.where(same, sync.row[safe], -1)


def gap_thread(op: I64, prev_op: I64, ops: OpTable) -> I64:
    """Launching thread the GPU waited on in each gap (-1: none known).

    Normally the thread of the launch of ``op``, the op ending the gap. A gap with no ending op
    (``op`` -1: the trailing gap of the trace or window) uses the thread that launched
    ``prev_op``, the last GPU work before it, and is host-late as a whole (``tl = t2 = e``)::

        GPU   ==last op==|.......... trailing gap ..........|  (no op after it)
        host  [L last]      python ... DataLoader ...          (same thread)
                         s                                  e
              [s, e) host-late: that thread's class at each instant (ns)
    """
    has = op >= 0
    prev_thr = np.where(prev_op >= 0, ops.thr[np.maximum(prev_op, 0)], -1)
    out: I64 = np.where(has, ops.thr[np.maximum(op, 0)], prev_thr)
    return out


def sync_drain(
    sync: SyncIndex, tline: HostTimeline, thr: I64, begin: I64, s: I64, tl: I64
) -> tuple[BoolArr, I64, I64]:
    """Sync-drain rule: ``(drain, drain_end, sync_row)`` per gap; all times in ns.

    A synchronizing call on the launching thread that was already blocking when the GPU ran dry
    (started at or before ``begin``, where the gap really began) and returned at ``se`` with
    ``|se - begin| <= SYNC_DRAIN_SLACK_NS`` (20 µs) drained the queue: ``[s, drain_end)`` with
    ``drain_end = clamp(se, s, tl)`` is ``host_sync``. A sync issued later, on an idle GPU, drained
    nothing (its own duration is ``host_sync`` through the thread class)::

        GPU   ==k1==|=D2H=|................ gap .................|==k2==
        host  [item][cudaStreamSynchronize] python ..........[L]
                          s                se                tl  e
              [s, se) host_sync: the sync began <= s, |se - s| <= 20 000 ns, se <= tl
    """
    ss, se, srow = last_sync(sync, tline, thr, np.minimum(tl, begin + SYNC_DRAIN_SLACK_NS))
    drain = (thr >= 0) & (srow >= 0) & (se >= begin - SYNC_DRAIN_SLACK_NS) & (ss <= begin)
    drain_end = np.where(drain, np.clip(se, s, tl), s)
    return drain, drain_end, srow


def dispatch_window_start(op_start: I64, drain_end: I64, tl: I64) -> I64:
    """Start (ns) of the dispatch window ``[disp_start, tl)``: ``disp_start =
    clamp(max(op_start, tl - DISPATCH_MAX_NS), drain_end, tl)``. ``op_start`` is the start of
    the outermost generic operator enclosing the launch; ``cpu_compute`` in the window is
    ``launch_overhead`` (that operator was dispatching this very launch); earlier time in it
    stays ``cpu_compute``::

        GPU   ==k1==|.................... gap ....................|==k2==
        host  aten::empty ][ aten::add .......................[L]
                           op_start            tl - 1 000 000 ns    tl  e
              [op_start, tl - 1 ms) cpu_compute   [tl - 1 ms, tl) launch_overhead (dispatch)
    """
    out: I64 = np.clip(np.maximum(op_start, tl - DISPATCH_MAX_NS), drain_end, tl)
    return out


def host_late(
    tline: HostTimeline, thr: I64, drain: BoolArr, drain_end: I64, disp_start: I64, tl: I64
) -> I64:
    """Host-late part ``[drain_end, tl)`` (ns per cause, one row per gap): each instant takes the
    class of the launching thread's highest-``PRIORITY`` classified range covering it
    (``host_timeline``).

    Cut at the dispatch start ``disp_start`` (``cpu_compute`` after it is ``launch_overhead``)
    and, after a drain, at ``cap_end = min(drain_end + SYNC_CATCHUP_MAX_NS, tl)``: before the
    cap, the host catching up (``cpu_compute``, ``launch_overhead`` or nothing) is
    ``host_sync``; time in a specific cause (data_loading, memcpy, io, ...) keeps it.
    Unclassified time is ``untraced``::

        GPU   ==k1==|......................... gap ..........................|==k2==
        host  [sync]| python | DataLoader __next__ | aten::to .........[L]
                    drain_end          cap_end         disp_start          tl    e
              [drain_end, cap_end) catch-up: python -> host_sync, DataLoader stays
              [cap_end, disp_start) thread class
              [disp_start, tl) cpu_compute -> launch_overhead
    """
    n = thr.size
    mat = np.zeros((n, N_CAUSES), dtype=np.int64)
    cap_end = np.where(drain, np.clip(drain_end + SYNC_CATCHUP_MAX_NS, drain_end, tl), drain_end)
    p1, p2 = np.minimum(disp_start, cap_end), np.maximum(disp_start, cap_end)
    for lo, hi in ((drain_end, p1), (p1, p2), (p2, tl)):
        m = tline.class_time(thr, lo, hi)
        unexplained = (hi - lo) - m.sum(axis=1)
        dispatch = (lo >= disp_start)[:, None]
        m[:, _LAUNCH] += np.where(dispatch[:, 0], m[:, _CPU], 0)
        m[:, _CPU] = np.where(dispatch[:, 0], 0, m[:, _CPU])
        catch = drain & (hi <= cap_end)
        catch_up = m[:, _CPU] + m[:, _LAUNCH] + unexplained
        m[:, _UNTRACED] += np.where(catch, 0, unexplained)
        m[:, _SYNC] += np.where(catch, catch_up, 0)
        m[:, _CPU] = np.where(catch, 0, m[:, _CPU])
        m[:, _LAUNCH] = np.where(catch, 0, m[:, _LAUNCH])
        mat += m
    return mat


def queued_cause(op: I64, ended: BoolArr, queued_ns: I64, prev_comm: BoolArr, ops: OpTable) -> I64:
    """Cause index of the queued part ``[t2, e)`` (``queued_ns`` long) of each gap. In order:
    ``cross_stream_wait`` (a stream-wait record on op's stream, ``OpTable.wait_ok``);
    ``communication`` (op, or the op that ended just before the gap, is a collective);
    ``launch_overhead`` when ``queued_ns <= QUEUED_LAUNCH_LATENCY_MAX_NS`` (50 000 ns, GPU
    pickup latency); else ``untraced``. A gap with no launched ending op is ``untraced``::

        host      [L k3]                               (L returned before s: t2 = s)
        stream 7  ==k1==|
        stream 9        |...... queued ......|==k3==
        gpu_sync        ^ Stream Wait Event on stream 9 (wait_ok)
                        s = t2               e   [t2, e) cross_stream_wait
    """
    has = op >= 0
    safe = np.maximum(op, 0)
    qcause = np.full(op.size, _UNTRACED, dtype=np.int64)
    qcause[queued_ns <= QUEUED_LAUNCH_LATENCY_MAX_NS] = _LAUNCH
    qcause[has & (ops.is_comm[safe] | prev_comm)] = CAUSE_INDEX[COMMUNICATION]
    qcause[has & ops.wait_ok[safe]] = CAUSE_INDEX[CROSS_STREAM_WAIT]
    qcause[~ended] = _UNTRACED
    return qcause


def attribute_gaps(
    s: I64,
    e: I64,
    op: I64,
    *,
    prev_op: I64,
    prev_comm: BoolArr,
    ops: OpTable,
    tline: HostTimeline,
    sync: SyncIndex,
    s0: I64 | None = None,
) -> tuple[I64, Parts]:
    """Split gaps ``[s, e)`` (ns; ``op``: index of the op ending each gap in ``ops``, -1 none;
    ``prev_comm``: the op that ended just before the gap is communication).

    ``prev_op``: the last op starting before the gap (-1 none); when no op ends a gap (the
    trailing gap of a window), the thread that launched ``prev_op`` is the one the GPU waited
    on and the whole gap is host-late (``gap_thread``).

    ``s0``: where each gap really began when ``[s, e)`` is a gap clipped to a window (the
    sync-drain test uses it, so clipping never changes what a part is attributed to).

    Returns ``(matrix, parts)``: ``matrix[i, c]`` = ns of gap i attributed to cause c; every
    row sums to ``e - s``.
    """
    n = s.size
    has = op >= 0
    safe = np.maximum(op, 0)
    thr = gap_thread(op, prev_op, ops)
    ended = has & (thr >= 0)
    tl = np.where(ended, np.clip(ops.launch_start[safe], s, e), e)
    t2 = np.where(ended, np.clip(ops.launch_end[safe], tl, e), e)

    begin = s if s0 is None else s0
    drain, drain_end, srow = sync_drain(sync, tline, thr, begin, s, tl)
    disp_start = np.where(ended, dispatch_window_start(ops.dispatch_start[safe], drain_end, tl), tl)

    rows = np.arange(n)
    # part 1a: sync drain wait; part 1b: host-late time by thread class
    mat = host_late(tline, thr, drain, drain_end, disp_start, tl)
    mat[:, _SYNC] += drain_end - s
    # part 2: inside the launch call (causes.launch_part_cause)
    mat[rows, np.where(ended, ops.launch_cause[safe], _LAUNCH)] += t2 - tl
    # part 3: queued
    qcause = queued_cause(op, ended, e - t2, prev_comm, ops)
    mat[rows, qcause] += e - t2
    return mat, Parts(drain_end, disp_start, tl, t2, drain, srow, thr, qcause)
