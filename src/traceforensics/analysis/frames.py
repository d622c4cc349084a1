"""Every result as a polars DataFrame (``Analysis.frames()``), for notebooks: filter, join, plot,
or ``.to_pandas()``. Column names carry units (``*_ns``); cause columns are ``idle_<cause>_ns``.

Tables: ``findings`` (the ranked findings, largest ``recoverable_ns`` first), ``transfers``
(copies by device and direction), ``devices`` (one row per device), ``gaps`` (the largest gaps
kept), ``gap_causes`` (one row per gap and cause with time), ``steps`` (one row per step
window; its time by phase in ``<phase>_gpu_ns``/``<phase>_host_ns``), ``short_kernels`` and
``ops`` (the kernel tables), ``ranks`` (one row per rank and device: step time, collective wait
and transfer, ``analysis.ranks``). Schemas are fixed, so an empty
table still has its columns.
"""

from __future__ import annotations

from dataclasses import asdict
from typing import TYPE_CHECKING, Any

import polars as pl

from traceforensics.analysis.cause_table import CAUSES, ranked_causes
from traceforensics.analysis.kernels.results import OpRow, ShortKernelRow
from traceforensics.analysis.phases import STEP_PHASES
from traceforensics.analysis.ranks.results import rank_frame
from traceforensics.model.schema import BUSY_CLASSES

if TYPE_CHECKING:
    from traceforensics.analysis.devices import DeviceRecord
    from traceforensics.analysis.findings.results import Finding
    from traceforensics.analysis.idle.gaps import IdleAnalysis
    from traceforensics.analysis.kernels.results import KernelAnalysis
    from traceforensics.analysis.ranks import RankAnalysis

_CAUSE_COLS = {f"idle_{c}_ns": pl.Int64 for c in CAUSES}
_DEVICE_SCHEMA: dict[str, Any] = {
    "rank": pl.Int64,
    "device": pl.Int64,
    "name": pl.String,
    "window_kind": pl.String,
    "window_start_ns": pl.Int64,
    "window_ns": pl.Int64,
    "busy_ns": pl.Int64,
    "idle_ns": pl.Int64,
    "busy_fraction": pl.Float64,
    **{f"busy_{k}_ns": pl.Int64 for k in BUSY_CLASSES},
    "kernel_count": pl.Int64,
    "memcpy_count": pl.Int64,
    "memset_count": pl.Int64,
    "stream_count": pl.Int64,
    "n_gaps": pl.Int64,
    "comm_ns": pl.Int64,
    "exposed_comm_ns": pl.Int64,
    "copy_ns": pl.Int64,
    "exposed_copy_ns": pl.Int64,
    "graph_count": pl.Int64,
    "mfu": pl.Float64,
    "top_cause": pl.String,
    "pattern": pl.String,
    **_CAUSE_COLS,
}
_GAP_SCHEMA: dict[str, Any] = {
    "gap": pl.Int64,
    "rank": pl.Int64,
    "device": pl.Int64,
    "start_ns": pl.Int64,
    "dur_ns": pl.Int64,
    "top_cause": pl.String,
}
_GAP_CAUSE_SCHEMA: dict[str, Any] = {
    "gap": pl.Int64,
    "rank": pl.Int64,
    "device": pl.Int64,
    "cause": pl.String,
    "ns": pl.Int64,
}
_STEP_SCHEMA: dict[str, Any] = {
    "rank": pl.Int64,
    "device": pl.Int64,
    "name": pl.String,
    "start_ns": pl.Int64,
    "dur_ns": pl.Int64,
    "busy_ns": pl.Int64,
    "idle_ns": pl.Int64,
    "comm_ns": pl.Int64,
    "exposed_comm_ns": pl.Int64,
    **_CAUSE_COLS,
    # the step's time by phase (``analysis.phases``): GPU busy ns and host ns of each
    **{f"{p}_{side}_ns": pl.Int64 for p in STEP_PHASES for side in ("gpu", "host")},
}


_FINDING_SCHEMA: dict[str, Any] = {
    "category": pl.String,
    "rank": pl.Int64,
    "device": pl.Int64,
    "recoverable_ns": pl.Int64,
    "share_of_window": pl.Float64,
    "confidence": pl.String,
    "minor": pl.Boolean,
    "title": pl.String,
    "remedy": pl.String,
}
_TRANSFER_SCHEMA: dict[str, Any] = {
    "rank": pl.Int64,
    "device": pl.Int64,
    "direction": pl.String,
    "count": pl.Int64,
    "bytes": pl.Int64,
    "time_ns": pl.Int64,
    "gbps": pl.Float64,
    "pageable_count": pl.Int64,
}


def _schema_of(row_type: type[Any]) -> dict[str, Any]:
    """Polars schema of a result dataclass from its annotations (``int | None`` -> Int64)."""
    dtypes = {"int": pl.Int64, "float": pl.Float64, "str": pl.String, "bool": pl.Boolean}
    return {
        name: dtypes.get(getattr(t, "__name__", str(t)).split(" | ")[0], pl.String)
        for name, t in row_type.__annotations__.items()
    }


def analysis_frames(
    devices: list[DeviceRecord],
    idle: IdleAnalysis,
    kernels: KernelAnalysis,
    findings: list[Finding],
    ranks: RankAnalysis | None,
) -> dict[str, pl.DataFrame]:
    """The tables of one analysis (``Analysis.frames``; see module docstring)."""
    device_rows = [
        {
            **{k: getattr(d, k) for k in _DEVICE_SCHEMA if hasattr(d, k)},
            **{f"busy_{k}_ns": d.busy_by_kind.get(k, 0) for k in BUSY_CLASSES},
            **{f"idle_{c}_ns": d.idle_by_cause.get(c, 0) for c in CAUSES},
            "pattern": d.pattern.pattern.pattern if d.pattern is not None else None,
        }
        for d in devices
    ]
    gaps, gap_causes = [], []
    for k, g in enumerate(idle.gaps):
        ranked = ranked_causes(g.causes)
        top = ranked[0][0] if ranked else None
        gaps.append(
            {
                "gap": k,
                "rank": g.rank,
                "device": g.device,
                "start_ns": g.start_ns,
                "dur_ns": g.dur_ns,
                "top_cause": top,
            }
        )
        gap_causes += [
            {"gap": k, "rank": g.rank, "device": g.device, "cause": c, "ns": ns}
            for c, ns in g.causes.items()
            if ns > 0
        ]
    steps = [
        {
            **{k: getattr(s, k) for k in _STEP_SCHEMA if hasattr(s, k)},
            **{f"idle_{c}_ns": s.idle_by_cause.get(c, 0) for c in CAUSES},
            **{f"{p}_gpu_ns": t.gpu_ns for p, t in s.phases.items()},
            **{f"{p}_host_ns": t.host_ns for p, t in s.phases.items()},
        }
        for s in idle.steps
    ]

    finding_rows = [{k: getattr(f, k) for k in _FINDING_SCHEMA} for f in findings]
    transfers = [
        {"rank": d.rank, "device": d.device, **t.to_json()} for d in devices for t in d.transfers
    ]
    return {
        "findings": pl.DataFrame(finding_rows, schema=_FINDING_SCHEMA),
        "transfers": pl.DataFrame(transfers, schema=_TRANSFER_SCHEMA),
        "devices": pl.DataFrame(device_rows, schema=_DEVICE_SCHEMA),
        "gaps": pl.DataFrame(gaps, schema=_GAP_SCHEMA),
        "gap_causes": pl.DataFrame(gap_causes, schema=_GAP_CAUSE_SCHEMA),
        "steps": pl.DataFrame(steps, schema=_STEP_SCHEMA),
        "short_kernels": pl.DataFrame(
            [asdict(r) for r in kernels.short_kernels], schema=_schema_of(ShortKernelRow)
        ),
        "ops": pl.DataFrame([asdict(r) for r in kernels.ops], schema=_schema_of(OpRow)),
        "ranks": rank_frame(ranks.per_rank if ranks is not None else []),
    }
