"""The machine-readable analysis object (``tf analyze --json``).

Schema id ``traceforensics.analysis/1``. Fields are contracts: add, never rename
(docs/json-output.md documents every one).
"""

from __future__ import annotations

from typing import Any

from traceforensics import __version__
from traceforensics.analysis.pipeline import Analysis
from traceforensics.report.advice import ranked_causes

SCHEMA_ID = "traceforensics.analysis/1"


def build_json(analysis: Analysis) -> dict[str, Any]:
    """Assemble the JSON-ready dict for one analysis."""
    meta = analysis.session.meta
    gaps_json = analysis.gaps.to_json()
    extra = gaps_json["devices_extra"]
    kern = analysis.kernels.to_json()
    mfu_by_dev = {(r["rank"], r["device"]): r for r in kern["mfu"]["devices"]}
    gap_dev = {(g.rank, g.device): g for g in analysis.gaps.devices}
    window_kind = analysis.options.window
    devices: list[dict[str, Any]] = []
    for d in analysis.summary.devices:
        obj = d.to_json()
        obj["window_kind"] = window_kind
        g = gap_dev.get((d.rank, d.device))
        obj["n_gaps"] = g.n_gaps if g is not None else 0
        ext = extra.get(f"{d.rank}:{d.device}", {})
        obj["idle_by_cause"] = ext.get("idle_by_cause", {})
        ranked = ranked_causes(obj["idle_by_cause"])
        obj["top_cause"] = ranked[0][0] if ranked else None
        obj["comm_ns"] = ext.get("comm_ns", 0)
        obj["exposed_comm_ns"] = ext.get("exposed_comm_ns", 0)
        mfu = mfu_by_dev.get((d.rank, d.device))
        obj["mfu"] = mfu["mfu"] if mfu else None
        pat = analysis.pattern_for(d.rank, d.device)
        if pat is not None:
            obj["utilization"] = pat.timeline.to_json()
            obj["pattern"] = pat.pattern.to_json()
            obj["pattern_causes"] = [v.to_json() for v in pat.verdicts]
        devices.append(obj)
    out: dict[str, Any] = {
        "schema": SCHEMA_ID,
        "tool_version": __version__,
        "inputs": [
            {
                "path": i.path,
                "format": i.format,
                "rank": i.rank,
                "format_version": i.format_version,
            }
            for i in meta.inputs
        ],
        "source_format": meta.source_format,
        "event_count": analysis.summary.event_count,
        "devices": devices,
        "steps": gaps_json["steps"],
        "step_summary": gaps_json["step_summary"],
        "gaps": gaps_json["gaps"],
        "stream_gaps": gaps_json["stream_gaps"],
    }
    out.update(kern)
    out["warnings"] = analysis.warnings
    if analysis.monitor is not None:
        out["monitor"] = analysis.monitor.to_json()
    return out
