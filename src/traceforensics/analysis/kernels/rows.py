"""Report rows from attributed kernels: per op, per op family, MFU per device and per step.

Inputs are built by ``kernels.analyze_kernels``: the charged kernels and their ops
(``throughput.charge_flops`` + ``math_dtype`` + ``ideal_ns``: one row per kernel charged to an
op with FLOPs, ``flops_op_id``, ``kflops``, ``peak_dtype``, ``ideal_ns``; op columns in the op
table) for the op and family rows, and every kernel with its ``kflops`` and ``ideal_ns`` (null
when unknown) for MFU. See ``throughput`` for the attribution and MFU rules.
"""

from __future__ import annotations

from typing import Any, Final

import polars as pl

from traceforensics.analysis.kernels.results import FamilyRow, MfuRow, OpRow
from traceforensics.analysis.kernels.throughput import roofline
from traceforensics.analysis.peaks import DevicePeak

#: One integer per (rank, device) (both Int32, so it is one-to-one): an as-of join by one
#: integer column holds a fraction of the memory two take (~60 MB less at 2M kernels).
DEVICE_KEY: Final = (pl.col("rank").cast(pl.Int64) * 2**32 + pl.col("device")).alias("_dev")


def instances(charged: pl.DataFrame, ops: pl.DataFrame) -> pl.DataFrame:
    """One row per charged op instance (its FLOPs once, its kernels' time summed), from the
    charged kernels and their ops (``throughput.charge_flops``, ``math_dtype``): the op's
    columns are joined after the grouping, not carried per kernel."""
    inst = charged.group_by("flops_op_id").agg(
        pl.col("peak_dtype").first().cast(pl.String),
        pl.col("rank").first(),
        # the device that ran most of the op's kernel time
        pl.col("device").sort_by("dur_ns", descending=True).first(),
        pl.col("dur_ns").sum().alias("kernel_ns"),
        pl.len().alias("kernel_count"),
    )
    cols = ops.select("flops_op_id", "op", "shapes", "dtype", "family", "flops", "bytes")
    return inst.join(cols, on="flops_op_id", how="left", maintain_order="left")


def op_rows(inst: pl.DataFrame, peaks: dict[tuple[int, int], DevicePeak]) -> list[OpRow]:
    """(op, shapes, dtype, rank, device) groups of the op ``instances``, largest kernel time
    first."""
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


def family_rows(inst: pl.DataFrame, peaks: dict[tuple[int, int], DevicePeak]) -> list[FamilyRow]:
    """One row per (family, rank, device) of the op ``instances``; the dtype peak is that of
    the family's main dtype."""
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

    ``kern``: every kernel in kernel order, ``rank, device, start_ns, dur_ns, kflops,
    ideal_ns`` (the float sums follow that order, so the figures do not move between runs).
    """
    # keys (rank, device[, step]) and this list stay as they are: polars sums the floats along
    # another path (other rounding) when either changes, e.g. one integer key
    sums = (
        pl.col("kflops").sum().alias("flops"),
        pl.col("ideal_ns").sum().alias("ideal"),
        pl.col("kflops").is_not_null().sum().alias("_nflops"),
        pl.col("dur_ns").sum().alias("kernel_ns"),
        pl.col("dur_ns").filter(pl.col("kflops").is_not_null()).sum().alias("known_ns"),
    )
    if "step" not in windows.columns:
        keys = ["rank", "device"]
        agg = kern.select(*keys, "dur_ns", "kflops", "ideal_ns").group_by(keys).agg(*sums)
        rows = agg.join(windows, on=keys, how="left")
    elif windows.height == 0:
        return []
    else:
        keys = ["rank", "device", "step"]
        win = windows.sort("s0").with_row_index("_w")
        # the window is the whole step, idle included: idle inside it (data loading, syncs)
        # must lower the step's MFU
        rows = (
            _in_step_windows(kern, win)
            .group_by(keys)
            .agg(*sums, pl.col("_w").first())
            .join(win.select("_w", pl.col("s0").alias("w0"), pl.col("s1").alias("w1")), on="_w")
        )
    per_step = "step" in keys
    return [
        _mfu_row(g, peaks[(g["rank"], g["device"])], per_step)
        for g in rows.sort(keys).iter_rows(named=True)
    ]


def _in_step_windows(kern: pl.DataFrame, win: pl.DataFrame) -> pl.DataFrame:
    """The kernels that started inside a step window (``[s0, s1)`` of the latest window of
    their device starting at or before them), in start order: ``rank, device, dur_ns,
    kflops, ideal_ns``, the window's ``step`` and its row ``_w`` in ``win`` (the step
    windows sorted by ``s0``, with that row index). The start order and the windows are
    found on the start times alone; the kernel columns are then gathered once, for the
    kernels kept."""
    s1, step = pl.lit(win.get_column("s1")), pl.lit(win.get_column("step"))
    inside = (
        kern.select(DEVICE_KEY, "start_ns")
        .with_row_index("_row")
        .sort("start_ns")
        .join_asof(
            win.select(DEVICE_KEY, "s0", "_w"),
            left_on="start_ns",
            right_on="s0",
            by="_dev",
            strategy="backward",
            check_sortedness=False,
        )
        .filter(
            pl.col("_w").is_not_null()
            & step.gather(pl.col("_w")).is_not_null()
            & (pl.col("start_ns") < s1.gather(pl.col("_w")))
        )
        .select("_row", "_w")
    )
    rows = inside.get_column("_row")
    return pl.DataFrame(
        [
            _gather(kern.get_column(c), rows)
            for c in ("rank", "device", "dur_ns", "kflops", "ideal_ns")
        ]
    ).with_columns(inside.get_column("_w"), step.gather(inside.get_column("_w")).alias("step"))


def _gather(column: pl.Series, rows: pl.Series) -> pl.Series:
    """``column`` at ``rows``; a column without values (no kernel with FLOPs) stays a null
    column, which holds no memory."""
    if column.null_count() == column.len():
        return pl.Series(column.name, dtype=column.dtype).extend_constant(None, rows.len())
    return column.gather(rows)


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
