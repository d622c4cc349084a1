"""The machine-readable analysis object, schema ``traceforensics.analysis/1``: its id and the
``devices[]`` entries; ``pipeline.Analysis.to_json`` assembles the object.

Fields are contracts: add, never rename (docs/json-output.md documents every one). Every value
is a plain JSON type (str, int, float, bool, None, list, dict with str keys); times are int ns.
"""

from __future__ import annotations

from typing import Any, Final

from traceforensics.analysis.devices import DeviceRecord

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
