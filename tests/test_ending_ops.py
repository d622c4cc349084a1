"""``windows.ending_ops`` (the op that ends a gap, and the last launched op before it) against a
plain-Python scan of the context's GPU ops, on real traces with several devices and streams."""

from __future__ import annotations

import numpy as np
import polars as pl
import pytest

from tests.conftest import shared_trace
from traceforensics.analysis.context import prepare
from traceforensics.analysis.idle.windows import ending_ops, last_linked
from traceforensics.ingest import load_path
from traceforensics.model.session import TraceMeta, TraceSession

TRACES = ["hta/ddp_nccl_a100_rank0.json.gz", "nsys/NVIDIA__Fuser__report1.sqlite"]


def _several_devices() -> TraceSession:
    """Three devices, two streams each; two of every three ops launched from one of two threads
    (the rest have no launch call)."""
    rng = np.random.default_rng(11)
    rows = []
    for i in range(600):
        s = int(rng.integers(0, 50_000))
        dev, corr = i % 3, i + 1 if i % 3 != 2 else None
        rows.append((2 * i, "kernel", f"k{i % 7}", s, 40, dev, 7 + i % 2, corr, None))
        if corr is not None:
            rows.append(
                (2 * i + 1, "cuda_api", "cudaLaunchKernel", s - 30, 8, None, None, corr, 1 + i % 2)
            )
    frame = pl.DataFrame(
        rows,
        schema=[
            "event_id",
            "kind",
            "name",
            "start_ns",
            "dur_ns",
            "device",
            "stream",
            "correlation",
            "tid",
        ],
        orient="row",
    ).with_columns(pl.lit(0).alias("rank"), pl.lit(3).alias("pid"))
    return TraceSession.from_frames(frame, TraceMeta(source_format="test"))


@pytest.mark.parametrize("rel", [*TRACES, "<several devices>"])
def test_ending_ops_match_a_plain_scan(rel: str) -> None:
    session = _several_devices() if rel.startswith("<") else load_path(str(shared_trace(rel)))
    ctx = prepare(session)
    o = ctx.ops
    rng = np.random.default_rng(5)
    checked = 0
    for g in range(len(ctx.devices)):
        lo, hi = int(ctx.dev_lo[g]), int(ctx.dev_hi[g])
        if hi == lo:
            continue
        starts = o.start[lo:hi].tolist()
        # times at op starts, just around them, and beyond both ends
        t = np.concatenate(
            [
                o.start[lo:hi][rng.integers(0, hi - lo, 60)] + rng.integers(-2, 3, 60),
                [starts[0] - 1, starts[-1] + 1],
            ]
        ).astype(np.int64)
        dev = np.full(t.size, g, dtype=np.int64)
        after = ending_ops(ctx, dev, t)
        before = ending_ops(ctx, dev, t, before=True)
        shared = ending_ops(ctx, dev, t, before=True, linked=last_linked(ctx))
        for k, tk in enumerate(t.tolist()):
            first = next((lo + i for i, s in enumerate(starts) if s >= tk), -1)
            last = max(
                (lo + i for i, s in enumerate(starts) if s < tk and o.thr[lo + i] >= 0),
                default=-1,
            )
            assert after[k] == first
            assert before[k] == shared[k] == last
            checked += 1
    assert checked > 0
    if rel.startswith("<"):
        assert len(ctx.devices) == 3 and (o.thr < 0).any() and (o.thr >= 0).any()
