"""Kernel forensics: short kernels worth fusing, and achieved TFLOPS / MFU per op and device.

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
from dataclasses import dataclass, replace

import polars as pl

from traceforensics.analysis.kernels.results import KernelAnalysis, ShortKernelRow, UnknownFlops
from traceforensics.analysis.links import ancestors_pick, host_tree, kernel_launches
from traceforensics.analysis.kernels.peaks import DevicePeak, resolve_peaks, unknown_peak
from traceforensics.analysis.kernels.throughput import (
    attribute,
    find_steps,
    ideal_ns,
    math_dtype,
    op_costs,
)
from traceforensics.analysis.kernels.rows import family_rows, mfu_rows, op_rows
from traceforensics.model.schema import BUSY_KINDS
from traceforensics.model.session import TraceSession

OPTIMIZER_RE = r"^Optimizer\.(step|zero_grad)#|^Optimizer\.|optimizer"
# "cutlass" alone is not enough: many non-GEMM kernels carry cutlass types in template args
GEMM_KERNEL_RE = r"(?i)gemm|nvjet|xmma|Cijk_|cublas"
FOREACH_RE = r"_foreach_|multi_tensor_apply"

REMEDIES = {
    "fused_optimizer": "foreach/fused optimizer: build the optimizer with fused=True "
    "(or foreach=True) so one kernel updates every parameter",
    "zero_grad": "foreach/fused optimizer: zero_grad(set_to_none=True) drops these fill "
    "kernels (or zero all grads in one foreach call)",
    "cuda_graphs": "CUDA graphs: launch-bound - capture the region "
    "(torch.compile mode='reduce-overhead' or torch.cuda.graphs) to replay without host launches",
    "larger_batch": "larger batch: the GEMMs are too small to fill the GPU; batch more work "
    "per call (or group the GEMMs)",
    "fusion": "torch.compile / fusion: fuse these small kernels with their neighbours",
}


@dataclass(frozen=True)
class KernelOptions:
    """``short_kernel_us``: threshold (µs); ``peak_tflops``: user peak override (TFLOPS, all
    dtypes); ``top``: rows kept in short_kernels and ops; ``steps``: explicit step windows
    (default: ``ProfilerStep#N`` ranges found in the trace)."""

    short_kernel_us: float = 10.0
    peak_tflops: float | None = None
    top: int = 20
    steps: tuple[tuple[int, int, int, int], ...] | None = None


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


def analyze_kernels(session: TraceSession, options: KernelOptions | None = None) -> KernelAnalysis:
    """Short kernels, op throughput, families, MFU per device and per step."""
    opts = options or KernelOptions()
    ev = session.events
    tree = host_tree(ev)
    kl = kernel_launches(ev, tree)
    peaks = _peaks(session, kl, opts.peak_tflops)
    costs = op_costs(ev, session.args, tree)
    known = costs.filter(pl.col("flops").is_not_null()).get_column("op_id")
    charged = ancestors_pick(tree, kl.get_column("op_id"), known)
    kern = attribute(kl, pl.Series(charged), costs)
    kern = ideal_ns(math_dtype(kern, peaks), peaks)
    names = tree.select(pl.col("event_id").alias("op_id"), pl.col("name").alias("launching_op"))
    kern = kern.join(names, on="op_id", how="left").with_columns(
        pl.col("launching_op").fill_null("(no launching op)")
    )
    kern = _with_norm_names(kern)
    steps: list[tuple[int, int, int, int]] = (
        [(int(a), int(b), int(c), int(d)) for a, b, c, d in opts.steps]
        if opts.steps is not None
        else [(s.rank, s.step, s.start_ns, s.end_ns) for s in find_steps(ev)]
    )
    short = _short_rows(ev, tree, kern, opts)
    return KernelAnalysis(
        short_kernels=short[: opts.top],
        ops=op_rows(kern, peaks)[: opts.top],
        families=family_rows(kern, peaks),
        mfu_by_device=mfu_rows(ev, kern, peaks, None),
        mfu_by_step=mfu_rows(ev, kern, peaks, steps),
        unknown_flops_kernels=_unknown(kern),
        short_kernel_us=opts.short_kernel_us,
        short_kernel_count=int(sum(r.count for r in short)),
        short_kernel_ns=int(sum(r.total_ns for r in short)),
        kernel_count=kern.height,
        peaks=[
            {
                "rank": p.rank,
                "device": p.device,
                "device_name": p.device_name,
                "sku": p.sku,
                "how": p.how,
                "tflops": p.tflops,
                "mem_bw_bytes_per_s": p.mem_bw_bytes_per_s,
                "source": p.source,
            }
            for p in peaks.values()
        ],
    )


def _peaks(
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
        schema={"kname": pl.String, "norm_name": pl.String},
    )
    return kern.join(mapping, on="kname", how="left")


def _gaps(ev: pl.DataFrame) -> pl.DataFrame:
    """``kernel_id, gap_ns, prev_end_ns`` for every kernel (idle on its device before it)."""
    busy = (
        ev.filter(pl.col("kind").is_in(list(BUSY_KINDS)))
        .select(
            "event_id",
            "kind",
            "rank",
            "device",
            "start_ns",
            (pl.col("start_ns") + pl.col("dur_ns")).alias("end_ns"),
        )
        # stable: kernels starting together keep the table order (deterministic prev_end)
        .sort(["rank", "device", "start_ns"], maintain_order=True)
        .with_columns(
            pl.col("end_ns").cum_max().shift(1).over(["rank", "device"]).alias("prev_end_ns")
        )
    )
    return busy.filter(pl.col("kind") == "kernel").select(
        pl.col("event_id").alias("kernel_id"),
        "prev_end_ns",
        (pl.col("start_ns") - pl.col("prev_end_ns")).clip(0).fill_null(0).alias("gap_ns"),
    )


def _short_rows(
    ev: pl.DataFrame, tree: pl.DataFrame, kern: pl.DataFrame, opts: KernelOptions
) -> list[ShortKernelRow]:
    threshold_ns = round(opts.short_kernel_us * 1000)
    k = kern.join(_gaps(ev), on="kernel_id", how="left")
    # dispatch share only for framework ops (``ns::op``): an annotation or a user NVTX range (a
    # whole step, a region) encloses far more than the launch; there the cost is the API alone
    op_dur = tree.filter(
        (pl.col("kind") == "cpu_op") & pl.col("name").str.contains("::", literal=True)
    ).select(
        pl.col("event_id").alias("op_id"), (pl.col("end_ns") - pl.col("start_ns")).alias("op_dur")
    )
    k = k.join(op_dur, on="op_id", how="left").with_columns(
        pl.len().over("op_id").alias("_n_in_op")
    )
    k = k.with_columns(
        pl.when(pl.col("op_dur").is_not_null())
        .then(pl.max_horizontal(pl.col("op_dur") // pl.col("_n_in_op"), pl.col("api_dur_ns")))
        .otherwise(pl.col("api_dur_ns"))
        .fill_null(0)
        .alias("host_ns"),
        ((pl.col("api_start_ns") + pl.col("api_dur_ns")) > pl.col("prev_end_ns"))
        .fill_null(False)
        .alias("launch_bound"),
    )
    overhead = (
        k.filter(~pl.col("launch_bound") & pl.col("prev_end_ns").is_not_null())
        .group_by(["rank", "device"])
        .agg(pl.col("gap_ns").median().fill_null(0).cast(pl.Int64).alias("overhead_ns"))
    )
    k = k.join(overhead, on=["rank", "device"], how="left").with_columns(
        pl.col("overhead_ns").fill_null(0)
    )
    k = k.with_columns(
        pl.when(pl.col("launch_bound"))
        .then(pl.min_horizontal("gap_ns", pl.col("host_ns") + pl.col("overhead_ns")))
        .otherwise(pl.min_horizontal("gap_ns", "overhead_ns"))
        .alias("recoverable_ns")
    )
    optim_ids = tree.filter(pl.col("name").str.contains(OPTIMIZER_RE)).get_column("event_id")
    ctx_id = ancestors_pick(tree, k.get_column("op_id"), optim_ids)
    ctx_names = tree.select(pl.col("event_id").alias("_ctx"), pl.col("name").alias("context"))
    k = k.with_columns(pl.Series("_ctx", ctx_id).replace(-1, None).cast(pl.Int64)).join(
        ctx_names, on="_ctx", how="left"
    )
    busy_union = _busy_union(ev)
    short = k.filter(pl.col("dur_ns") < threshold_ns)
    groups = (
        short.group_by(["rank", "device", "norm_name", "launching_op"])
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
    )
    rows: list[ShortKernelRow] = []
    for g in groups.iter_rows(named=True):
        code = _remedy(g)
        rows.append(
            ShortKernelRow(
                name=g["norm_name"],
                launching_op=g["launching_op"],
                count=int(g["count"]),
                total_ns=int(g["total_ns"]),
                mean_ns=int(g["total_ns"] // g["count"]),
                recoverable_ns=int(g["recoverable_ns"]),
                remedy=REMEDIES[code],
                remedy_code=code,
                rank=int(g["rank"]),
                device=int(g["device"]),
                share_of_busy=(g["total_ns"] / g["busy_ns"]) if g["busy_ns"] else None,
                host_launch_ns=int(g["host_launch_ns"]),
                idle_between_ns=int(g["idle_between_ns"]),
                launch_bound_count=int(g["launch_bound_count"]),
                context=g["context"],
            )
        )
    return rows


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


def _busy_union(ev: pl.DataFrame) -> pl.DataFrame:
    """``rank, device, busy_ns``: union of kernel/memcpy/memset time per device."""
    from traceforensics.analysis.intervals import busy_intervals, total

    recs = []
    for rank, device in (
        ev.filter(pl.col("kind").is_in(list(BUSY_KINDS)))
        .select("rank", "device")
        .unique()
        .drop_nulls()
        .iter_rows()
    ):
        s, e = busy_intervals(ev, rank, device)
        recs.append({"rank": rank, "device": device, "busy_ns": total(s, e)})
    return pl.DataFrame(recs, schema={"rank": pl.Int32, "device": pl.Int32, "busy_ns": pl.Int64})


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
