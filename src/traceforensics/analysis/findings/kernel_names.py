"""Findings a kernel's name alone proves, no shapes needed: FP32 GEMMs/convolutions that leave the
tensor cores idle, and memory-layout conversions.

Per device, over its kernels inside the window (names classified once per distinct name by
``tensor_cores``):

- ``fp32_matmul``: GEMM/convolution kernels whose name says FP32 without tensor cores
  (``ampere_sgemm_*``, ``volta_scudnn_*``, ``implicit_convolve_sgemm``, ``cutlass_*_simt_sgemm``,
  Tensile ``Cijk_*_SB_*``...) on a GPU that has tensor (matrix) cores
  (``facts.ChipFacts``; an unknown GPU gets no finding). Recoverable, conservatively:
  ``kernel_ns * (1 - 1 / TENSOR_CORE_SPEEDUP)``: the same GEMMs at twice the speed, where the
  datasheet ratio of tensor-core to FP32 rates is 8-16x (A100: TF32 156 vs FP32 19.5 TFLOPS)
  and measured TF32/bf16 speed-ups of real GEMMs are 2-6x. Confidence ``medium``.
- ``layout_conversion``: cuDNN ``nchwToNhwc``/``nhwcToNchw`` and MIOpen transpose kernels: a
  convolution library converting each layer's NCHW tensor to the NHWC layout its kernels use
  and back. ``channels_last`` removes the conversions between layers:
  ``recoverable = kernel_ns * LAYOUT_RECOVERED_SHARE`` (those at the model's input/output
  stay; a few of many). Confidence ``medium``.

Kernel time is the sum of the kernels' durations (concurrent kernels on other streams count
each; the finding is capped at the window like every other).
"""

from __future__ import annotations

from typing import Final

import polars as pl

from traceforensics.analysis.context import AnalysisContext
from traceforensics.analysis.devices import DeviceRecord
from traceforensics.analysis.findings.busy_losses import EVIDENCE_KEPT, window_kernels, window_share
from traceforensics.analysis.findings.remedies import remedy
from traceforensics.analysis.findings.results import FP32_MATMUL, LAYOUT_CONVERSION, Finding
from traceforensics.analysis.idle.results import Evidence
from traceforensics.analysis.program import Program
from traceforensics.analysis.tensor_cores import name_classes
from traceforensics.model.units import fmt_ns, fmt_pct

#: Speed-up assumed for FP32 GEMMs moved to tensor cores (conservative; module docstring).
TENSOR_CORE_SPEEDUP: Final = 2.0
#: Share of the layout-conversion kernel time channels_last removes.
LAYOUT_RECOVERED_SHARE: Final = 0.9


def _kernels(ctx: AnalysisContext, rec: DeviceRecord) -> pl.DataFrame:
    """``name`` (text), ``start_ns``, ``dur_ns``, ``matmul_dtype``, ``layout`` of the device's
    kernels inside its window that are GEMM/conv or layout kernels."""
    k = window_kernels(ctx, rec).select(
        "name", "start_ns", (pl.col("end_ns") - pl.col("start_ns")).alias("dur_ns")
    )
    # classified once per distinct name; only the matching rows are cast to text
    names = k.get_column("name").unique().drop_nulls()
    classes = name_classes(names).filter(pl.col("matmul_dtype").is_not_null() | pl.col("layout"))
    hits = names.filter(names.cast(pl.String).is_in(classes.get_column("name").implode()))
    return (
        k.filter(pl.col("name").is_in(hits.implode()))
        .with_columns(pl.col("name").cast(pl.String))
        .join(classes, on="name", how="inner")
    )


def _by_name(rows: pl.DataFrame) -> pl.DataFrame:
    """``name``, ``first_ns``, ``count``, ``kernel_ns`` per kernel name, most time first."""
    return (
        rows.group_by("name")
        .agg(
            pl.col("start_ns").min().alias("first_ns"),
            pl.len().alias("count"),
            pl.col("dur_ns").sum().alias("kernel_ns"),
        )
        .sort(["kernel_ns", "name"], descending=[True, False])
    )


def _evidence(category: str, per_name: pl.DataFrame, busy_ns: int, what: str) -> list[Evidence]:
    return [
        Evidence(
            category,
            "kernel",
            name,
            int(first),
            int(ns),
            None,
            f"{what}: x{count} in the window, {fmt_pct(ns / busy_ns if busy_ns else 0.0)} of "
            "busy time",
        )
        for name, first, count, ns in per_name.head(EVIDENCE_KEPT).iter_rows()
    ]


def kernel_name_findings(
    ctx: AnalysisContext, rec: DeviceRecord, program: Program
) -> list[Finding]:
    """The device's ``fp32_matmul`` and ``layout_conversion`` findings (module docstring)."""
    rows = _kernels(ctx, rec)
    if rows.height == 0:
        return []
    out: list[Finding] = []
    chip = program.facts.chip
    fp32 = _by_name(rows.filter(pl.col("matmul_dtype") == "fp32"))
    if fp32.height and chip.known and chip.tensor_cores:
        ns = int(fp32.get_column("kernel_ns").sum())
        gain = int(ns * (1.0 - 1.0 / TENSOR_CORE_SPEEDUP))
        busy = ns / rec.busy_ns if rec.busy_ns else 0.0
        cores = "matrix cores" if chip.vendor == "amd" else "tensor cores"
        title = (
            f"FP32 GEMMs/convolutions without {cores}: {fmt_ns(ns)} ({fmt_pct(busy)} of busy "
            f"time) in {int(fp32.get_column('count').sum())} kernels; about {fmt_ns(gain)} "
            f"recoverable at {TENSOR_CORE_SPEEDUP:g}x"
        )
        figures = {"kernel_ns": ns, "share_of_busy": round(busy, 6)}
        figures["speedup"] = TENSOR_CORE_SPEEDUP
        evidence = _evidence(FP32_MATMUL, fp32, rec.busy_ns, f"FP32, no {cores}")
        share = window_share(gain, rec)
        out.append(
            Finding(
                FP32_MATMUL,
                rec.rank,
                rec.device,
                gain,
                share,
                title,
                remedy(FP32_MATMUL, program),
                "medium",
                evidence,
                figures,
            )
        )
    layout = _by_name(rows.filter(pl.col("layout")))
    if layout.height:
        ns = int(layout.get_column("kernel_ns").sum())
        gain = int(ns * LAYOUT_RECOVERED_SHARE)
        busy = ns / rec.busy_ns if rec.busy_ns else 0.0
        title = (
            f"memory-layout conversions (NCHW<->NHWC transposes): {fmt_ns(ns)} ({fmt_pct(busy)} "
            f"of busy time) in {int(layout.get_column('count').sum())} kernels"
        )
        evidence = _evidence(LAYOUT_CONVERSION, layout, rec.busy_ns, "layout conversion")
        out.append(
            Finding(
                LAYOUT_CONVERSION,
                rec.rank,
                rec.device,
                gain,
                window_share(gain, rec),
                title,
                remedy(LAYOUT_CONVERSION, program),
                "medium",
                evidence,
                {"kernel_ns": ns, "share_of_busy": round(busy, 6)},
            )
        )
    return out


__all__ = ["LAYOUT_RECOVERED_SHARE", "TENSOR_CORE_SPEEDUP", "kernel_name_findings"]
