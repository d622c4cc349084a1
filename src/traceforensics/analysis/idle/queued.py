"""The queued part ``[t2, e)`` of a gap: the launch call L of the op ending the gap had
returned, the work sat in its stream's queue, and the GPU was idle. What held it back, in
order (all times ns):

(a) a cross-stream wait (``streamwait``): a stream-wait call issued right before L on the
    launching thread, on an event recorded on another stream, or a ``Stream Wait Event``
    record on the op's stream: ``cross_stream_wait`` until the waited-on work ended (all of
    the part when that work is not visible)::

        host      [L y s13][EventRecord][StreamWaitEvent][L x s7]        (all before s)
        device 1  s13 |==================== y ====================|
        device 0  s7  ==k1==|......................................|.|== x ==
                            s = t2                        wait_end  e
                  [t2, wait_end) cross_stream_wait (wait_end = end of y)
                  [wait_end, e) the rules below (here: pick-up latency; x was launched
                  before s, so gpu_pickup)

(b) the op's own stream busy with earlier work is no gap at all: the device is busy then;
(c) ``communication`` when the op is a collective, or the op that ended just before the gap
    was one (the op waits on peers); a host sync never holds queued work back: it is charged
    in the host-late part (``late.sync_drain``);
(d) what is left (nothing recorded held the op back) is GPU pick-up latency when it is at
    most ``QUEUED_LAUNCH_LATENCY_MAX_NS`` (50 µs): ``gpu_pickup`` when the launch call L had
    returned before the gap began (``le <= s0``, where the gap really began: the work was
    queued all along and did not wait for a launch), else ``launch_overhead`` (the GPU waited
    for L, then picked the work up). Longer is ``untraced``: nothing recorded explains it::

        host      [L x]                     (returned long before the GPU went idle)
        stream 7  ==k1==|.|== x ==          [s, e) gpu_pickup (<= 50 µs, le <= s)
        stream 7  ==k1==|......... queued, nothing recorded .........|== x ==
                        s = t2                                       e
                  [t2, e) untraced (> 50 µs, no wait call or record, no collective)

        host           [L x ........]       (issued while the GPU was already idle)
        stream 7  ==k1==|..............|.|== x ==
                        s              t2 e
                  [s, t2) host-late + launch call   [t2, e) launch_overhead (le > s)

    Not linked to a launch call (no correlation): ``untraced``, whatever its length.
"""

from __future__ import annotations

import numpy as np

from traceforensics.analysis.context import OpTable
from traceforensics.analysis.idle.causes import (
    CAUSE_INDEX,
    COMMUNICATION,
    GPU_PICKUP,
    LAUNCH_OVERHEAD,
    QUEUED_LAUNCH_LATENCY_MAX_NS,
    UNTRACED,
)
from traceforensics.analysis.idle.streamwait import GapWaits
from traceforensics.model.units import I64
from traceforensics.model.units import Mask as BoolArr


def queued_split(
    op: I64,
    ended: BoolArr,
    t2: I64,
    e: I64,
    *,
    prev_comm: BoolArr,
    ops: OpTable,
    waits: GapWaits,
    begin: I64,
) -> tuple[I64, I64]:
    """``(wait_end, rest_cause)`` per gap: ``[t2, wait_end)`` is ``cross_stream_wait`` (rule
    (a); ``wait_end = t2`` when no wait held the op back), ``[wait_end, e)`` has the cause index
    ``rest_cause`` (rules (c) and (d), ``queued_cause``); ``begin``: where each gap really
    began (ns; before any clipping to a window)."""
    held = ended & waits.has_wait
    wait_end: I64 = np.where(held, np.clip(waits.wait_end, t2, e), t2)
    return wait_end, queued_cause(op, ended, e - wait_end, prev_comm, ops, begin)


def prequeued(op: I64, ended: BoolArr, begin: I64, ops: OpTable) -> BoolArr:
    """The launch call of the op ending each gap had returned at or before the gap began
    (``launch_end <= begin``, ns): the work was queued before the GPU went idle. False for a
    gap with no linked ending op (``ended`` False: no launch known, nothing to compare)."""
    safe = np.maximum(op, 0)
    out: BoolArr = ended & (op >= 0) & (ops.launch_end[safe] <= begin)
    return out


def queued_cause(
    op: I64, ended: BoolArr, queued_ns: I64, prev_comm: BoolArr, ops: OpTable, begin: I64
) -> I64:
    """Cause index of the queued time left after any cross-stream wait (``queued_ns`` long):
    ``communication`` (op, or the op that ended just before the gap, is a collective); else,
    when ``queued_ns <= QUEUED_LAUNCH_LATENCY_MAX_NS`` (50 000 ns, GPU pick-up latency),
    ``gpu_pickup`` if the op was queued before the gap began (``prequeued``) and
    ``launch_overhead`` if not; else ``untraced``. A gap with no launched ending op is
    ``untraced``."""
    has = op >= 0
    safe = np.maximum(op, 0)
    qcause = np.full(op.size, CAUSE_INDEX[UNTRACED], dtype=np.int64)
    short = queued_ns <= QUEUED_LAUNCH_LATENCY_MAX_NS
    early = prequeued(op, ended, begin, ops)
    qcause[short & ~early] = CAUSE_INDEX[LAUNCH_OVERHEAD]
    qcause[short & early] = CAUSE_INDEX[GPU_PICKUP]
    qcause[has & (ops.is_comm[safe] | prev_comm)] = CAUSE_INDEX[COMMUNICATION]
    qcause[~ended] = CAUSE_INDEX[UNTRACED]
    return qcause
