"""The attribution rule: split every idle gap of a device exactly over causes.

For a gap ``[s, e)`` on device d, let *op* be the first GPU work starting at ``e`` (the op that
ends the gap) and *L* = ``[launch_start, launch_end)`` its launch call (``links``: one launch
link per GPU op). Clamp ``tl = clamp(launch_start, s, e)`` and ``t2 = clamp(launch_end, tl,
e)``; the three parts tile the gap::

    GPU  ====op0====|..................... gap ......................|===op===
    host   ...sync][ catch-up | DataLoader __next__ | aten::to ][L: launch ]
                   s         drain_end      disp_start          tl         t2  e
    parts:   [s, drain_end) host_sync (sync drain)   [disp_start, tl) dispatch
             [drain_end, tl) by thread class         [tl, t2) launch call   [t2, e) queued

1. Host-late part ``[s, tl)`` (``late``): the launch had not been issued when the GPU went
   idle; each instant gets the class of the launching thread at that instant
   (``host_timeline``), unclassified time is ``untraced``.
   *Sync drain* (takes precedence): a synchronizing call on that thread that was blocking when
   the GPU ran dry and returned within ``SYNC_DRAIN_SLACK_NS`` of ``s`` drained the queue:
   ``host_sync`` until it returned, and generic host work for ``SYNC_CATCHUP_MAX_NS`` after it
   (``late.sync_drain``, ``late.host_late``). *Relaunch*: in that catch-up the launch call
   of the work ending the gap and its pick-up latency (``launch_overhead`` parts) are
   ``host_sync`` too: the relaunch into the queue the sync emptied is the sync's cost.
   Bound: only the gap the sync drained (the first gap after it returns), and only before
   ``drain_end + SYNC_CATCHUP_MAX_NS``; later gaps are attributed as any other gap.
   *Dispatch*, read from the launching operator and its children
   (``late.dispatch_window_start``): the launching operator is the outermost generic operator
   enclosing L (nested operators on the way to L belong to it). From its start, or from the end
   of its last child that did other work (any classified range of the thread that ended before
   L, except generic CUDA calls and children that launched GPU work of their own), to L it was
   dispatching this launch: its ``cpu_compute`` there is ``launch_overhead``. Time inside the
   children keeps their class (``cpu_compute``, ``data_loading``, ...), and so does the
   operator's own time before its last child. No fixed cap: ``DISPATCH_MAX_NS`` (10 ms) is only
   a sanity bound for operators that run that long with no child recorded::

       GPU   ==k1==|.............................. gap ...............................|==k2==
       host  aten::index ..........................................................[L]
               |======== aten::nonzero (3 ms, other work) ========|
             s = op start                                          child end      tl  t2 e
             [s, child end) cpu_compute (the child's class)   [child end, tl) launch_overhead

       host  aten::addmm ..........................................................[L]
             [op start, tl) launch_overhead: all of its own time (3 ms here; was capped at 1 ms)

2. Launch part ``[tl, t2)`` (the host was inside L): ``memcpy`` when L is a copy call (pageable
   copies stage on the host inside the call); ``compilation`` when L is another call longer
   than ``SLOW_LAUNCH_CALL_MIN_NS`` (lazy module loading / JIT); else ``launch_overhead``.
3. Queued part ``[t2, e)`` (``queued``; L had returned, the work was queued but did not run),
   in order: (a) ``cross_stream_wait`` while a stream-wait call issued right before L (or a
   ``Stream Wait Event`` record on op's stream) held it behind work recorded on another stream,
   until that work ended (``streamwait``); (b) the op's own stream busy is no gap at all;
   (c) ``communication`` when op or the op that ended just before the gap is a collective;
   (d) when what is left is at most ``QUEUED_LAUNCH_LATENCY_MAX_NS`` (GPU pick-up latency):
   ``gpu_pickup`` if L had returned before the gap began (the work was queued all along; it
   waited for no launch), else ``launch_overhead``; longer is ``untraced``::

       host      [L y s13][EventRecord][StreamWaitEvent][L x s7]      (all before s)
       device 1  s13 |=================== y ===================|
       device 0  s7  ==k1==|.....................................|.|== x ==
                           s = t2                        wait_end  e
                 [t2, wait_end) cross_stream_wait   [wait_end, e) gpu_pickup (<= 50 µs)

4. A gap whose op has no launch call is ``untraced``. A gap with no op after it inside the
   data (the trailing gap of the trace) is host-late as a whole, classified on the thread that
   launched the last GPU work before it.
The parts tile ``[s, e)``, so the attributed ns of a gap sum exactly to its length.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, fields
from typing import Any

import numpy as np

from traceforensics.analysis.context import OpTable
from traceforensics.analysis.host_classes import HostClasses
from traceforensics.analysis.idle.causes import (
    CAUSE_INDEX,
    CROSS_STREAM_WAIT,
    HOST_SYNC,
    LAUNCH_OVERHEAD,
    SYNC_CATCHUP_MAX_NS,
)
from traceforensics.analysis.idle.late import (
    dispatch_window_start,
    host_late,
    last_end,
    sync_drain,
)
from traceforensics.analysis.idle.queued import queued_split
from traceforensics.analysis.idle.streamwait import GapWaits
from traceforensics.model.units import I64
from traceforensics.model.units import Mask as BoolArr

_LAUNCH = CAUSE_INDEX[LAUNCH_OVERHEAD]
_SYNC = CAUSE_INDEX[HOST_SYNC]
_WAIT = CAUSE_INDEX[CROSS_STREAM_WAIT]


@dataclass
class Parts:
    """Per-gap boundaries of the rule (for evidence), ns: drain end, dispatch start, ``tl``,
    ``t2``, the end of the cross-stream wait (``wait_end``, ``t2`` when none) and the cause
    index of the queued time after it (``qcause``); the waits found (``waits``); the end of a
    drain's catch-up (``catch_end``: generic time, launch call and pick-up before it are
    ``host_sync``; ``s`` when there is no drain)."""

    drain_end: I64
    dispatch_from: I64
    tl: I64
    t2: I64
    drain: BoolArr
    sync_row: I64
    thr: I64
    qcause: I64
    wait_end: I64
    waits: GapWaits
    catch_end: I64

    def take(self, rows: I64) -> Parts:
        """These parts for gaps ``rows`` only (row j of the result is gap ``rows[j]``)."""
        return Parts(**{f.name: _take(getattr(self, f.name), rows) for f in fields(self)})

    @staticmethod
    def concat(chunks: Sequence[Parts]) -> Parts:
        """The parts of consecutive chunks of gaps as one (at least one chunk)."""
        return Parts(
            **{f.name: _concat([getattr(p, f.name) for p in chunks]) for f in fields(Parts)}
        )


def _take(v: Any, rows: I64) -> Any:
    """Rows ``rows`` of one field of ``Parts`` (an array, or the ``GapWaits``)."""
    return v.take(rows) if isinstance(v, GapWaits) else v[rows]


def _concat(vs: list[Any]) -> Any:
    """One field of ``Parts`` over consecutive chunks (arrays, or ``GapWaits``)."""
    return GapWaits.concat(vs) if isinstance(vs[0], GapWaits) else np.concatenate(vs)


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


def attribute_gaps(
    s: I64,
    e: I64,
    op: I64,
    *,
    prev_op: I64,
    prev_comm: BoolArr,
    ops: OpTable,
    host: HostClasses,
    cuts: I64,
    waits: GapWaits,
    s0: I64 | None = None,
) -> tuple[I64, Parts]:
    """Split gaps ``[s, e)`` (ns; ``op``: index of the op ending each gap in ``ops``, -1 none;
    ``prev_comm``: the op that ended just before the gap is communication; ``host``: the
    classified host rows; ``cuts``: the ranges that end dispatch windows, ``late.dispatch_cuts``;
    ``waits``: the cross-stream waits of each gap's op, ``streamwait.gap_waits``).

    ``prev_op``: the last op starting before the gap (-1 none); when no op ends a gap (the
    trailing gap of a window), the thread that launched ``prev_op`` is the one the GPU waited
    on and the whole gap is host-late (``gap_thread``).

    ``s0``: where each gap really began when ``[s, e)`` is a gap clipped to a window (the
    sync-drain and pick-up tests use it, so clipping never changes what a part is attributed
    to).

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
    drain, drain_end, srow = sync_drain(host.sync, host.tline, thr, begin, s, tl)
    child_end = last_end(cuts, host.tline, thr, ops.launch_start[safe])
    disp = dispatch_window_start(ops.dispatch_start[safe], child_end, drain_end, tl)
    disp_start = np.where(ended, disp, tl)

    # a drain's catch-up ends SYNC_CATCHUP_MAX_NS after the wait part (none: at s)
    catch_end = np.where(drain, drain_end + SYNC_CATCHUP_MAX_NS, s)

    rows = np.arange(n)
    # part 1a: sync drain wait; part 1b: host-late time by thread class
    mat = host_late(host.tline, thr, drain, drain_end, disp_start, tl)
    mat[:, _SYNC] += drain_end - s
    # part 2: inside the launch call (causes.launch_part_cause)
    lcause = np.where(ended, ops.launch_cause[safe], _LAUNCH)
    mat[rows, lcause] += t2 - tl
    # part 3: queued: a cross-stream wait, then the rest
    wait_end, qcause = queued_split(
        op, ended, t2, e, prev_comm=prev_comm, ops=ops, waits=waits, begin=begin
    )
    mat[:, _WAIT] += wait_end - t2
    mat[rows, qcause] += e - wait_end
    # relaunch: the call and pick-up latency inside a drain's catch-up are the sync's cost
    _to_sync(mat, drain & (lcause == _LAUNCH), tl, t2, catch_end)
    _to_sync(mat, drain & (qcause == _LAUNCH), wait_end, e, catch_end)
    parts = Parts(
        drain_end, disp_start, tl, t2, drain, srow, thr, qcause, wait_end, waits, catch_end
    )
    return mat, parts


def _to_sync(mat: I64, m: BoolArr, a: I64, b: I64, until: I64) -> None:
    """Move the ``launch_overhead`` ns of part ``[a, b)`` before ``until`` to ``host_sync``, in
    the gaps ``m`` (in place)."""
    ns = np.where(m, np.clip(until, a, b) - a, 0)
    mat[:, _LAUNCH] -= ns
    mat[:, _SYNC] += ns
