"""Short kernels worth fusing, with the time fusing them gives back and a remedy.

Short kernels (GPU duration < ``short_kernel_us``, default 10 µs) are grouped by
(rank, device, normalized kernel name, launching op). Per kernel ``k`` on its device::

    GPU:   ...work][ gap_k  ][k]          prev_end = latest end of any earlier GPU work
    host:        [launch call k]           launch-bound when the call ends after prev_end
                 <- host_k ->              host_k = launching op host time / kernels it launched

- ``idle_between_ns`` = sum of gap_k (device idle right before each kernel).
- ``host_launch_ns`` = sum of host_k (launch API + framework dispatch per kernel: the
  launching framework op's (``ns::name``) host time / number of kernels it launched, at least
  the API time; the launch API time alone under an annotation / user NVTX range or none).
- overhead = the device's median gap before kernels that were already queued (its own per-
  kernel launch latency, measured, not assumed; the device's first kernel has no gap).
- ``recoverable_ns`` = sum of min(gap_k, host_k + overhead) for launch-bound kernels and
  min(gap_k, overhead) for queued ones: the idle that fusing the kernels or replaying them as
  a CUDA graph removes. Kernel run time itself is not counted (conservative).

Remedy, from the row's facts, first rule that fits:
1. launched under an optimizer step (``Optimizer.step#...``) or by ``_foreach_``/multi-tensor
   kernels -> foreach / fused optimizer (under ``Optimizer.zero_grad``: set_to_none=True);
2. at least half launch-bound and host cost >= GPU time -> CUDA graphs;
3. GEMM kernels -> larger batch (the GEMM is too small to fill the chip);
4. otherwise -> torch.compile / fusion.
"""

from __future__ import annotations

import re
from typing import Any

import numpy as np
import polars as pl

from traceforensics.analysis.context import AnalysisContext
from traceforensics.analysis.engines import Engine, engine_for
from traceforensics.analysis.findings.remedies import short_kernel_remedy
from traceforensics.analysis.kernels.frame import outermost_flagged
from traceforensics.analysis.kernels.results import ShortKernelRow
from traceforensics.analysis.names import OPTIMIZER_RE, matching
from traceforensics.analysis.program import Program
from traceforensics.model.units import I64, NS_PER_US, Mask

# "cutlass" alone is not enough: many non-GEMM kernels carry cutlass types in template args
GEMM_KERNEL_RE = r"(?i)gemm|nvjet|xmma|Cijk_|cublas"
FOREACH_RE = r"_foreach_|multi_tensor_apply"


def idle_before(ctx: AnalysisContext) -> tuple[I64, Mask]:
    """Per GPU op of ``ctx.work`` (its row order): ``prev_end_ns``, the latest end of the GPU
    ops of its device sorted before it by (start, event id), and whether it has one (a
    device's first op has none). Among ops starting together the earlier-recorded one takes
    the gap, so one gap is never counted twice. Columnar per device (``ctx.work`` holds each
    device's ops as one slice, ``dev_lo``/``dev_hi``)."""
    start, end = ctx.ops.start, ctx.ops.end
    ids = ctx.work.get_column("event_id").to_numpy()
    prev = np.zeros(start.size, dtype=np.int64)
    has = np.zeros(start.size, dtype=bool)
    for lo, hi in zip(ctx.dev_lo.tolist(), ctx.dev_hi.tolist(), strict=True):
        order = lo + np.lexsort((ids[lo:hi], start[lo:hi]))
        prev[order[1:]] = np.maximum.accumulate(end[order])[:-1]
        has[order[1:]] = True
    return prev, has


def short_kernel_rows(ctx: AnalysisContext, kern: pl.DataFrame, pos: I64) -> list[ShortKernelRow]:
    """Short-kernel groups of the kernel frame (``rank, device, op_id, start_ns, dur_ns,
    norm_name, launching_op``; ``pos``: the kernels' rows in ``ctx.work``), most recoverable
    first (all rows; the caller keeps the top ones).

    The per-kernel figures are integers summed per group, so on many kernels they are computed
    and summed by the streaming engine, a batch at a time (``engines``; in any order: integer
    sums do not depend on it); only the context, the first one in kernel order, is taken in
    order."""
    keys = ["rank", "device", "norm_name", "launching_op"]
    optimizer = optimizer_ops(ctx)
    k = _kernels(ctx, kern, pos, optimizer)
    engine = engine_for(kern.height)
    short = pl.col("dur_ns") < round(ctx.options.kernels.short_kernel_us * NS_PER_US)
    sums = (
        k.filter(short)
        .with_columns(_host_ns(ctx, k, engine))
        .join(_overheads(k, engine).lazy(), on=["rank", "device"], how="left")
        .with_columns(_recoverable_ns())
        .group_by(keys)
        .agg(
            pl.len().alias("count"),
            pl.col("dur_ns").sum().alias("total_ns"),
            pl.col("recoverable_ns").sum().alias("recoverable_ns"),
            pl.col("host_ns").sum().alias("host_launch_ns"),
            pl.col("gap_ns").sum().alias("idle_between_ns"),
            pl.col("launch_bound").sum().alias("launch_bound_count"),
        )
        .collect(engine=engine)
    )
    names = optimizer.select(pl.col("event_id").alias("_ctx"), pl.col("name").alias("context"))
    contexts = (
        k.filter(short & pl.col("_ctx").is_not_null())
        .group_by(keys)
        .agg(pl.col("_ctx").first())
        # names after the grouping: a few rows, not one per kernel
        .join(names.lazy(), on="_ctx", how="left")
        .drop("_ctx")
        .collect(engine="in-memory")
    )
    busy_union = pl.DataFrame(
        {
            "rank": [r for r, _ in ctx.devices],
            "device": [d for _, d in ctx.devices],
            "busy_ns": ctx.busy.busy_ns,
        },
        schema={"rank": pl.Int32, "device": pl.Int32, "busy_ns": pl.Int64},
    )
    groups = (
        sums.join(contexts, on=keys, how="left")
        .join(busy_union, on=["rank", "device"], how="left")
        .with_columns(pl.col("norm_name", "launching_op").cast(pl.String))
        # full key: group_by order is arbitrary, ties must not reorder rows between runs
        .sort(
            ["recoverable_ns", "total_ns", *keys],
            descending=[True, True, False, False, False, False],
        )
    )
    return [_row(g, ctx.program) for g in groups.iter_rows(named=True)]


def optimizer_ops(ctx: AnalysisContext) -> pl.DataFrame:
    """``event_id, name`` of the host ops whose name says optimizer (``OPTIMIZER_RE``): the
    contexts kernels can run under."""
    tree = ctx.tree
    return (
        tree.lazy()
        .filter(matching(tree, OPTIMIZER_RE))
        .select("event_id", "name")
        .collect(engine="in-memory")
    )


def _kernels(
    ctx: AnalysisContext, kern: pl.DataFrame, pos: I64, optimizer: pl.DataFrame
) -> pl.LazyFrame:
    """Every kernel with ``gap_ns`` (idle before it), ``launch_bound`` (its launch call ended
    after the device's previous work), ``api_dur_ns`` and ``_ctx``, the optimizer op it ran
    under (``_launch_figures``)."""
    gap, has_prev, launch_bound, api_dur = _launch_figures(ctx, pos)
    optim_ids = optimizer.get_column("event_id")
    # no optimizer op: one typed null, not a null per kernel (8 bytes each)
    in_optimizer = (
        outermost_flagged(ctx, kern.get_column("op_id"), optim_ids, "_ctx")
        if optim_ids.len()
        else None
    )
    frame = kern.select("rank", "device", "op_id", "dur_ns", "norm_name", "launching_op").hstack(
        [
            pl.Series("_has_prev", has_prev),
            *([] if in_optimizer is None else [in_optimizer]),
            api_dur,
            pl.Series("launch_bound", launch_bound),
            pl.Series("gap_ns", gap),
        ]
    )
    if in_optimizer is None:
        frame = frame.with_columns(pl.lit(None, dtype=pl.Int64).alias("_ctx"))
    return frame.lazy()


def _launch_figures(ctx: AnalysisContext, pos: I64) -> tuple[I64, Mask, Mask, pl.Series]:
    """Per kernel at ``pos`` (rows of ``ctx.work``): ``gap_ns``, the idle before it (0 for a
    device's first op); whether it has a previous op; ``launch_bound``: its launch call ended
    after the device's previous work; ``api_dur_ns`` (null without a launch call). Computed
    here rather than from columns of their inputs (the previous end and the launch call's
    start and end: 25 bytes per kernel instead of 18 while the short kernels are summed)."""
    prev_all, has_all = idle_before(ctx)
    prev, has_prev = prev_all[pos], has_all[pos]
    del prev_all, has_all
    # one array per figure, worked in place (each temporary is 8 bytes per kernel)
    gap = ctx.ops.start[pos]
    gap -= prev
    np.maximum(gap, 0, out=gap)
    gap[~has_prev] = 0
    end = ctx.ops.launch_end[pos]
    called = ctx.work.get_column("launch_start_ns").is_not_null().to_numpy()[pos]
    launch_bound = has_prev & called & (end > prev)
    del prev
    end -= ctx.ops.launch_start[pos]
    api_dur = pl.Series("api_dur_ns", end).scatter(np.flatnonzero(~called), None)
    return gap, has_prev, launch_bound, api_dur


def _overheads(k: pl.LazyFrame, engine: Engine) -> pl.DataFrame:
    """``rank, device, overhead_ns``: each device's median gap before kernels that were
    already queued (not launch-bound, not the device's first)."""
    return (
        k.filter(~pl.col("launch_bound") & pl.col("_has_prev"))
        .group_by(["rank", "device"])
        .agg(pl.col("gap_ns").median().fill_null(0).cast(pl.Int64).alias("overhead_ns"))
        .collect(engine=engine)
    )


def _host_ns(ctx: AnalysisContext, k: pl.LazyFrame, engine: Engine) -> pl.Expr:
    """A kernel's launch cost: its framework op's host time / the kernels that op launched
    (all kernels, short or not), at least the API time; the API time alone otherwise."""
    tree = ctx.tree
    # dispatch share only for framework ops (``ns::op``): an annotation or a user NVTX range (a
    # whole step, a region) encloses far more than the launch; there the cost is the API alone
    framework = (
        tree.lazy()
        .filter((pl.col("kind") == "cpu_op") & matching(tree, "::", literal=True))
        .select(
            pl.col("event_id").alias("op_id"),
            (pl.col("end_ns") - pl.col("start_ns")).alias("_op_dur"),
        )
        .collect(engine=engine_for(tree.height))
    )
    share = (
        k.select("op_id")
        .filter(pl.col("op_id").is_in(framework.get_column("op_id").implode()))
        .group_by("op_id")
        .agg(pl.len().alias("_n"))
        .join(framework.lazy(), on="op_id")
        .select("op_id", (pl.col("_op_dur") // pl.col("_n")).alias("_share"))
        .collect(engine=engine)
    )
    per_op = pl.col("op_id").replace_strict(
        share.get_column("op_id"), share.get_column("_share"), default=None
    )
    return (
        pl.when(per_op.is_not_null())
        .then(pl.max_horizontal(per_op, pl.col("api_dur_ns")))
        .otherwise(pl.col("api_dur_ns"))
        .fill_null(0)
        .alias("host_ns")
    )


def _recoverable_ns() -> pl.Expr:
    """min(gap, host + overhead) for a launch-bound kernel, min(gap, overhead) otherwise (no
    overhead measured on the device: 0)."""
    overhead = pl.col("overhead_ns").fill_null(0)
    return (
        pl.when(pl.col("launch_bound"))
        .then(pl.min_horizontal("gap_ns", pl.col("host_ns") + overhead))
        .otherwise(pl.min_horizontal("gap_ns", overhead))
        .alias("recoverable_ns")
    )


def _row(g: dict[str, Any], program: Program) -> ShortKernelRow:
    code = _remedy(g)
    return ShortKernelRow(
        name=g["norm_name"],
        launching_op=g["launching_op"],
        count=int(g["count"]),
        total_ns=int(g["total_ns"]),
        mean_ns=int(g["total_ns"] // g["count"]),
        recoverable_ns=int(g["recoverable_ns"]),
        remedy=short_kernel_remedy(code, program),
        remedy_code=code,
        rank=int(g["rank"]),
        device=int(g["device"]),
        share_of_busy=(g["total_ns"] / g["busy_ns"]) if g["busy_ns"] else None,
        host_launch_ns=int(g["host_launch_ns"]),
        idle_between_ns=int(g["idle_between_ns"]),
        launch_bound_count=int(g["launch_bound_count"]),
        context=g["context"],
    )


def _remedy(g: dict[str, object]) -> str:
    name, op = str(g["norm_name"]), str(g["launching_op"])
    count = int(g["count"])  # type: ignore[call-overload]
    ctx = str(g["context"] or "")
    if "zero_grad" in ctx:
        return "zero_grad"
    if ctx or re.search(FOREACH_RE, name) or re.search(FOREACH_RE, op):
        return "fused_optimizer"
    lb = int(g["launch_bound_count"])  # type: ignore[call-overload]
    host, gpu = int(g["host_launch_ns"]), int(g["total_ns"])  # type: ignore[call-overload]
    if 2 * lb >= count and host >= gpu:
        return "cuda_graphs"
    if re.search(GEMM_KERNEL_RE, name):
        return "larger_batch"
    return "fusion"
