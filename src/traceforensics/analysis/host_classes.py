"""The host classes: host rows prepared for idle attribution, built once inside the
``AnalysisContext`` (``context.prepare``).

- every host row classified into a cause (``classify.classify_host``) and flattened per thread
  into a ``HostTimeline``;
- the synchronizing calls, indexed by (thread, end) for the sync-drain rule;
- the dispatch start of every launch: the start of the outermost generic operator enclosing it,
  and the rows that may cut a dispatch window (``late.dispatch_cuts``);
- the stream-wait and event-record calls of every thread (``WaitCalls``; read by the
  stream-wait rule, ``idle.streamwait``);
- the stream-wait flag of every GPU op (``wait_ok``).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
import polars as pl

from traceforensics.analysis.cause_table import (
    CAUSE_INDEX,
    CPU_COMPUTE,
    HOST_SYNC,
    LAUNCH_OVERHEAD,
    MEMCPY,
)
from traceforensics.analysis.classify import classify_host, slow_api_is_compilation
from traceforensics.analysis.host_timeline import HostTimeline, build_timeline
from traceforensics.analysis.intervals import overlap_components
from traceforensics.analysis.names import matching
from traceforensics.model.units import I8, I64, Mask

#: Host calls that make a stream wait on an event (CUDA runtime/driver, HIP).
STREAM_WAIT_API_RE = r"(?i)StreamWaitEvent"
#: Host calls that record an event on a stream.
EVENT_RECORD_API_RE = r"(?i)EventRecord"


@dataclass
class WaitCalls:
    """Stream-wait and event-record calls of every host thread: sorted packed ``(thread,
    start)`` keys and the row of each call in ``HostClasses.frame``."""

    wait_keys: I64
    wait_rows: I64
    record_keys: I64
    record_rows: I64


def wait_calls(
    frame: pl.DataFrame, thr: I64, start_ns: I64, *, t0_ns: int, shift: int
) -> WaitCalls:
    """The wait and record calls of ``frame`` (host rows sorted by thread then start; ``thr``
    and ``start_ns`` its columns as arrays), keyed like ``HostTimeline.key``."""
    api = (frame.get_column("kind") == "cuda_api").to_numpy()

    def pick(pattern: str) -> tuple[I64, I64]:
        rows = np.flatnonzero(api & frame.select(matching(frame, pattern)).to_series().to_numpy())
        return (thr[rows] << shift) | (start_ns[rows] - t0_ns), rows.astype(np.int64)

    wk, wr = pick(STREAM_WAIT_API_RE)
    rk, rr = pick(EVENT_RECORD_API_RE)
    return WaitCalls(wk, wr, rk, rr)


@dataclass
class SyncIndex:
    """Synchronizing host calls, sorted by packed (thread, end) key; ``row`` indexes
    ``HostClasses.frame``."""

    keys: I64
    start: I64
    end: I64
    row: I64


@dataclass
class HostClasses:
    """Classified host rows (``frame``: ``event_id, thr, kind, name, start_ns, end_ns, cause``,
    sorted by thread then start; ``thr``, ``start``, ``end``, ``cause`` and ``is_op`` are the
    same columns as numpy arrays), their timeline, the sync index, the dispatch operators
    (packed ``(thread, time)`` keys of the outermost generic operators), the rows that may cut
    a dispatch window (``cut_rows``: classified rows of non-zero length that are not generic
    CUDA calls, i.e. not of class ``launch_overhead``; ``late.dispatch_cuts``), the
    stream-wait calls and ``thread_tid[t]``, the OS thread id of thread index ``t`` (kept once
    per thread, not once per row)."""

    frame: pl.DataFrame
    thr: I64
    start: I64
    end: I64
    cause: I8
    is_op: Mask
    tline: HostTimeline
    sync: SyncIndex
    dispatch_s: I64
    dispatch_e: I64
    cut_rows: I64
    waits: WaitCalls
    thread_tid: I64

    def dispatch_start(self, thr: I64, launch: I64, t0_ns: int, shift: int) -> I64:
        """Start (ns) of the outermost generic operator enclosing each launch starting at
        ``launch`` on thread ``thr``; ``launch`` itself when none (or no thread) is known.
        With no such operator at all (a CUDA C program) that is ``launch`` itself, not a copy
        (read-only like every context array: 8 bytes per GPU op less)."""
        if self.dispatch_s.size == 0:
            return launch
        lk = (np.maximum(thr, 0) << shift) | (launch - t0_ns)
        ci = np.searchsorted(self.dispatch_s, lk, side="right") - 1
        cs = np.maximum(ci, 0)
        inside = (
            (ci >= 0)
            & (self.dispatch_e[cs] > lk)
            & ((self.dispatch_s[cs] >> shift) == thr)
            & (thr >= 0)
        )
        out: I64 = np.where(inside, (self.dispatch_s[cs] & ((1 << shift) - 1)) + t0_ns, launch)
        return out.astype(np.int64)


def classify_rows(host: pl.DataFrame, data_patterns: Sequence[str], marker_re: str) -> I8:
    """Cause index of each row of the prepared host table (``causes.CAUSE_INDEX``, -1: none),
    before the blocking-copy rule (``host_classes``)."""
    flagged = host.with_columns(pl.lit(False).alias("blocking_d2h"))
    is_api = (host.get_column("kind") == "cuda_api").to_numpy()
    dur = (host.get_column("end_ns") - host.get_column("start_ns")).to_numpy()
    cause = slow_api_is_compilation(classify_host(flagged, data_patterns, marker_re), is_api, dur)
    out: I8 = cause.to_numpy().astype(np.int8)
    return out


def host_classes(
    host: pl.DataFrame, cause: I8, blocking_calls: pl.Series, *, t0_ns: int, shift: int
) -> HostClasses:
    """The classified host table (``host``: the prepared host rows with ``thr``, sorted by
    (thr, start, -end, event id); ``cause``: ``classify_rows``), its timeline, sync index and
    dispatch operators.

    ``blocking_calls``: event ids of the copy calls whose linked GPU copy (``links``) is
    device-to-host: such a call blocks until the queue drains, so its ``memcpy`` class becomes
    ``host_sync``."""
    c = cause.copy()
    blocking = host.get_column("event_id").is_in(blocking_calls.implode()).to_numpy()
    c[blocking & (c == CAUSE_INDEX[MEMCPY])] = CAUSE_INDEX[HOST_SYNC]
    frame = host.with_columns(pl.Series("cause", c, dtype=pl.Int8))
    # views of the frame's columns (int64 without nulls: no copy of 3 x 8 bytes per row)
    thr = np.asarray(frame.get_column("thr").to_numpy(), dtype=np.int64)
    s = np.asarray(frame.get_column("start_ns").to_numpy(), dtype=np.int64)
    e = np.asarray(frame.get_column("end_ns").to_numpy(), dtype=np.int64)
    tline = build_timeline(thr, s, e, c, t0_ns=t0_ns, shift=shift)

    sync_m = c == CAUSE_INDEX[HOST_SYNC]
    sk = (thr[sync_m] << shift) | (e[sync_m] - t0_ns)
    order = np.argsort(sk, kind="stable")
    sync = SyncIndex(sk[order], s[sync_m][order], e[sync_m][order], np.flatnonzero(sync_m)[order])
    # dispatch: outermost generic operator around each launch (touching siblings stay apart)
    is_op = (frame.get_column("kind") == "cpu_op").to_numpy()
    disp = (c == CAUSE_INDEX[CPU_COMPUTE]) & is_op
    dks = (thr[disp] << shift) | (s[disp] - t0_ns)
    dke = (thr[disp] << shift) | (e[disp] - t0_ns)
    o = np.argsort(dks, kind="stable")
    comp_s, comp_e = overlap_components(dks[o], dke[o])
    # dispatch windows stop at the end of the last range that did other work before the launch
    # (any classified range but a generic CUDA call: those are the launch machinery itself)
    cut_rows = np.flatnonzero((c >= 0) & (c != CAUSE_INDEX[LAUNCH_OVERHEAD]) & (e > s))
    keep = frame.select("event_id", "thr", "kind", "name", "start_ns", "end_ns", "cause")
    waits = wait_calls(keep, thr, s, t0_ns=t0_ns, shift=shift)
    # ``thr`` numbers the threads densely and the rows are sorted by it: each thread's first row
    thread_tid = frame.get_column("tid").to_numpy()[np.searchsorted(thr, np.arange(_threads(thr)))]
    return HostClasses(
        keep,
        thr,
        s,
        e,
        c,
        is_op,
        tline,
        sync,
        comp_s,
        comp_e,
        cut_rows,
        waits,
        np.asarray(thread_tid, dtype=np.int64),
    )


def _threads(thr: I64) -> int:
    """Number of thread indices of ``thr`` (sorted, dense from 0)."""
    return int(thr[-1]) + 1 if thr.size else 0


def stream_wait_flags(work: pl.DataFrame, syncs: pl.DataFrame) -> pl.Series:
    """``wait_ok`` per row of ``work`` (GPU ops with ``event_id, rank, device, stream,
    start_ns, launch_start_ns``; ``syncs``: the gpu_sync records with a stream, ``rank,
    device, stream, name, start_ns``): a GPU stream-wait record (gpu_sync named like
    ``*Wait*``) on the op's stream was issued (``w_start``, ns) after the previous launch on
    that stream (``prev_ls``) and at or before this op's launch start (``ls``): ``prev_ls <
    w_start <= ls``. The queued part of a gap ended by such an op is ``cross_stream_wait``
    (until the waited-on work ended when the wait call reveals it, ``streamwait``;
    ``queued.queued_split``)::

        host      [L k1]            [L k2]
        gpu_sync             ^ Stream Wait Event on the stream of k2
                  prev_ls    w_start  ls
                  prev_ls < w_start <= ls -> wait_ok (k2's queued part: cross_stream_wait)
    """
    waits = (
        syncs.filter(matching(syncs, r"(?i)wait"))
        .select("rank", "device", "stream", pl.col("start_ns").alias("w_start"))
        .sort("w_start")
    )
    if waits.height == 0:
        return pl.Series("wait_ok", [False] * work.height, dtype=pl.Boolean)
    ops = work.select(
        "event_id", "rank", "device", "stream", "start_ns", "launch_start_ns"
    ).with_columns(
        pl.col("launch_start_ns")
        .shift(1)
        .over(["rank", "device", "stream"], order_by="start_ns")
        .alias("prev_ls")
    )
    joined = (
        ops.filter(pl.col("launch_start_ns").is_not_null())
        .sort("launch_start_ns")
        .join_asof(
            waits,
            left_on="launch_start_ns",
            right_on="w_start",
            by=["rank", "device", "stream"],
            strategy="backward",
            check_sortedness=False,
        )
        .select(
            "event_id",
            (
                pl.col("w_start").is_not_null()
                & (pl.col("prev_ls").is_null() | (pl.col("w_start") > pl.col("prev_ls")))
            ).alias("wait_ok"),
        )
    )
    return (
        ops.select("event_id")
        .join(joined, on="event_id", how="left", maintain_order="left")
        .get_column("wait_ok")
        .fill_null(False)
    )
