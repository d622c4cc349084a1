"""The host-late part ``[s, tl)`` of a gap: the launch had not been issued when the GPU went
idle, so the GPU waited on the launching thread. Three sub-rules, each with its timeline below:
the sync drain (``sync_drain``), the dispatch window (``dispatch_window_start``) and the
thread's class at each instant (``host_late``). All times are integer ns.
"""

from __future__ import annotations

import numpy as np

from traceforensics.analysis.host_classes import HostClasses, SyncIndex
from traceforensics.analysis.host_timeline import HostTimeline
from traceforensics.analysis.idle.causes import (
    CAUSE_INDEX,
    CPU_COMPUTE,
    DISPATCH_MAX_NS,
    HOST_SYNC,
    LAUNCH_OVERHEAD,
    N_CAUSES,
    SYNC_CATCHUP_MAX_NS,
    SYNC_DRAIN_SLACK_NS,
    UNTRACED,
)
from traceforensics.analysis.idle.streamwait import LaunchIndex
from traceforensics.model.units import I64
from traceforensics.model.units import Mask as BoolArr

_CPU = CAUSE_INDEX[CPU_COMPUTE]
_LAUNCH = CAUSE_INDEX[LAUNCH_OVERHEAD]
_SYNC = CAUSE_INDEX[HOST_SYNC]
_UNTRACED = CAUSE_INDEX[UNTRACED]


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


def dispatch_window_start(op_start: I64, last_end: I64, drain_end: I64, tl: I64) -> I64:
    """Start (ns) of the dispatch window ``[disp_start, tl)`` of each gap, read from the
    launching operator and its children: ``disp_start = clamp(max(op_start, last_end, tl -
    DISPATCH_MAX_NS), drain_end, tl)``.

    ``op_start`` is the start of the outermost generic operator enclosing the launch call L
    (the operator the framework was dispatching; nested operators on the way to L belong to
    it); ``last_end`` the end of the latest range of the launching thread that ended at or
    before L began and did other work (``dispatch_cuts``: a child op, annotation or Python
    frame, an allocator/sync/copy call...). From there to L the operator did nothing but
    dispatch this launch: its ``cpu_compute`` there is ``launch_overhead``. Time inside earlier
    children keeps their class; the operator's own time before its last child stays
    ``cpu_compute``::

        GPU   ==k1==|......................... gap ..........................|==k2==
        host  aten::_foreach_add_ ................................[L]
                |=result_type=| |=result_type=| ... |=result_type=|
              op_start                                           last_end tl e
              [s, last_end) children and the op's own time: cpu_compute (their class)
              [last_end, tl) dispatch: launch_overhead      [tl, e) launch call, queued

        host  aten::addmm ........................[L]   (no child: all of it is dispatch)
              op_start                            tl    [op_start, tl) launch_overhead

    ``DISPATCH_MAX_NS`` (10 ms) is only a sanity bound, far above real dispatch (µs to a few
    ms): longer own time of an operator with no recorded child is CPU work, not dispatch.
    """
    start = np.maximum(np.maximum(op_start, last_end), tl - DISPATCH_MAX_NS)
    out: I64 = np.clip(start, drain_end, tl)
    return out


def dispatch_cuts(host: HostClasses, launches: LaunchIndex) -> I64:
    """Sorted packed ``(thread, end)`` keys of the ranges that end a dispatch window: classified
    host rows that are not generic CUDA calls (``HostClasses.cut_rows``) and enclose no launch
    call. A child that launched GPU work of its own was dispatching too (a run of tiny kernels
    whose GPU time rounds to zero sits in one gap), so it does not cut::

        host  Optimizer.zero_grad ......................................................
                [zero_ [fill_ [L1]]]  [aten::empty]  [zero_ [fill_ [L2]]]
                 encloses L1: no cut   cut here ---->| dispatch window of L2
    """
    rows = host.cut_rows
    shift, t0 = host.tline.shift, host.tline.t0_ns
    ka = (host.thr[rows] << shift) | (host.start[rows] - t0)
    kb = (host.thr[rows] << shift) | (host.end[rows] - t0)
    inside = np.searchsorted(launches.keys, kb) - np.searchsorted(launches.keys, ka)
    return np.sort(kb[inside == 0])


def last_end(cuts: I64, tline: HostTimeline, thr: I64, t_ns: I64) -> I64:
    """End (ns) of the latest range of ``cuts`` (``dispatch_cuts``) on thread ``thr`` that ended
    at or before ``t_ns``: the last child that did other work before a launch at ``t_ns``;
    int64 min when none (or no thread)."""
    none = np.full(thr.size, np.iinfo(np.int64).min, dtype=np.int64)
    if cuts.size == 0:
        return none
    i = np.searchsorted(cuts, tline.key(np.maximum(thr, 0), t_ns), side="right") - 1
    k = cuts[np.maximum(i, 0)]
    ok = (i >= 0) & ((k >> tline.shift) == thr) & (thr >= 0)
    out: I64 = np.where(ok, (k & ((1 << tline.shift) - 1)) + tline.t0_ns, none)
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
