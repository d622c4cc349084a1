"""Kernel forensics pass: short kernels worth fusing (``short``), FLOPs charged to ops
(``throughput``), achieved TFLOPS, roofline and MFU per op, family, device and step (``rows``),
impossible or guessed-peak figures flagged (``suspect``).

Reads from the context: the GPU ops with their launch links (one linker for every pass), the host
op tree, the busy unions and the step table (so ``mfu.steps`` describes the same windows as
``steps[]``).

Memory (millions of kernels): the kernel columns are gathered once from the context
(``frame``); FLOPs figures exist for the charged kernels only, op columns are joined per op
instance, and only ``kflops``/``ideal_ns`` are spread over every kernel for MFU (null columns,
holding no memory, when no kernel has FLOPs); columns are let go as soon as no part needs
them (2M kernels: +0.69 GB -> ~+0.2 GB above the pass's start, same results).
"""

from __future__ import annotations

from concurrent.futures import ThreadPoolExecutor
from dataclasses import replace

import polars as pl

from traceforensics.analysis.context import AnalysisContext, as_context, side_by_side
from traceforensics.analysis.engines import engine_for
from traceforensics.analysis.kernels.frame import (
    kernel_frame,
    kernel_links,
    kernel_positions,
    normalize_kernel_name,
    outermost_flagged,
)
from traceforensics.analysis.kernels.results import KernelAnalysis, UnknownFlops
from traceforensics.analysis.kernels.rows import family_rows, instances, mfu_rows, op_rows
from traceforensics.analysis.kernels.short import short_kernel_rows
from traceforensics.analysis.kernels.suspect import flag_suspects
from traceforensics.analysis.kernels.throughput import charge_flops, ideal_ns, math_dtype, op_costs
from traceforensics.analysis.options import AnalysisOptions
from traceforensics.analysis.peaks import DevicePeak, resolve_peaks, unknown_peak
from traceforensics.model.memory import release_free_memory
from traceforensics.model.session import TraceSession

__all__ = ["analyze_kernels", "kernel_links", "normalize_kernel_name"]


def analyze_kernels(
    source: AnalysisContext | TraceSession, options: AnalysisOptions | None = None
) -> KernelAnalysis:
    """Short kernels, op throughput, families, MFU per device and per step. Called on a
    session it prepares the context itself (same result as ``analyze``'s kernel part)."""
    ctx = as_context(source, options)
    opts = ctx.options.kernels
    # the FLOPs model (op costs: mostly Python over distinct shapes) runs beside the short
    # kernel rows, which need only the launch links and names
    with ThreadPoolExecutor(max_workers=1) as pool:
        costs_f = pool.submit(op_costs, ctx.cpu_ops, ctx.args, ctx.tree)
        if not side_by_side(ctx.session.events.height):
            costs_f.result()  # one working set at a time on a big table
        pos = kernel_positions(ctx)
        kl = kernel_frame(ctx, pos)
        short = short_kernel_rows(ctx, kl, pos)
        del pos
        # the idle-before arrays (numpy, glibc heap) are garbage now; polars never reuses it
        release_free_memory()
        peaks = device_peaks(ctx.session, kl, opts.peak_tflops)
        costs = costs_f.result()
    known = costs.get_column("op_id").filter(costs.get_column("flops").is_not_null())
    flops_op_id = outermost_flagged(ctx, kl.get_column("op_id"), known, "flops_op_id")
    unknown = _unknown(kl, flops_op_id)
    charged, charged_ops = charge_flops(kl, flops_op_id, costs)
    del flops_op_id
    charged = ideal_ns(math_dtype(charged, charged_ops, peaks), peaks)
    keep = opts.rows_kept
    inst = instances(charged, charged_ops)
    ops, families = op_rows(inst, peaks)[:keep], family_rows(inst, peaks)
    del inst, charged_ops
    # MFU reads four kernel columns: the names and op ids are let go first
    kern = kl.select("rank", "device", "start_ns", "dur_ns").hstack(
        [_spread(charged, c, kl.height) for c in ("kflops", "ideal_ns")]
    )
    del kl, charged
    by_device = mfu_rows(kern, peaks, device_windows(ctx))
    by_step = mfu_rows(kern, peaks, step_windows(ctx))
    # impossible or guessed-peak figures stay as computed, flagged with the reason
    flag_suspects(ops, families, [*by_device, *by_step], peaks)
    return KernelAnalysis(
        short_kernels=short[:keep],
        ops=ops,
        families=families,
        mfu_by_device=by_device,
        mfu_by_step=by_step,
        unknown_flops_kernels=unknown,
        short_kernel_us=opts.short_kernel_us,
        short_kernel_count=int(sum(r.count for r in short)),
        short_kernel_ns=int(sum(r.total_ns for r in short)),
        kernel_count=kern.height,
        peaks=[p.to_json() for p in peaks.values()],
    )


def _spread(charged: pl.DataFrame, column: str, n: int) -> pl.Series:
    """``column`` of the charged kernels over all ``n`` kernels (null where not charged),
    written into a null column: no memory for kernels without FLOPs."""
    values = charged.get_column(column)
    null = pl.Series(column, dtype=values.dtype).extend_constant(None, n)
    return null.scatter(charged.get_column("row"), values) if values.len() else null


def device_windows(ctx: AnalysisContext) -> pl.DataFrame:
    """``rank, device, w0, w1``: each device's GPU-active span (first to last busy instant)."""
    return pl.DataFrame(
        {
            "rank": [r for r, _ in ctx.devices],
            "device": [d for _, d in ctx.devices],
            "w0": ctx.busy.span_lo,
            "w1": ctx.busy.span_hi,
        },
        schema={"rank": pl.Int32, "device": pl.Int32, "w0": pl.Int64, "w1": pl.Int64},
    )


def step_windows(ctx: AnalysisContext) -> pl.DataFrame:
    """``rank, device, step, s0, s1``: the context's step table (device-side windows, ns), so
    ``mfu.steps`` and ``steps[]`` describe the same windows."""
    return ctx.steps.select(
        "rank",
        "device",
        pl.col("number").alias("step"),
        pl.col("start_ns").alias("s0"),
        pl.col("end_ns").alias("s1"),
    ).cast({"rank": pl.Int32, "device": pl.Int32, "step": pl.Int64})


def device_peaks(
    session: TraceSession, kl: pl.DataFrame, override: float | None
) -> dict[tuple[int, int], DevicePeak]:
    """Peak per (rank, device). A device the trace does not describe (or describes without a
    name; ROCm kernels can carry a device index that differs from deviceProperties ids) takes
    the model of the other GPUs of its rank when they all agree (nodes are homogeneous), with
    ``how = "same_node"``; otherwise it is unknown."""
    peaks = resolve_peaks(session.meta.devices, override)
    # a set: on many kernels counted by the streaming engine (``engines``; the in-memory one
    # holds ~85 MB at 2M kernels)
    devices = kl.lazy().select("rank", "device").unique().drop_nulls()
    engine = engine_for(kl.height)
    for rank, device in devices.collect(engine=engine).sort("rank", "device").iter_rows():
        if (rank, device) not in peaks:
            peaks[(rank, device)] = unknown_peak(rank, device, override)
    for key, peak in list(peaks.items()):
        if peak.how != "unknown":
            continue
        models = {p.sku: p for (r, _), p in peaks.items() if r == key[0] and p.sku is not None}
        if len(models) == 1:
            (same,) = models.values()
            peaks[key] = replace(same, device=key[1], how="same_node")
    return peaks


#: Rows of ``unknown_flops_kernels.top``.
UNKNOWN_TOP = 10


def _unknown(kern: pl.DataFrame, flops_op_id: pl.Series) -> UnknownFlops:
    """The kernels charged to no op with FLOPs: count, time, share, top 10 by time."""
    unk = kern.lazy().select("launching_op", "norm_name", "dur_ns").filter(flops_op_id.is_null())
    total = int(kern.get_column("dur_ns").sum() or 0)
    count, ns = unk.select(pl.len(), pl.col("dur_ns").sum()).collect(engine="in-memory").row(0)
    top = (
        unk.group_by(["launching_op", "norm_name"])
        .agg(pl.len().alias("count"), pl.col("dur_ns").sum().alias("kernel_ns"))
        .with_columns(pl.col("launching_op", "norm_name").cast(pl.String))
        .sort(["kernel_ns", "launching_op", "norm_name"], descending=[True, False, False])
        .rename({"norm_name": "name"})
        .collect(engine="in-memory")
    )
    ns = int(ns or 0)
    groups = top.to_dicts()
    return UnknownFlops(
        count=int(count),
        kernel_ns=ns,
        share_of_kernel_ns=ns / total if total else None,
        top=groups[:UNKNOWN_TOP],
        groups=groups,
    )
