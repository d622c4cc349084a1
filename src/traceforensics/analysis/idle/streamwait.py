"""Stream-wait calls: the cross-stream dependency a queued GPU op waited on.

A framework makes stream B wait for work on stream A with two host calls: an event record
after that work (``cudaEventRecord``/``hipEventRecord`` on A), then a stream wait
(``cudaStreamWaitEvent``/``hipStreamWaitEvent`` on B); work launched on B afterwards does not
start before the recorded work ends. Runtime call rows carry no stream, so the streams are
read from the launches around the calls on the same thread::

    thread T  [L y (s13)] [EventRecord] [StreamWaitEvent] [L x (s7)]
    s13           |================== y ==================|
    s7                                        |.. queued ..|== x ==
              Y = y: the last op T launched before the record (the event's stream and work)
              W: the last wait call after T's previous launch and at or before L x

For a GPU op x launched by the call L on thread T (all times ns):

- W, the wait, is the latest stream-wait call on T with ``prev < W.start <= L.start``, where
  ``prev`` is the start of T's previous launch call: x is the first work T launched after W,
  so W is taken to target x's stream;
- R, the record, is the latest event-record call on T starting at or before W;
- Y, the waited-on work, is the GPU op T launched last before R (of a graph launch, the node
  that ends last); its (device, stream) is where the event was recorded.

The wait is cross-stream unless Y ran on x's own (device, stream) (a stream waiting on its own
past work depends on nothing else); it is dropped when x started before Y ended (x did not wait
for Y: the streams were read wrong). With Y known, the wait held x back until Y ended
(``GapWaits.wait_end``); with Y unknown (no record call, nothing launched before it) the wait
is recorded but what it waited for is not, and it covers the whole queued part. A Kineto/CUPTI
``Stream Wait Event`` record on x's stream (``OpTable.wait_ok``) is a wait too.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, fields

import numpy as np

from traceforensics.analysis.context import AnalysisContext
from traceforensics.model.units import I64, Mask

_NONE = np.iinfo(np.int64).max


@dataclass
class GapWaits:
    """What held back the op ending each gap, per gap: ``wait_row`` / ``record_row``: rows of
    W and R in ``HostClasses.frame`` (-1: none found); ``waited_op``: Y's row in ``ctx.work``
    (-1: unknown); ``counted``: W is a cross-stream wait (Y on another stream, not contradicted);
    ``has_wait``: a cross-stream wait precedes the op's launch (``counted`` or a stream-wait
    record, ``OpTable.wait_ok``); ``wait_end``: when the wait let go (Y's end, ns; int64 max
    when Y is unknown)."""

    wait_row: I64
    record_row: I64
    waited_op: I64
    counted: Mask
    has_wait: Mask
    wait_end: I64

    @classmethod
    def none(cls, n: int) -> GapWaits:
        m1 = np.full(n, -1, dtype=np.int64)
        no = np.zeros(n, bool)
        return cls(m1, m1.copy(), m1.copy(), no, no.copy(), np.full(n, _NONE, np.int64))

    def take(self, rows: I64) -> GapWaits:
        """These waits for gaps ``rows`` only (row j of the result is gap ``rows[j]``)."""
        return GapWaits(**{f.name: getattr(self, f.name)[rows] for f in fields(self)})

    @staticmethod
    def concat(chunks: Sequence[GapWaits]) -> GapWaits:
        """The waits of consecutive chunks of gaps as one (at least one chunk)."""
        return GapWaits(
            **{
                f.name: np.concatenate([getattr(w, f.name) for w in chunks])
                for f in fields(GapWaits)
            }
        )


def _take(values: I64, index: I64, fill: int) -> I64:
    """``values[index]`` where ``index >= 0``, else ``fill``. Total: ``values`` may be empty
    (then every index is -1), where ``values[np.maximum(index, 0)]`` inside an ``np.where``
    would index it anyway (both branches are evaluated) and fail."""
    out = np.full(index.size, fill, dtype=np.int64)
    hit = index >= 0
    out[hit] = values[index[hit]]
    return out


def _latest(keys: I64, thr: I64, q: I64, shift: int, *, strict: bool) -> I64:
    """Index into ``keys`` of the latest key of thread ``thr`` at or before ``q`` (before it
    with ``strict``); -1 when none."""
    if keys.size == 0:
        return np.full(q.size, -1, dtype=np.int64)
    i = np.searchsorted(keys, q, side="left" if strict else "right") - 1
    ok = (i >= 0) & (thr >= 0) & ((keys[np.maximum(i, 0)] >> shift) == thr)
    out: I64 = np.where(ok, i, -1)
    return out


@dataclass
class LaunchIndex:
    """Every linked launch call, per thread: sorted packed ``(thread, launch start)`` keys and
    the ``ctx.work`` row of each; among equal keys (a graph launch's nodes) the op that ends
    last comes last."""

    keys: I64
    rows: I64

    @classmethod
    def empty(cls) -> LaunchIndex:
        """An index of no launch."""
        return cls(np.zeros(0, dtype=np.int64), np.zeros(0, dtype=np.int64))

    @classmethod
    def of(cls, ctx: AnalysisContext) -> LaunchIndex:
        o = ctx.ops
        rows = np.flatnonzero(o.thr >= 0)
        keys = (o.thr[rows] << ctx.shift) | (o.launch_start[rows] - ctx.t0_ns)
        order = np.lexsort((o.end[rows], keys))
        return cls(keys[order], rows[order].astype(np.int64))


def gap_waits(ctx: AnalysisContext, op: I64, launches: LaunchIndex) -> GapWaits:
    """``GapWaits`` of the GPU ops ``op`` (rows of ``ctx.work``; -1: no op) ending gaps."""
    o, calls = ctx.ops, ctx.host.waits
    n = op.size
    out = GapWaits.none(n)
    has = op >= 0
    safe = np.maximum(op, 0)
    out.has_wait = has & o.wait_ok[safe]
    if calls.wait_keys.size == 0 or n == 0:
        return out
    shift, t0, mask = ctx.shift, ctx.t0_ns, (1 << ctx.shift) - 1
    lkeys, lrows = launches.keys, launches.rows
    thr = np.where(has, o.thr[safe], -1)
    on_thr = np.maximum(thr, 0) << shift
    q = on_thr | (o.launch_start[safe] - t0)
    prev = _latest(lkeys, thr, q, shift, strict=True)
    prev_t = np.where(prev >= 0, _take(lkeys, prev, 0) & mask, -1)
    w = _latest(calls.wait_keys, thr, q, shift, strict=False)
    w_t = np.where(w >= 0, _take(calls.wait_keys, w, 0) & mask, -1)
    w_ok = (w >= 0) & (w_t > prev_t)
    r = np.where(w_ok, _latest(calls.record_keys, thr, on_thr | w_t, shift, strict=False), -1)
    r_t = np.where(r >= 0, _take(calls.record_keys, r, 0) & mask, 0)
    y = np.where(r >= 0, _latest(lkeys, thr, on_thr | r_t, shift, strict=True), -1)
    yrow = _take(lrows, y, -1)
    ysafe = np.maximum(yrow, 0)  # rows of ctx.work: never empty when a gap ends in an op
    dev = _op_device(ctx)
    same = (yrow >= 0) & (dev[ysafe] == dev[safe]) & (o.stream[ysafe] == o.stream[safe])
    # x started before Y ended: x did not wait for Y, so the streams were read wrong
    contradicted = (yrow >= 0) & (o.start[safe] < o.end[ysafe])
    out.counted = w_ok & ~same & ~contradicted
    out.wait_row = _take(calls.wait_rows, np.where(w_ok, w, -1), -1)
    out.record_row = _take(calls.record_rows, r, -1)
    out.waited_op = yrow
    out.has_wait = out.has_wait | out.counted
    out.wait_end = np.where(out.counted & (yrow >= 0), o.end[ysafe], _NONE)
    return out


def _op_device(ctx: AnalysisContext) -> I64:
    """Device index (into ``ctx.devices``) of every row of ``ctx.work``."""
    counts = ctx.dev_hi - ctx.dev_lo
    return np.repeat(np.arange(counts.size, dtype=np.int64), counts)
