"""HTA's per-stream idle view: gaps between one stream's own ops, split by who was late.

    stream 7:  |==k1==|.....gap.....|==k2==|
    launch k2:            |L|                 L began after the gap began -> host_wait
    launch k2:  |L|                           L was issued before          -> queued_wait

The window of a stream runs from its first to its last op. Unlike the device view, a stream
gap can be covered by work on other streams; the headline idle is the device view.
"""

from __future__ import annotations

import numpy as np

from traceforensics.analysis.context import AnalysisContext
from traceforensics.analysis.idle.results import StreamIdle
from traceforensics.analysis.intervals import grouped_union, pack_shift, unique_inverse


def stream_idle(ctx: AnalysisContext) -> list[StreamIdle]:
    """One ``StreamIdle`` per (rank, device, stream) with work of non-zero length, in (device,
    stream) order, vectorised over the streams of one device at a time (the working set, ~80
    bytes per op, is then that of the largest device, not of every op of the trace)."""
    out: list[StreamIdle] = []
    for g, (rank, device) in enumerate(ctx.devices):
        lo, hi = int(ctx.dev_lo[g]), int(ctx.dev_hi[g])
        if hi > lo:
            out.extend(_device_streams(ctx, rank, device, lo, hi))
    return out


def _device_streams(
    ctx: AnalysisContext, rank: int, device: int, lo: int, hi: int
) -> list[StreamIdle]:
    """``StreamIdle`` of the streams of the device whose ops are rows ``[lo, hi)`` of
    ``ctx.ops`` (sorted by start)."""
    o = ctx.ops
    start, end = o.start[lo:hi], o.end[lo:hi]
    keys, group = unique_inverse(o.stream[lo:hi] & 0xFFFFFFFF)
    # (stream, time) keys that cannot fit int64 mean mixed clocks: an error, never a silent []
    shift = pack_shift(ctx.trace_span[1] - ctx.t0_ns + 1, int(keys.size))
    ug, us, ue = grouped_union(group, start, end, ctx.t0_ns, shift)
    same = ug[1:] == ug[:-1]
    gap_g, gap_s, gap_e = ug[1:][same], ue[:-1][same], us[1:][same]
    del same
    # op that ends each gap: first op of the stream starting at the gap end (the rows are in
    # start order, so a stable sort by stream orders each stream's ops by start)
    sk = (group << shift) | (start - ctx.t0_ns)
    del group
    order = np.argsort(sk, kind="stable")
    sk = sk[order]
    q = (gap_g << shift) | (gap_e - ctx.t0_ns)
    idx = lo + order[np.minimum(np.searchsorted(sk, q), order.size - 1)]
    del sk, order, q
    host_late = (o.thr[idx] >= 0) & (o.launch_start[idx] > gap_s)
    del idx
    n_g = keys.size
    first = np.full(n_g, np.iinfo(np.int64).max)
    last = np.zeros(n_g, dtype=np.int64)
    np.minimum.at(first, ug, us)
    np.maximum.at(last, ug, ue)
    # integer ns sums (np.add.at), never float weights
    busy = np.zeros(n_g, dtype=np.int64)
    np.add.at(busy, ug, ue - us)
    has_work = np.bincount(ug, minlength=n_g) > 0  # a stream of zero-length ops only: none
    dur = gap_e - gap_s
    idle = np.zeros(n_g, dtype=np.int64)
    np.add.at(idle, gap_g, dur)
    n_gaps = np.bincount(gap_g, minlength=n_g)
    hw = np.zeros(n_g, dtype=np.int64)
    np.add.at(hw, gap_g, np.where(host_late, dur, 0))
    out: list[StreamIdle] = []
    for k in np.flatnonzero(has_work).tolist():
        stream = int(keys[k])
        if stream >= 1 << 31:
            stream -= 1 << 32
        idle_k = round(idle[k])
        out.append(
            StreamIdle(
                rank=rank,
                device=device,
                stream=stream,
                window_start_ns=int(first[k]),
                window_ns=int(last[k] - first[k]),
                busy_ns=round(busy[k]),
                idle_ns=idle_k,
                n_gaps=int(n_gaps[k]),
                host_wait_ns=round(hw[k]),
                queued_wait_ns=idle_k - round(hw[k]),
            )
        )
    return out
