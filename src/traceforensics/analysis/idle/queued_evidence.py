"""Evidence for the queued part ``[t2, e)`` of a gap (``queued``): the stream-wait call and what
it waited on, or why nothing recorded explains the wait. Built only for the reported gaps, so
plain Python is fine here.

    host      [L y s13][EventRecord R][StreamWaitEvent W][L x s7]
    device 1  s13 |==================== y ====================|
    device 0  s7  ==k1==|.......................................|.|== x ==
    evidence: W (name, start, "issued .. before the launch"), R ("recorded after y was
              launched on stream 13"), y (start, duration, "ended .. after the GPU went idle")
"""

from __future__ import annotations

import polars as pl

from traceforensics.analysis.context import AnalysisContext
from traceforensics.analysis.idle.attribution import Parts
from traceforensics.analysis.idle.causes import CAUSES, CROSS_STREAM_WAIT, GPU_PICKUP, UNTRACED
from traceforensics.analysis.idle.results import Evidence, duration_text
from traceforensics.analysis.names import matching


def queued_evidence(
    ctx: AnalysisContext, i: int, *, s: int, e: int, op: int, parts: Parts, tid: int | None
) -> list[Evidence]:
    """Evidence for the queued part of gap ``[s, e)`` (row ``i`` of ``parts``; ``op``: the row of
    the op ending it in ``ctx.work``; ``tid``: its launching thread)."""
    t2, wait_end = int(parts.t2[i]), int(parts.wait_end[i])
    w = parts.waits
    row = ctx.work.row(op, named=True)
    out: list[Evidence] = []
    if wait_end > t2:
        if w.counted[i]:
            out.extend(_wait_calls(ctx, i, s=s, e=e, op=op, parts=parts, tid=tid))
        else:
            out.append(_wait_record(ctx, row, int(ctx.ops.launch_start[op])))
    rest = e - wait_end
    if rest > 0 and CAUSES[int(parts.qcause[i])] == UNTRACED:
        why = (
            _no_dependency(ctx, parts, i, t2=t2, op=op)
            if int(w.wait_row[i]) >= 0 and int(w.waited_op[i]) >= 0
            else "no stream-wait call right before the launch on its thread, no stream-wait "
            f"record on stream {row['stream']}, not a collective"
        )
        out.append(
            Evidence(
                UNTRACED,
                "none",
                "",
                wait_end,
                rest,
                None,
                f"queued {duration_text(rest)} with its launch call returned and the GPU idle: "
                f"{why}; nothing recorded explains the wait",
            )
        )
    if rest > 0 and CAUSES[int(parts.qcause[i])] == GPU_PICKUP:
        out.append(_pickup(ctx, op, s=s, rest=rest, tid=tid))
    return out


def _pickup(ctx: AnalysisContext, op: int, *, s: int, rest: int, tid: int | None) -> Evidence:
    """The launch call of queued work the GPU picked up ``rest`` ns after going idle at ``s``:
    it had returned before the gap began (``queued.prequeued``)."""
    o = ctx.ops
    ls, le = int(o.launch_start[op]), int(o.launch_end[op])
    return Evidence(
        GPU_PICKUP,
        "cuda_api",
        str(ctx.work.row(op, named=True)["l_name"]),
        ls,
        le - ls,
        tid,
        f"launched {_ago(s - ls)} before the gap began (the call returned {_ago(s - le)} "
        f"before): the work was already queued; the GPU started it {duration_text(rest)} "
        "after going idle (pick-up, no launch waited for)",
    )


def _ago(ns: int) -> str:
    """``ns`` as a duration; "0 ns" for a time at or after the reference."""
    return duration_text(max(ns, 0))


def _wait_calls(
    ctx: AnalysisContext, i: int, *, s: int, e: int, op: int, parts: Parts, tid: int | None
) -> list[Evidence]:
    """The wait call W, the record call R and the waited-on work Y of gap ``i``."""
    w, frame = parts.waits, ctx.host.frame
    call = frame.row(int(w.wait_row[i]), named=True)
    ls = int(ctx.ops.launch_start[op])
    stream = ctx.work.row(op, named=True)["stream"]
    out = [
        Evidence(
            CROSS_STREAM_WAIT,
            "cuda_api",
            str(call["name"]),
            int(call["start_ns"]),
            int(call["end_ns"] - call["start_ns"]),
            tid,
            f"stream-wait call issued {duration_text(ls - int(call['start_ns']))} before the "
            f"launch, nothing launched in between on thread {tid}: stream {stream} waited on "
            "an event",
        )
    ]
    y = int(w.waited_op[i])
    yrow = ctx.work.row(y, named=True) if y >= 0 else None
    if int(w.record_row[i]) >= 0:
        rec = frame.row(int(w.record_row[i]), named=True)
        after = (
            f"after {yrow['name']} was launched on stream {yrow['stream']} (device "
            f"{yrow['device']})"
            if yrow is not None
            else "with nothing launched before it on this thread: its stream is not known"
        )
        out.append(
            Evidence(
                CROSS_STREAM_WAIT,
                "cuda_api",
                str(rec["name"]),
                int(rec["start_ns"]),
                int(rec["end_ns"] - rec["start_ns"]),
                tid,
                f"the event waited on was recorded here, {after}",
            )
        )
    if yrow is not None:
        end = int(yrow["end_ns"])
        out.append(
            Evidence(
                CROSS_STREAM_WAIT,
                str(yrow["kind"]),
                str(yrow["name"]),
                int(yrow["start_ns"]),
                end - int(yrow["start_ns"]),
                None,
                f"the work the event waited for (device {yrow['device']}, stream "
                f"{yrow['stream']}): ended {duration_text(end - s)} after the GPU went idle; "
                f"the queued op started {duration_text(e - end)} later",
            )
        )
    return out


def _wait_record(ctx: AnalysisContext, row: dict[str, object], ls: int) -> Evidence:
    """The latest GPU stream-wait record on the op's stream at or before its launch ``ls``."""
    ev = ctx.session.events
    rec = ev.filter(
        (pl.col("kind") == "gpu_sync")
        & (pl.col("rank") == row["rank"])
        & (pl.col("device") == row["device"])
        & (pl.col("stream") == row["stream"])
        & (pl.col("start_ns") <= ls)
        & matching(ev, r"(?i)wait")
    ).sort("start_ns")
    detail = f"a stream-wait record on stream {row['stream']} precedes the launch; the work it "
    detail += "waited for is not recorded"
    if rec.height == 0:
        return Evidence(CROSS_STREAM_WAIT, "gpu_sync", "stream wait", ls, 0, None, detail)
    r = rec.row(rec.height - 1, named=True)
    name, start, dur = str(r["name"]), int(r["start_ns"]), int(r["dur_ns"])
    return Evidence(CROSS_STREAM_WAIT, "gpu_sync", name, start, dur, None, detail)


def _no_dependency(ctx: AnalysisContext, parts: Parts, i: int, *, t2: int, op: int) -> str:
    """Why the wait call W found before the launch explains none of the queued time: the work Y
    it waited for ran on the op's own stream, ended after the op started (so the op did not
    wait for it), or had ended by the time the op was queued on an idle GPU."""
    w = parts.waits
    call = ctx.host.frame.row(int(w.wait_row[i]), named=True)
    y = ctx.work.row(int(w.waited_op[i]), named=True)
    x = ctx.work.row(op, named=True)
    head = f"the {call['name']} before the launch waited on {y['name']} (stream {y['stream']})"
    if (y["device"], y["stream"]) == (x["device"], x["stream"]):
        return f"{head}, on the op's own stream: no dependency on other work"
    if int(y["end_ns"]) > int(x["start_ns"]):
        return f"{head}, which ended after the op started: the op did not wait for it"
    return f"{head}, which had ended {duration_text(t2 - int(y['end_ns']))} before"
