"""Evidence for a gap's attribution: the recorded events a reader can check the claim against.

Built only for the gaps that are reported (the largest N), so plain Python is fine here.
"""

from __future__ import annotations

from dataclasses import replace

import numpy as np

from traceforensics.analysis.context import AnalysisContext
from traceforensics.analysis.idle.attribution import Parts
from traceforensics.analysis.idle.causes import (
    CAUSE_INDEX,
    CAUSES,
    CPU_COMPUTE,
    CROSS_STREAM_WAIT,
    GPU_PICKUP,
    HOST_SYNC,
    LAUNCH_OVERHEAD,
    UNTRACED,
)
from traceforensics.analysis.idle.queued_evidence import queued_evidence
from traceforensics.analysis.idle.results import Evidence
from traceforensics.analysis.idle.results import duration_text as _us

_MAX_PER_CAUSE = 2
_RELAUNCH = "the host relaunching into the queue a sync drained: host_sync"


def gap_evidence(
    ctx: AnalysisContext,
    i: int,
    *,
    s: int,
    e: int,
    op: int,
    parts: Parts,
    causes: dict[str, int],
    correlation: int | None,
) -> list[Evidence]:
    """Evidence for gap ``[s, e)`` (row ``i`` of ``parts``) ended by op row ``op`` (-1: none;
    ``correlation``: its correlation id, ``AnalysisContext.correlations``)."""
    if op < 0:
        return _trailing_gap_evidence(ctx, i, s=s, e=e, parts=parts, causes=causes)
    row = ctx.work.row(op, named=True)
    o = ctx.ops
    out = [
        Evidence(
            _queued_cause(i, e, parts),
            str(row["kind"]),
            str(row["name"]),
            int(o.start[op]),
            int(o.end[op] - o.start[op]),
            None,
            f"first GPU work after the gap (stream {row['stream']}, correlation {correlation})",
        )
    ]
    thr = int(o.thr[op])
    if thr < 0:
        out.append(Evidence(UNTRACED, "none", "", s, e - s, None, "no launch call linked"))
        return out
    tid = _tid(ctx, thr)
    tl = int(parts.tl[i])
    launch = _launch_evidence(ctx, op, str(row["l_name"]), tid, late=tl - s)
    if launch.cause == LAUNCH_OVERHEAD and int(parts.catch_end[i]) > tl:
        launch = replace(launch, cause=HOST_SYNC, detail=f"{launch.detail}; {_RELAUNCH}")
    if CAUSES[int(parts.qcause[i])] != GPU_PICKUP or int(parts.t2[i]) > s:
        out.append(launch)  # (a pick-up's launch call is named by its own line, queued_evidence)
    out.extend(_sync_evidence(ctx, i, s, parts, tid))
    queued = queued_evidence(ctx, i, s=s, e=e, op=op, parts=parts, tid=tid)
    out.extend(queued)
    drain_end, dispatch = int(parts.drain_end[i]), int(parts.dispatch_from[i])
    out.extend(_host_ranges(ctx, thr, drain_end, tl, dispatch=dispatch, tid=tid, causes=causes))
    # untraced host time: what is left once the queued part's untraced time is taken out
    host_untraced = causes.get(UNTRACED, 0) - sum(q.dur_ns for q in queued if q.cause == UNTRACED)
    if host_untraced > 0 and tl > s:
        out.append(
            Evidence(
                UNTRACED,
                "none",
                "",
                s,
                host_untraced,
                tid,
                f"no classified host range on thread {tid} covers {_us(host_untraced)}",
            )
        )
    return out


def _queued_cause(i: int, e: int, parts: Parts) -> str:
    """Cause of the op's own wait in the queue: the cross-stream wait when there was one, else
    the cause of the queued time; "" when the op was not queued."""
    if int(parts.wait_end[i]) > int(parts.t2[i]):
        return CROSS_STREAM_WAIT
    if e <= int(parts.t2[i]):
        return ""
    cause = CAUSES[int(parts.qcause[i])]
    # the relaunch's pick-up inside a sync's catch-up is the sync's (attribution._to_sync)
    relaunch = cause == LAUNCH_OVERHEAD and int(parts.catch_end[i]) > int(parts.wait_end[i])
    return HOST_SYNC if relaunch else cause


def _trailing_gap_evidence(
    ctx: AnalysisContext, i: int, *, s: int, e: int, parts: Parts, causes: dict[str, int]
) -> list[Evidence]:
    """A gap no GPU work ends: the absence itself, then what the last launching thread did."""
    thr = int(parts.thr[i])
    tid = _tid(ctx, thr)
    out = [
        Evidence(
            "",
            "none",
            "",
            e,
            0,
            tid,
            "no GPU work follows this gap in the trace; classified on the thread "
            "that launched the last GPU work",
        )
    ]
    if thr >= 0:
        out.extend(_sync_evidence(ctx, i, s, parts, tid))
        drain_end = int(parts.drain_end[i])
        out.extend(_host_ranges(ctx, thr, drain_end, e, dispatch=e, tid=tid, causes=causes))
    return out


def _launch_evidence(
    ctx: AnalysisContext, op: int, name: str, tid: int | None, *, late: int
) -> Evidence:
    """The launch call of op row ``op``; ``late`` ns after the GPU went idle (<= 0: before)."""
    o = ctx.ops
    return Evidence(
        CAUSES[int(o.launch_cause[op])],
        "cuda_api",
        name,
        int(o.launch_start[op]),
        int(o.launch_end[op] - o.launch_start[op]),
        tid,
        f"launch call; issued {_us(late)} after the GPU went idle"
        if late > 0
        else "launch call; issued before the GPU went idle",
    )


def _tid(ctx: AnalysisContext, thr: int) -> int | None:
    if thr < 0:
        return None
    tids = ctx.host.thread_tid
    return int(tids[thr]) if thr < tids.size else None


def _sync_evidence(
    ctx: AnalysisContext, i: int, s: int, parts: Parts, tid: int | None
) -> list[Evidence]:
    if not (parts.drain[i] and parts.sync_row[i] >= 0):
        return []
    h = ctx.host.frame.row(int(parts.sync_row[i]), named=True)
    ret = int(h["end_ns"]) - s
    when = f"{_us(ret)} after" if ret >= 0 else f"{_us(-ret)} before"
    return [
        Evidence(
            HOST_SYNC,
            str(h["kind"]),
            str(h["name"]),
            int(h["start_ns"]),
            int(h["end_ns"] - h["start_ns"]),
            tid,
            f"synchronizing call returned {when} the gap began; the queue was drained",
        )
    ]


def _host_ranges(
    ctx: AnalysisContext,
    thr: int,
    a: int,
    b: int,
    *,
    dispatch: int,
    tid: int | None,
    causes: dict[str, int],
) -> list[Evidence]:
    """The longest-overlapping host ranges of each attributed class within ``[a, b)``."""
    if b <= a:
        return []
    h = ctx.host
    lo, hi = (int(x) for x in np.searchsorted(h.thr, [thr, thr + 1]))
    sub = h.frame.slice(lo, hi - lo)
    st, en, cl, is_op = h.start[lo:hi], h.end[lo:hi], h.cause[lo:hi], h.is_op[lo:hi]
    ov = np.minimum(en, b) - np.maximum(st, a)
    out: list[Evidence] = []
    for cause_id in CAUSES:
        ci = CAUSE_INDEX[cause_id]
        if causes.get(cause_id, 0) <= 0:
            continue
        detail = f"launching thread inside this range for part of the gap ({cause_id})"
        if cause_id == LAUNCH_OVERHEAD and dispatch < b:
            ovc = np.minimum(en, b) - np.maximum(st, dispatch)
            rows = np.flatnonzero((cl == CAUSE_INDEX[CPU_COMPUTE]) & is_op & (ovc > 0))
            detail = "operator dispatching the launch"
            if rows.size == 0:
                rows = np.flatnonzero((cl == ci) & (ov > 0))
                ovc = ov
        elif cause_id == CPU_COMPUTE:
            ovc = np.minimum(en, dispatch) - np.maximum(st, a)
            rows = np.flatnonzero((cl == ci) & (ovc > 0))
        else:
            ovc = ov
            rows = np.flatnonzero((cl == ci) & (ovc > 0))
        # most overlap first; among equals the innermost (shortest) range says the most
        best = rows[np.lexsort((en[rows] - st[rows], -ovc[rows]))[:_MAX_PER_CAUSE]]
        for r in best:
            row = sub.row(int(r), named=True)
            out.append(
                Evidence(
                    cause_id,
                    str(row["kind"]),
                    str(row["name"]),
                    int(row["start_ns"]),
                    int(row["end_ns"] - row["start_ns"]),
                    tid,
                    f"{detail}; overlaps the gap by {_us(int(ovc[r]))}",
                )
            )
    return out
