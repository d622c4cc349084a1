"""Kernel forensics pass: short kernels worth fusing (``short``), FLOPs charged to ops
(``throughput``), achieved TFLOPS, roofline and MFU per op, family, device and step (``rows``),
impossible or guessed-peak figures flagged (``suspect``).

Reads from the context: the GPU ops with their launch links (one linker for every pass), the host
op tree, the busy unions and the step table (so ``mfu.steps`` describes the same windows as
``steps[]``).
"""

from __future__ import annotations

import re
from concurrent.futures import ThreadPoolExecutor
from dataclasses import replace

import polars as pl

from traceforensics.analysis.context import AnalysisContext, as_context, side_by_side
from traceforensics.analysis.kernels.peaks import DevicePeak, resolve_peaks, unknown_peak
from traceforensics.analysis.kernels.results import KernelAnalysis, UnknownFlops
from traceforensics.analysis.kernels.rows import family_rows, mfu_rows, op_rows
from traceforensics.analysis.kernels.short import short_kernel_rows
from traceforensics.analysis.kernels.suspect import flag_suspects
from traceforensics.analysis.kernels.throughput import charge_flops, ideal_ns, math_dtype, op_costs
from traceforensics.analysis.options import AnalysisOptions
from traceforensics.analysis.optree import ancestors_pick
from traceforensics.model.session import TraceSession


def normalize_kernel_name(name: str) -> str:
    """Drop the ``void`` return type, the parameter list and anonymous namespaces."""
    s = re.sub(r"^void\s+", "", name.strip())
    if s.endswith(")"):
        depth = 0
        for i in range(len(s) - 1, -1, -1):
            depth += s[i] == ")"
            depth -= s[i] == "("
            if depth == 0:
                s = s[:i].rstrip() or s
                break
    s = re.sub(r"\s+", " ", s.replace("(anonymous namespace)::", ""))
    return s if len(s) <= 200 else s[:199] + "…"


def analyze_kernels(
    source: AnalysisContext | TraceSession, options: AnalysisOptions | None = None
) -> KernelAnalysis:
    """Short kernels, op throughput, families, MFU per device and per step. Called on a
    session it prepares the context itself (same result as ``analyze``'s kernel part)."""
    ctx = as_context(source, options)
    opts = ctx.options.kernels
    tree = ctx.tree
    # the FLOPs model (op costs: mostly Python over distinct shapes) runs beside the short
    # kernel rows, which need only the launch links and names
    with ThreadPoolExecutor(max_workers=1) as pool:
        costs_f = pool.submit(op_costs, ctx.cpu_ops, ctx.args, tree)
        if not side_by_side(ctx.session.events.height):
            costs_f.result()  # one working set at a time on a big table
        names = tree.select(pl.col("event_id").alias("op_id"), pl.col("name").alias("launching_op"))
        kl = _with_norm_names(
            kernel_links(ctx)
            .join(names, on="op_id", how="left", maintain_order="left")
            .with_columns(pl.col("launching_op").fill_null("(no launching op)"))
        )
        short = short_kernel_rows(ctx, kl)
        peaks = device_peaks(ctx.session, kl, opts.peak_tflops)
        costs = costs_f.result()
    known = costs.filter(pl.col("flops").is_not_null()).get_column("op_id")
    charged = ancestors_pick(ctx.tree_index, kl.get_column("op_id"), known)
    kern = ideal_ns(math_dtype(charge_flops(kl, pl.Series(charged), costs), peaks), peaks)
    keep = opts.rows_kept
    ops, families = op_rows(kern, peaks)[:keep], family_rows(kern, peaks)
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
        unknown_flops_kernels=_unknown(kern),
        short_kernel_us=opts.short_kernel_us,
        short_kernel_count=int(sum(r.count for r in short)),
        short_kernel_ns=int(sum(r.total_ns for r in short)),
        kernel_count=kern.height,
        peaks=[p.to_json() for p in peaks.values()],
    )


def kernel_links(ctx: AnalysisContext) -> pl.DataFrame:
    """One row per kernel from the context's linked GPU ops: ``kernel_id, rank, device,
    stream, start_ns, dur_ns, kname, api_id, api_start_ns, api_dur_ns, op_id``."""
    return (
        ctx.work.filter(pl.col("kind") == "kernel")
        .select(
            pl.col("event_id").alias("kernel_id"),
            "rank",
            "device",
            "stream",
            "start_ns",
            "dur_ns",
            pl.col("name").alias("kname"),
            "api_id",
            pl.col("launch_start_ns").alias("api_start_ns"),
            (pl.col("launch_end_ns") - pl.col("launch_start_ns")).alias("api_dur_ns"),
            "op_id",
        )
        .sort("kernel_id")
    )


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
    for rank, device in kl.select("rank", "device").unique().drop_nulls().iter_rows():
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


def _with_norm_names(kern: pl.DataFrame) -> pl.DataFrame:
    uniq = kern.get_column("kname").unique().to_list()
    mapping = pl.DataFrame(
        {"kname": uniq, "norm_name": [normalize_kernel_name(n or "") for n in uniq]},
        schema={"kname": kern.schema["kname"], "norm_name": pl.String},
    )
    return kern.join(mapping, on="kname", how="left")


def _unknown(kern: pl.DataFrame) -> UnknownFlops:
    unk = kern.filter(pl.col("flops_op_id").is_null())
    total = int(kern.get_column("dur_ns").sum() or 0)
    ns = int(unk.get_column("dur_ns").sum() or 0)
    top = (
        unk.group_by(["launching_op", "norm_name"])
        .agg(pl.len().alias("count"), pl.col("dur_ns").sum().alias("kernel_ns"))
        .sort(["kernel_ns", "launching_op", "norm_name"], descending=[True, False, False])
        .head(10)
        .rename({"norm_name": "name"})
    )
    return UnknownFlops(
        count=unk.height,
        kernel_ns=ns,
        share_of_kernel_ns=ns / total if total else None,
        top=top.to_dicts(),
    )
