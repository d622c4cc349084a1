"""The per-stream idle view (``idle.streams.stream_idle``) against a plain-Python recomputation
from the context's GPU ops: each stream's union, its holes, and for each hole whether the op
that ends it was launched after the hole began (``host_wait``)."""

from __future__ import annotations

from collections import defaultdict
from itertools import pairwise

import polars as pl
import pytest

from tests.conftest import plain_union, shared_trace
from traceforensics.analysis.context import prepare
from traceforensics.analysis.idle.streams import stream_idle
from traceforensics.ingest import load_path
from traceforensics.model.session import TraceMeta, TraceSession

TRACES = [
    "kineto/resnet50_v100_workers0.pt.trace.json.gz",
    "hta/ddp_nccl_a100_rank0.json.gz",
    "nsys/NVIDIA__Fuser__report1.sqlite",
]


def _plain(session: TraceSession) -> list[tuple[int, ...]]:
    """(rank, device, stream, window start, window, busy, idle, gaps, host wait) per stream with
    work of non-zero length, in (device, unsigned stream) order."""
    ctx = prepare(session)
    ops: dict[tuple[int, int, int], list[tuple[int, int, int, int]]] = defaultdict(list)
    cols = ("rank", "device", "stream", "start_ns", "end_ns", "launch_start_ns", "l_thr")
    for rank, device, stream, s, e, ls, thr in ctx.work.select(cols).rows():
        launched_at = ls if thr is not None else None
        ops[(rank, device, stream if stream is not None else -1)].append((s, e, launched_at, 0))
    dev_order = {d: g for g, d in enumerate(ctx.devices)}
    out = []
    for key in sorted(ops, key=lambda k: (dev_order[(k[0], k[1])], k[2] & 0xFFFFFFFF)):
        rows = ops[key]  # in the context's row order: by start, then end, then event id
        merged = plain_union([(s, e) for s, e, _, _ in rows])
        if not merged:
            continue
        holes = [(a[1], b[0]) for a, b in pairwise(merged)]
        host_wait = 0
        for gs, ge in holes:
            ending = next(r for r in rows if r[0] >= ge)
            if ending[2] is not None and ending[2] > gs:
                host_wait += ge - gs
        idle = sum(ge - gs for gs, ge in holes)
        busy = sum(e - s for s, e in merged)
        first, last = merged[0][0], merged[-1][1]
        out.append((*key, first, last - first, busy, idle, len(holes), host_wait))
    return out


def _tool(session: TraceSession) -> list[tuple[int, ...]]:
    return [
        (
            s.rank,
            s.device,
            s.stream,
            s.window_start_ns,
            s.window_ns,
            s.busy_ns,
            s.idle_ns,
            s.n_gaps,
            s.host_wait_ns,
        )
        for s in stream_idle(prepare(session))
        if s.queued_wait_ns == s.idle_ns - s.host_wait_ns
    ]


@pytest.mark.parametrize("rel", TRACES)
def test_stream_idle_matches_plain_python_on_real_traces(rel: str) -> None:
    session = load_path(str(shared_trace(rel)))
    want = _plain(session)
    assert want  # every one of these traces has GPU work
    assert _tool(session) == want


def test_stream_idle_devices_and_zero_length_streams() -> None:
    """Two devices, several streams each; a stream whose only op has zero length has no window
    and is left out (never a window starting at int64 max)."""
    rows = [
        # event_id, kind, start, dur, device, stream, correlation, tid
        (1, "cuda_api", 0, 5, None, None, 1, 7),
        (2, "kernel", 10, 10, 0, 3, 1, None),
        (3, "cuda_api", 30, 5, None, None, 2, 7),
        (4, "kernel", 40, 10, 0, 3, 2, None),  # launched at 30 > gap start 20: host wait
        (5, "kernel", 12, 30, 0, 5, None, None),
        (6, "kernel", 60, 5, 0, 5, None, None),
        (7, "kernel", 70, 0, 0, 9, None, None),  # zero-length only: no stream record
        (8, "kernel", 5, 20, 1, 3, None, None),
        (9, "kernel", 100, 20, 1, 3, None, None),
    ]
    frame = pl.DataFrame(
        rows,
        schema=["event_id", "kind", "start_ns", "dur_ns", "device", "stream", "correlation", "tid"],
        orient="row",
    ).with_columns(
        pl.lit(0).alias("rank"),
        pl.lit(1).alias("pid"),
        pl.when(pl.col("kind") == "cuda_api")
        .then(pl.lit("cudaLaunchKernel"))
        .otherwise(pl.format("k{}", "event_id"))
        .alias("name"),
    )
    session = TraceSession.from_frames(frame, TraceMeta(source_format="test"))
    got = _tool(session)
    assert got == _plain(session)
    assert [(d, s) for _, d, s, *_ in got] == [(0, 3), (0, 5), (1, 3)]
    assert got[0][-1] == 20  # the gap [20, 40) on stream 3 waited for the host
