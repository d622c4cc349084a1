"""A diff as polars DataFrames (``Diff.frames()``), for notebooks: filter, join, plot.

Tables: ``figures`` (one row per scope — ``job`` or one (rank, device) — and figure: before,
after, delta, ``delta_pct``, unit, basis, noise verdict), ``findings`` (one row per finding
category and device: before/after ``recoverable``, the change), ``kernels`` (the kernels whose
total time changed most). Schemas are fixed, so an empty table still has its columns. Values
keep the figure's unit (``unit`` column: ``ns``, ``ns/step`` or ``fraction``).
"""

from __future__ import annotations

from typing import Any

import polars as pl

from traceforensics.compare.changes import FindingChange, KernelChange
from traceforensics.compare.deltas import DeviceDiff, FigureDelta

_DELTA_SCHEMA: dict[str, Any] = {
    "unit": pl.String,
    "basis": pl.String,
    "before": pl.Float64,
    "after": pl.Float64,
    "delta": pl.Float64,
    "delta_pct": pl.Float64,
}
_FIGURE_SCHEMA: dict[str, Any] = {
    "scope": pl.String,
    "rank": pl.Int64,
    "device": pl.Int64,
    "figure": pl.String,
    **_DELTA_SCHEMA,
    "share_before": pl.Float64,
    "share_after": pl.Float64,
    "within_noise": pl.Boolean,
}
_FINDING_SCHEMA: dict[str, Any] = {
    "category": pl.String,
    "rank": pl.Int64,
    "device": pl.Int64,
    "change": pl.String,
    **_DELTA_SCHEMA,
}
_KERNEL_SCHEMA: dict[str, Any] = {
    "name": pl.String,
    "rank": pl.Int64,
    "device": pl.Int64,
    **_DELTA_SCHEMA,
    "count_before": pl.Int64,
    "count_after": pl.Int64,
}


def _delta_cells(d: FigureDelta) -> dict[str, Any]:
    return {
        "unit": d.unit,
        "basis": d.basis,
        "before": d.before,
        "after": d.after,
        "delta": d.delta,
        "delta_pct": d.delta_pct,
    }


def _figure_rows(dd: DeviceDiff) -> list[dict[str, Any]]:
    scope = "job" if dd.rank is None else "device"
    return [
        {
            "scope": scope,
            "rank": dd.rank,
            "device": dd.device,
            "figure": name,
            **_delta_cells(d),
            "share_before": d.share_before,
            "share_after": d.share_after,
            "within_noise": d.within_noise,
        }
        for name, d in dd.figures.items()
    ]


def diff_frames(
    job: DeviceDiff,
    devices: list[DeviceDiff],
    finding_changes: list[FindingChange],
    kernel_changes: list[KernelChange],
) -> dict[str, pl.DataFrame]:
    """The tables of a diff (module doc; ``Diff.frames``)."""
    figures = [r for dd in (job, *devices) for r in _figure_rows(dd)]
    findings = [
        {"category": f.category, "rank": f.rank, "device": f.device, "change": f.change,
         **_delta_cells(f.recoverable)}
        for f in finding_changes
    ]  # fmt: skip
    kernels = [
        {"name": k.name, "rank": k.rank, "device": k.device, **_delta_cells(k.total),
         "count_before": k.count_before, "count_after": k.count_after}
        for k in kernel_changes
    ]  # fmt: skip
    return {
        "figures": pl.DataFrame(figures, schema=_FIGURE_SCHEMA, orient="row"),
        "findings": pl.DataFrame(findings, schema=_FINDING_SCHEMA, orient="row"),
        "kernels": pl.DataFrame(kernels, schema=_KERNEL_SCHEMA, orient="row"),
    }
