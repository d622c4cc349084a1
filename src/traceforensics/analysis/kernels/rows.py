"""Report rows from attributed kernels: per op, per op family, MFU per device and per step.

Input is the kernel frame built by ``kernels.analyze_kernels`` (``throughput.attribute`` +
``throughput.ideal_ns``): one row per kernel with ``flops_op_id``, op columns, ``kflops``,
``kbytes`` and ``ideal_ns``. See ``throughput`` for the attribution and MFU rules.
"""

from __future__ import annotations

from typing import Any

import polars as pl

from traceforensics.analysis.kernels.peaks import DevicePeak
from traceforensics.analysis.kernels.results import FamilyRow, MfuRow, OpRow
from traceforensics.analysis.kernels.throughput import roofline


def _instances(kern: pl.DataFrame) -> pl.DataFrame:
    """One row per charged op instance (its FLOPs once, its kernels' time summed)."""
    return (
        kern.filter(pl.col("flops_op_id").is_not_null())
        .group_by("flops_op_id")
        .agg(
            pl.col("op").first(),
            pl.col("shapes").first(),
            pl.col("dtype").first(),
            pl.col("peak_dtype").first(),
            pl.col("family").first(),
            pl.col("flops").first(),
            pl.col("bytes").first(),
            pl.col("rank").first(),
            # the device that ran most of the op's kernel time
            pl.col("device").sort_by("dur_ns", descending=True).first(),
            pl.col("dur_ns").sum().alias("kernel_ns"),
            pl.len().alias("kernel_count"),
        )
    )


def op_rows(kern: pl.DataFrame, peaks: dict[tuple[int, int], DevicePeak]) -> list[OpRow]:
    """(op, shapes, dtype, rank, device) groups, largest kernel time first."""
    inst = _instances(kern)
    groups = (
        inst.group_by(
            ["op", "shapes", "dtype", "peak_dtype", "family", "rank", "device"],
            maintain_order=True,
        )
        .agg(
            pl.len().alias("count"),
            pl.col("flops").sum(),
            pl.col("bytes").sum(),
            pl.col("bytes").null_count().alias("_bytes_nulls"),
            pl.col("kernel_ns").sum(),
            pl.col("kernel_count").sum(),
        )
        # full key: instance order is arbitrary (group_by), ties must not reorder rows
        .sort(
            ["kernel_ns", "op", "shapes", "dtype", "peak_dtype", "rank", "device"],
            descending=[True, False, False, False, False, False, False],
        )
    )
    out: list[OpRow] = []
    for g in groups.iter_rows(named=True):
        peak = peaks[(g["rank"], g["device"])]
        nbytes = None if g["_bytes_nulls"] else g["bytes"]
        rl = roofline(g["flops"], nbytes, g["kernel_ns"], peak, g["peak_dtype"])
        out.append(
            OpRow(
                op=g["op"],
                shapes=g["shapes"],
                dtype=g["dtype"],
                peak_dtype=g["peak_dtype"],
                flops=int(g["flops"]),
                bytes=nbytes,
                kernel_ns=int(g["kernel_ns"]),
                tflops=_f(rl["tflops"]),
                peak_tflops=_f(rl["peak_tflops"]),
                mfu=_f(rl["mfu"]),
                bound=_s(rl["bound"]),
                family=g["family"],
                count=int(g["count"]),
                kernel_count=int(g["kernel_count"]),
                membw_share=_f(rl["membw_share"]),
                arithmetic_intensity=_f(rl["arithmetic_intensity"]),
                rank=int(g["rank"]),
                device=int(g["device"]),
            )
        )
    return out


def family_rows(kern: pl.DataFrame, peaks: dict[tuple[int, int], DevicePeak]) -> list[FamilyRow]:
    """One row per (family, rank, device); the dtype peak is that of the family's main dtype."""
    inst = _instances(kern)
    groups = (
        inst.group_by(["family", "rank", "device"])
        .agg(
            pl.col("flops").sum(),
            pl.col("bytes").sum(),
            pl.col("kernel_ns").sum(),
            pl.len().alias("op_count"),
            pl.col("peak_dtype").sort_by("flops", descending=True).first().alias("dtype"),
        )
        .sort(["kernel_ns", "family", "rank", "device"], descending=[True, False, False, False])
    )
    out: list[FamilyRow] = []
    for g in groups.iter_rows(named=True):
        peak = peaks[(g["rank"], g["device"])]
        rl = roofline(g["flops"], g["bytes"] or None, g["kernel_ns"], peak, g["dtype"])
        out.append(
            FamilyRow(
                family=g["family"],
                rank=int(g["rank"]),
                device=int(g["device"]),
                flops=int(g["flops"]),
                bytes=int(g["bytes"]) if g["bytes"] else None,
                kernel_ns=int(g["kernel_ns"]),
                tflops=_f(rl["tflops"]),
                peak_tflops=_f(rl["peak_tflops"]),
                mfu=_f(rl["mfu"]),
                membw_share=_f(rl["membw_share"]),
                bound=_s(rl["bound"]),
                op_count=int(g["op_count"]),
            )
        )
    return out


def mfu_rows(
    kern: pl.DataFrame, peaks: dict[tuple[int, int], DevicePeak], windows: pl.DataFrame
) -> list[MfuRow]:
    """MFU per device over its GPU-active window (``windows``: ``rank, device, w0, w1``), or
    per (device, step) when ``windows`` holds step windows (``rank, device, step, s0, s1``):
    the FLOPs of the kernels that started on the GPU inside ``[s0, s1)`` over ``s1 - s0``::

        GPU:   |== step 1 ==|.. idle ..|=k=|=k=|== step 2 ==|
        step 2 window:      [s0 ................................ s1)
        MFU(step 2) = ideal time of step 2's kernels at peak / (s1 - s0)
    """
    if "step" not in windows.columns:
        keys = ["rank", "device"]
        k, win = kern.with_columns(pl.lit(None, dtype=pl.Int64).alias("step")), windows
    elif windows.height == 0:
        return []
    else:
        keys = ["rank", "device", "step"]
        k, win = _in_step_windows(kern, windows)
    agg = k.group_by(keys).agg(
        pl.col("kflops").sum().alias("flops"),
        pl.col("ideal_ns").sum().alias("ideal"),
        pl.col("kflops").is_not_null().sum().alias("_nflops"),
        pl.col("dur_ns").sum().alias("kernel_ns"),
        pl.col("dur_ns").filter(pl.col("kflops").is_not_null()).sum().alias("known_ns"),
    )
    rows = agg.join(win, on=keys, how="left").sort(keys)
    per_step = "step" in keys
    return [
        _mfu_row(g, peaks[(g["rank"], g["device"])], per_step) for g in rows.iter_rows(named=True)
    ]


def _in_step_windows(
    kern: pl.DataFrame, windows: pl.DataFrame
) -> tuple[pl.DataFrame, pl.DataFrame]:
    """Kernels with the step window they started in (``step, s0, s1``; kernels outside every
    window dropped), and each (rank, device, step)'s window ``w0, w1``."""
    k = (
        kern.sort("start_ns")
        .join_asof(
            windows.sort("s0"),
            left_on="start_ns",
            right_on="s0",
            by=["rank", "device"],
            strategy="backward",
            check_sortedness=False,
        )
        .filter(pl.col("step").is_not_null() & (pl.col("start_ns") < pl.col("s1")))
    )
    # the window is the whole step, idle included: idle inside it (data loading, syncs)
    # must lower the step's MFU
    win = k.group_by("rank", "device", "step").agg(
        pl.col("s0").first().alias("w0"), pl.col("s1").first().alias("w1")
    )
    return k, win


def _mfu_row(g: dict[str, Any], peak: DevicePeak, per_step: bool) -> MfuRow:
    """One ``MfuRow`` from a group's sums: ``flops``, ``ideal`` (ns at peak), kernel ns."""
    window = int(g["w1"] - g["w0"]) if g["w0"] is not None else 0
    flops = float(g["flops"] or 0.0)
    # ideal time only where the kernel's dtype has a peak; null-peak FLOPs make MFU unknown
    peak_known = bool(g["_nflops"] > 0 and g["ideal"] and g["ideal"] > 0)
    return MfuRow(
        rank=int(g["rank"]),
        device=int(g["device"]),
        step=int(g["step"]) if per_step else None,
        window_start_ns=int(g["w0"] or 0),
        window_ns=window,
        flops=round(flops),
        tflops=flops / window / 1e3 if window > 0 and g["_nflops"] > 0 else None,
        peak_tflops=flops / g["ideal"] / 1e3 if peak_known else None,
        mfu=g["ideal"] / window if peak_known and window > 0 else None,
        kernel_ns=int(g["kernel_ns"]),
        flops_known_kernel_ns=int(g["known_ns"] or 0),
        device_name=peak.device_name,
        peak_source=peak.source,
        peak_how=peak.how,
    )


def _f(v: float | str | None) -> float | None:
    return None if v is None or isinstance(v, str) else float(v)


def _s(v: float | str | None) -> str | None:
    return v if isinstance(v, str) else None
