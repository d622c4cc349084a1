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

import polars as pl

from traceforensics.analysis.context import AnalysisContext
from traceforensics.analysis.findings.program import Program
from traceforensics.analysis.findings.remedies import short_kernel_remedy
from traceforensics.analysis.kernels.results import ShortKernelRow
from traceforensics.analysis.names import matching
from traceforensics.analysis.optree import ancestors_pick
from traceforensics.model.units import NS_PER_US

OPTIMIZER_RE = r"^Optimizer\.(step|zero_grad)#|^Optimizer\.|optimizer"
# "cutlass" alone is not enough: many non-GEMM kernels carry cutlass types in template args
GEMM_KERNEL_RE = r"(?i)gemm|nvjet|xmma|Cijk_|cublas"
FOREACH_RE = r"_foreach_|multi_tensor_apply"


def idle_before(ctx: AnalysisContext) -> pl.DataFrame:
    """``kernel_id, gap_ns, prev_end_ns`` for every kernel: device idle right before it.

    ``prev_end_ns`` = latest end of the GPU ops of the device sorted before it by (start,
    event id): among ops starting together the earlier-recorded one takes the gap, so one gap
    is never counted twice."""
    busy = (
        ctx.work.select("event_id", "kind", "rank", "device", "start_ns", "end_ns")
        .sort(["rank", "device", "start_ns", "event_id"])
        .with_columns(
            pl.col("end_ns").cum_max().shift(1).over(["rank", "device"]).alias("prev_end_ns")
        )
    )
    return busy.filter(pl.col("kind") == "kernel").select(
        pl.col("event_id").alias("kernel_id"),
        "prev_end_ns",
        (pl.col("start_ns") - pl.col("prev_end_ns")).clip(0).fill_null(0).alias("gap_ns"),
    )


def short_kernel_rows(ctx: AnalysisContext, kern: pl.DataFrame) -> list[ShortKernelRow]:
    """Short-kernel groups of the linked kernel frame (``kernel_id, rank, device, op_id,
    dur_ns, api_start_ns, api_dur_ns, norm_name, launching_op``), most recoverable first (all
    rows; the caller keeps the top ones)."""
    threshold_ns = round(ctx.options.kernels.short_kernel_us * NS_PER_US)
    busy_union = pl.LazyFrame(
        {
            "rank": [r for r, _ in ctx.devices],
            "device": [d for _, d in ctx.devices],
            "busy_ns": ctx.busy.busy_ns,
        },
        schema={"rank": pl.Int32, "device": pl.Int32, "busy_ns": pl.Int64},
    )
    groups = (
        _recoverable(ctx, kern)
        .filter(pl.col("dur_ns") < threshold_ns)
        .group_by(["rank", "device", "norm_name", "launching_op"])
        .agg(
            pl.len().alias("count"),
            pl.col("dur_ns").sum().alias("total_ns"),
            pl.col("recoverable_ns").sum().alias("recoverable_ns"),
            pl.col("host_ns").sum().alias("host_launch_ns"),
            pl.col("gap_ns").sum().alias("idle_between_ns"),
            pl.col("launch_bound").sum().alias("launch_bound_count"),
            pl.col("context").drop_nulls().first().alias("context"),
        )
        .join(busy_union, on=["rank", "device"], how="left")
        # full key: group_by order is arbitrary, ties must not reorder rows between runs
        .sort(
            ["recoverable_ns", "total_ns", "rank", "device", "norm_name", "launching_op"],
            descending=[True, True, False, False, False, False],
        )
        .collect(engine="in-memory")
    )
    return [_row(g, ctx.program) for g in groups.iter_rows(named=True)]


def _recoverable(ctx: AnalysisContext, kern: pl.DataFrame) -> pl.LazyFrame:
    """Per kernel: ``gap_ns`` (idle before it), ``host_ns`` (its launch cost), ``launch_bound``,
    ``recoverable_ns`` and the optimizer ``context`` it ran under (see module docstring)."""
    tree = ctx.tree
    # dispatch share only for framework ops (``ns::op``): an annotation or a user NVTX range (a
    # whole step, a region) encloses far more than the launch; there the cost is the API alone
    op_dur = tree.filter((pl.col("kind") == "cpu_op") & matching(tree, "::", literal=True)).select(
        pl.col("event_id").alias("op_id"), (pl.col("end_ns") - pl.col("start_ns")).alias("op_dur")
    )
    optim_ids = tree.filter(matching(tree, OPTIMIZER_RE)).get_column("event_id")
    ctx_id = ancestors_pick(ctx.tree_index, kern.get_column("op_id"), optim_ids)
    ctx_names = tree.select(pl.col("event_id").alias("_ctx"), pl.col("name").alias("context"))
    k = (
        kern.lazy()
        .with_columns(pl.Series("_ctx", ctx_id).replace(-1, None).cast(pl.Int64))
        .join(idle_before(ctx).lazy(), on="kernel_id", how="left")
        .join(op_dur.lazy(), on="op_id", how="left")
        .with_columns(pl.len().over("op_id").alias("_n_in_op"))
        .with_columns(
            pl.when(pl.col("op_dur").is_not_null())
            .then(pl.max_horizontal(pl.col("op_dur") // pl.col("_n_in_op"), pl.col("api_dur_ns")))
            .otherwise(pl.col("api_dur_ns"))
            .fill_null(0)
            .alias("host_ns"),
            ((pl.col("api_start_ns") + pl.col("api_dur_ns")) > pl.col("prev_end_ns"))
            .fill_null(False)
            .alias("launch_bound"),
        )
    )
    overhead = (
        k.filter(~pl.col("launch_bound") & pl.col("prev_end_ns").is_not_null())
        .group_by(["rank", "device"])
        .agg(pl.col("gap_ns").median().fill_null(0).cast(pl.Int64).alias("overhead_ns"))
    )
    return (
        k.join(overhead, on=["rank", "device"], how="left")
        .with_columns(pl.col("overhead_ns").fill_null(0))
        .with_columns(
            pl.when(pl.col("launch_bound"))
            .then(pl.min_horizontal("gap_ns", pl.col("host_ns") + pl.col("overhead_ns")))
            .otherwise(pl.min_horizontal("gap_ns", "overhead_ns"))
            .alias("recoverable_ns")
        )
        .join(ctx_names.lazy(), on="_ctx", how="left")
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
