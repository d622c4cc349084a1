"""Achieved throughput: FLOPs per op spread over the GPU time of the kernels it launched.

Attribution rule. Each kernel is walked up its launching op's ancestors (``launches``) and is
charged to the **outermost op whose FLOPs are known** (``flops.op_cost``). That op's FLOPs are
counted once and spread over all kernels charged to it, pro rata to their duration::

    host:  [aten::linear  (2MKN, known)..................]
              [aten::addmm (known, nested: not counted again)]
    GPU:          [gemm 80 us][splitK reduce 20 us]
    -> linear: flops F over kernel_ns 100 us; gemm gets 0.8 F, reduce 0.2 F

Kernels with no FLOPs-known ancestor are "unknown FLOPs": counted and reported, never guessed.

Units: FLOPs are counts, times integer ns, TFLOPS = flops / ns / 1e3, bandwidth bytes/s.
Roofline: an op is ``compute``-bound when its arithmetic intensity (flops / bytes) is at or
above the device ridge point (peak FLOP/s / peak bytes/s), else ``memory``-bound.
MFU of a window = sum over kernels of (kernel FLOPs / peak of its dtype) / window length, i.e.
the fraction of the window an ideal chip would need; with one dtype it is achieved / peak.
"""

from __future__ import annotations

import json
from typing import Final

import numpy as np
import polars as pl

from traceforensics.analysis.context import ANALYSIS_ARG_KEYS
from traceforensics.analysis.kernels.conv_links import (
    fill_conv_from_sequence,
    fill_wgrad_from_parent,
)
from traceforensics.analysis.kernels.flops import family_of, op_cost_from_args, parse_json_list
from traceforensics.analysis.kernels.op_args import OpArgs, call_groups, category_codes
from traceforensics.analysis.peaks import DevicePeak
from traceforensics.model.schema import ARG_CONCRETE_INPUTS, ARG_INPUT_DIMS, ARG_INPUT_TYPE

#: The only args any FLOPs rule reads (conv links need Sequence numbers and dims too): the ones
#: the context loads.
FLOP_ARG_KEYS: Final = ANALYSIS_ARG_KEYS


def op_costs(
    cpu: pl.DataFrame, args: pl.DataFrame, tree: pl.DataFrame | None = None
) -> pl.DataFrame:
    """Per host op with a FLOPs model: ``op_id, op, family, shapes, dtype, flops, bytes``, by
    ``op_id``. ``cpu``: the cpu_op rows (``event_id, rank, name``); ``args``: the args side table
    (rows of other keys than ``FLOP_ARG_KEYS`` are ignored). An op with none of the shape keys
    (``Input Dims``, ``Input type``, ``Concrete Inputs``) is left out; ``flops`` is null when
    the op's shapes do not determine it. Old-PyTorch convolutions get their missing shapes from
    linked ops (``conv_links``; the parent link needs ``tree``)."""
    names = cpu.get_column("name").unique().drop_nulls()
    modelled = names.filter(
        pl.Series(
            [family_of(n) is not None for n in names.cast(pl.String).to_list()], dtype=pl.Boolean
        )
    )
    ops = cpu.filter(pl.col("name").is_in(modelled.implode()))
    lookup = OpArgs(args, FLOP_ARG_KEYS)
    op_id = np.asarray(ops.get_column("event_id").to_numpy(), dtype=np.int64)
    rows = [lookup.rows(k, op_id) for k in _SHAPE_KEYS]
    has = np.logical_or.reduce([r >= 0 for r in rows]) if op_id.size else np.zeros(0, bool)
    op_id, rows = op_id[has], [r[has] for r in rows]
    op = ops.get_column("name").filter(pl.Series(has)).cast(pl.String)
    # training loops repeat the same calls: each distinct (op, dims, types, concrete inputs)
    # is evaluated once (its JSON parsed once) and the result spread over its instances
    first, inverse = call_groups([category_codes(op), *(lookup.value_codes(r) for r in rows)])
    texts = [lookup.texts(r[first]) for r in rows]
    recs: list[tuple[object, ...]] = []
    for name, dims, types, conc in zip(op.gather(first).to_list(), *texts, strict=True):
        cost = op_cost_from_args(name, dims, types, conc)
        recs.append((cost.family, _tensor_shapes(dims), cost.dtype, cost.flops, cost.bytes))
    per_call = pl.DataFrame(recs, schema=_COST_COLUMNS, orient="row")
    costs = pl.DataFrame({"op_id": op_id, "op": op}).hstack(
        per_call.select(pl.all().gather(inverse)).get_columns()
    )
    if op_id.size > 1 and bool((np.diff(op_id) < 0).any()):
        costs = costs.sort("op_id")
    costs = fill_conv_from_sequence(cpu, lookup, costs)
    if tree is not None:
        costs = fill_wgrad_from_parent(tree, lookup, costs)
    return costs


_SHAPE_KEYS: Final = (ARG_INPUT_DIMS, ARG_INPUT_TYPE, ARG_CONCRETE_INPUTS)
_COST_COLUMNS: Final = {
    "family": pl.String,
    "shapes": pl.String,
    "dtype": pl.String,
    "flops": pl.Int64,
    "bytes": pl.Int64,
}


def _tensor_shapes(dims_json: str | None) -> str:
    """Compact JSON of the non-empty input dims, e.g. ``[[141,512],[512,512]]``."""
    return json.dumps([d for d in parse_json_list(dims_json) if d], separators=(",", ""))


def charge_flops(
    kern: pl.DataFrame, flops_op_id: pl.Series, costs: pl.DataFrame
) -> tuple[pl.DataFrame, pl.DataFrame]:
    """The kernels charged to an op with FLOPs, and those ops.

    ``kern``: the kernel frame (``rank, device, dur_ns, kname``, kernel order);
    ``flops_op_id``: per kernel the op it is charged to (null = unknown FLOPs); ``costs``:
    ``op_costs``. Returns ``(charged, ops)``:

    - ``ops``: one row per op some kernel is charged to (its FLOPs are known),
      ``flops_op_id, op, family, shapes, dtype, flops, bytes``. An op whose dtype the trace
      does not record (nsys ``emit_nvtx`` text carries shapes, not types) takes the dtype its
      kernels' names spell (``kernel_dtype``), the first one found among them in kernel
      order.
    - ``charged``: the charged kernels only, in kernel order: ``row`` (position in ``kern``),
      ``flops_op_id, rank, device, dur_ns``, ``op_kernel_ns`` (the op's kernel time) and
      float ``kflops`` (the kernel's pro-rata share of the op's FLOPs). Op columns are not
      repeated per kernel: join ``ops`` after grouping.
    """
    charged = (
        kern.lazy()
        .select(
            pl.int_range(pl.len(), dtype=pl.UInt32).alias("row"),
            flops_op_id.alias("flops_op_id"),
            "rank",
            "device",
            "dur_ns",
            "kname",
        )
        .filter(pl.col("flops_op_id").is_not_null())
        .collect(engine="in-memory")
    )
    ops = (
        costs.lazy()
        .rename({"op_id": "flops_op_id"})
        .filter(pl.col("flops_op_id").is_in(charged.get_column("flops_op_id").unique().implode()))
        .collect(engine="in-memory")
    )
    if ops.filter(pl.col("dtype").is_null()).height:
        # the name rule runs once per distinct kernel name, not per kernel
        names = charged.select(pl.col("kname").unique())
        names = names.with_columns(kernel_dtype(pl.col("kname")).cast(pl.Categorical).alias("_kd"))
        by_name = (
            charged.select("flops_op_id", "kname")
            .join(names, on="kname", how="left", maintain_order="left")
            .group_by("flops_op_id")
            .agg(pl.col("_kd").drop_nulls().first().cast(pl.String))
        )
        ops = (
            ops.join(by_name, on="flops_op_id", how="left", maintain_order="left")
            .with_columns(pl.coalesce("dtype", "_kd").alias("dtype"))
            .drop("_kd")
        )
    share = (
        pl.when(pl.col("op_kernel_ns") > 0)
        .then(pl.col("dur_ns") / pl.col("op_kernel_ns"))
        .otherwise(None)
    )
    flops = charged.select("flops_op_id").join(
        ops.select("flops_op_id", "flops"), on="flops_op_id", how="left", maintain_order="left"
    )
    charged = (
        charged.drop("kname")
        .with_columns(pl.col("dur_ns").sum().over("flops_op_id").alias("op_kernel_ns"))
        .with_columns((flops.get_column("flops").cast(pl.Float64) * share).alias("kflops"))
    )
    return charged, ops


def kernel_dtype(name: pl.Expr) -> pl.Expr:
    """The math dtype a kernel's name spells (cuBLAS/CUTLASS/cuDNN/rocBLAS style tokens):
    ``bf16``, ``fp8`` (e4m3/e5m2), ``fp16`` (f16, half, h884-style), ``fp32`` (sgemm, f32 only
    after the others); null when the name says nothing."""
    n = name.cast(pl.String).str.to_lowercase()
    return (
        pl.when(n.str.contains("bf16"))
        .then(pl.lit("bf16"))
        .when(n.str.contains("e4m3|e5m2|fp8"))
        .then(pl.lit("fp8"))
        .when(n.str.contains(r"fp16|f16|half|h\d{3,4}gemm|_hgemm"))
        .then(pl.lit("fp16"))
        .when(n.str.contains(r"sgemm|fp32|f32"))
        .then(pl.lit("fp32"))
        .otherwise(pl.lit(None, dtype=pl.String))
    )


def roofline(
    flops: float | None, nbytes: float | None, kernel_ns: int, peak: DevicePeak, dtype: str | None
) -> dict[str, float | str | None]:
    """tflops, peak_tflops, mfu, membw_share, arithmetic_intensity, ridge, bound of one row."""
    tflops = flops / kernel_ns / 1e3 if flops is not None and kernel_ns > 0 else None
    peak_tf = peak.peak_tflops(dtype)
    mfu = tflops / peak_tf if tflops is not None and peak_tf else None
    bw = peak.mem_bw_bytes_per_s
    membw = (
        nbytes / (kernel_ns * 1e-9) / bw if nbytes is not None and kernel_ns > 0 and bw else None
    )
    ai = flops / nbytes if flops is not None and nbytes else None
    ridge = peak_tf * 1e12 / bw if peak_tf and bw else None
    bound: str | None = None
    if ai is not None and ridge is not None:
        bound = "compute" if ai >= ridge else "memory"
    return {
        "tflops": tflops,
        "peak_tflops": peak_tf,
        "mfu": mfu,
        "membw_share": membw,
        "arithmetic_intensity": ai,
        "ridge_flops_per_byte": ridge,
        "bound": bound,
    }


def math_dtype(
    charged: pl.DataFrame, ops: pl.DataFrame, peaks: dict[tuple[int, int], DevicePeak]
) -> pl.DataFrame:
    """Adds ``peak_dtype`` (categorical) to the charged kernels: the dtype whose peak their
    op is measured against.

    It is the op dtype, except for ``float`` (fp32) GEMMs and convolutions on GPUs with TF32
    tensor cores, which PyTorch may run as TF32:

    - convolutions: TF32 (``torch.backends.cudnn.allow_tf32`` defaults to True);
    - GEMMs: TF32 only when the trace proves it - some fp32 GEMM on that device ran faster than
      the FP32 peak allows (``allow_tf32`` for matmul defaults to False since PyTorch 1.12).
    """
    has_tf32 = [
        (r, d) for (r, d), p in peaks.items() if p.how != "override" and p.tflops.get("tf32")
    ]
    fp32_peak = {(r, d): p.peak_tflops("fp32") for (r, d), p in peaks.items()}
    fp32 = ops.filter(pl.col("dtype") == "fp32")
    gemm = fp32.filter(pl.col("family") == "gemm").select("flops_op_id", "flops")
    inst = (
        charged.join(gemm, on="flops_op_id", how="inner", maintain_order="left")
        .group_by("flops_op_id")
        .agg(
            pl.col("rank").first(),
            pl.col("device").first(),
            pl.col("flops").first(),
            pl.col("dur_ns").sum().alias("_ns"),
        )
    )
    proven = {
        (r, d)
        for r, d, f, ns in inst.select("rank", "device", "flops", "_ns").iter_rows()
        if (r, d) in has_tf32 and ns > 0 and f / ns / 1e3 > (fp32_peak.get((r, d)) or 1e30)
    }

    def on(keys: list[tuple[int, int]]) -> pl.Expr:
        expr = pl.lit(False)
        for r, d in keys:
            expr = expr | ((pl.col("rank") == r) & (pl.col("device") == d))
        return expr

    conv_ids = fp32.filter(pl.col("family") == "conv").get_column("flops_op_id")
    tf32 = (pl.col("flops_op_id").is_in(conv_ids.implode()) & on(has_tf32)) | (
        pl.col("flops_op_id").is_in(gemm.get_column("flops_op_id").implode()) & on(sorted(proven))
    )
    dtype = (
        charged.select("flops_op_id")
        .join(
            ops.select("flops_op_id", pl.col("dtype").cast(pl.Categorical)),
            on="flops_op_id",
            how="left",
            maintain_order="left",
        )
        .get_column("dtype")
    )
    return charged.with_columns(
        pl.when(tf32)
        .then(pl.lit("tf32", dtype=pl.Categorical))
        .otherwise(dtype)
        .alias("peak_dtype")
    )


def ideal_ns(charged: pl.DataFrame, peaks: dict[tuple[int, int], DevicePeak]) -> pl.DataFrame:
    """Adds ``ideal_ns`` to the charged kernels: the time the kernel's FLOPs need at the peak
    of its ``peak_dtype`` (null when that peak is unknown)."""
    recs = [
        {"rank": r, "device": d, "peak_dtype": dt, "_peak": p.peak_tflops(dt)}
        for (r, d), p in peaks.items()
        for dt in (None, "fp64", "fp32", "tf32", "fp16", "bf16", "fp8")
    ]
    table = pl.DataFrame(
        recs,
        schema={
            "rank": pl.Int32,
            "device": pl.Int32,
            "peak_dtype": pl.Categorical,
            "_peak": pl.Float64,
        },
    )
    peak = (
        charged.select("rank", "device", "peak_dtype")
        .join(
            table,
            on=["rank", "device", "peak_dtype"],
            how="left",
            nulls_equal=True,
            maintain_order="left",
        )
        .get_column("_peak")
    )
    return charged.with_columns((pl.col("kflops") / (peak * 1e3)).alias("ideal_ns"))
