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
    """One ``StreamIdle`` per (rank, device, stream), vectorised over all streams."""
    o = ctx.ops
    if o.start.size == 0:
        return []
    dev = np.repeat(np.arange(len(ctx.devices), dtype=np.int64), ctx.dev_hi - ctx.dev_lo)
    pair = dev * (1 << 32) + (o.stream & 0xFFFFFFFF)
    keys, group = unique_inverse(pair)
    del dev, pair  # one int64 per op each: gone before the union's own temporaries
    group = group.astype(np.int64, copy=False)
    # (stream, time) keys that cannot fit int64 mean mixed clocks: an error, never a silent []
    shift = pack_shift(ctx.trace_span[1] - ctx.t0_ns + 1, int(keys.size))
    ug, us, ue = grouped_union(group, o.start, o.end, ctx.t0_ns, shift)
    if ug.size == 0:
        return []
    same = ug[1:] == ug[:-1]
    gap_g, gap_s, gap_e = ug[1:][same], ue[:-1][same], us[1:][same]
    # op that ends each gap: first op of the stream starting at the gap end
    sk = (group << shift) | (o.start - ctx.t0_ns)
    order = np.argsort(sk, kind="stable")
    q = (gap_g << shift) | (gap_e - ctx.t0_ns)
    idx = order[np.minimum(np.searchsorted(sk[order], q), order.size - 1)]
    host_late = (o.thr[idx] >= 0) & (o.launch_start[idx] > gap_s)
    n_g = keys.size
    first = np.full(n_g, np.iinfo(np.int64).max)
    last = np.zeros(n_g, dtype=np.int64)
    np.minimum.at(first, ug, us)
    np.maximum.at(last, ug, ue)
    # integer ns sums (np.add.at), never float weights
    busy = np.zeros(n_g, dtype=np.int64)
    np.add.at(busy, ug, ue - us)
    dur = gap_e - gap_s
    idle = np.zeros(n_g, dtype=np.int64)
    np.add.at(idle, gap_g, dur)
    n_gaps = np.bincount(gap_g, minlength=n_g)
    hw = np.zeros(n_g, dtype=np.int64)
    np.add.at(hw, gap_g, np.where(host_late, dur, 0))
    out: list[StreamIdle] = []
    for k in range(n_g):
        rank, device = ctx.devices[int(keys[k] >> 32)]
        stream = int(keys[k] & 0xFFFFFFFF)
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
