"""The machine-readable analysis object, schema ``traceforensics.analysis/1``.

Fields are contracts: add, never rename (docs/json-output.md documents every one). Every value
is a plain JSON type (str, int, float, bool, None, list, dict with str keys); times are int ns.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Final

from traceforensics._version import __version__
from traceforensics.analysis.devices import DeviceRecord

if TYPE_CHECKING:
    from traceforensics.analysis.pipeline import Analysis

SCHEMA_ID: Final = "traceforensics.analysis/1"


def device_json(d: DeviceRecord) -> dict[str, Any]:
    """One ``devices[]`` entry."""
    obj: dict[str, Any] = {
        "rank": d.rank,
        "device": d.device,
        "name": d.name,
        "window_start_ns": d.window_start_ns,
        "window_ns": d.window_ns,
        "busy_ns": d.busy_ns,
        "idle_ns": d.idle_ns,
        "busy_fraction": round(d.busy_fraction, 6),
        "busy_by_kind": dict(d.busy_by_kind),
        "kernel_count": d.kernel_count,
        "memcpy_count": d.memcpy_count,
        "memset_count": d.memset_count,
        "graph_count": d.graph_count,
        "stream_count": d.stream_count,
        "top_kernels": [k.to_json() for k in d.top_kernels],
        "window_kind": d.window_kind,
        "n_gaps": d.n_gaps,
        "idle_by_cause": dict(d.idle_by_cause),
        "top_cause": d.top_cause,
        "comm_ns": d.comm_ns,
        "exposed_comm_ns": d.exposed_comm_ns,
        "mfu": d.mfu,
        "transfers": [t.to_json() for t in d.transfers],
        "copy_ns": d.copy_ns,
        "exposed_copy_ns": d.exposed_copy_ns,
    }
    if d.pattern is not None:
        obj["utilization"] = d.pattern.timeline.to_json()
        obj["pattern"] = d.pattern.pattern.to_json()
        obj["pattern_causes"] = [v.to_json() for v in d.pattern_causes]
    return obj


def analysis_json(analysis: Analysis) -> dict[str, Any]:
    """Assemble the JSON-ready dict of one analysis."""
    meta = analysis.session.meta
    idle = analysis.idle
    out: dict[str, Any] = {
        "schema": SCHEMA_ID,
        "tool_version": __version__,
        "inputs": [
            {"path": i.path, "format": i.format, "rank": i.rank, "format_version": i.format_version}
            for i in meta.inputs
        ],
        "source_format": meta.source_format,
        "event_count": analysis.event_count,
        "program": {
            "framework": analysis.program.framework,
            "vendor": analysis.program.vendor,
            "evidence": analysis.program.evidence,
            "facts": analysis.program.facts.to_json(),
        },
        "findings": [f.to_json() for f in analysis.findings],
        "range": {
            "steps": analysis.options.range.steps,
            "start_ns": analysis.options.range.start_ns,
            "end_ns": analysis.options.range.end_ns,
        },
        "devices": [device_json(d) for d in analysis.devices],
        "steps": [s.to_json() for s in idle.steps],
        "step_summary": [s.to_json() for s in idle.step_summary],
        "gaps": [g.to_json() for g in idle.gaps],
        "stream_gaps": [s.to_json() for s in idle.stream_gaps],
    }
    out.update(analysis.kernels.to_json())
    if analysis.ranks is not None:
        out["ranks"] = analysis.ranks.to_json()
    out["warnings"] = list(analysis.warnings)
    out["diagnostics"] = [d.to_json() for d in analysis.diagnostics]
    out["host"] = analysis.host.to_json() if analysis.host is not None else None
    if analysis.monitor is not None:
        out["monitor"] = analysis.monitor.to_json()
    return out
