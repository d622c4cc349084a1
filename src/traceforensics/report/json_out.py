"""The machine-readable analysis object (``tf analyze --json``).

Schema id ``traceforensics.analysis/1``. Fields are contracts: add, never rename
(docs/json-output.md documents every one).
"""

from __future__ import annotations

from typing import Any

from traceforensics import __version__
from traceforensics.analysis.pipeline import Analysis

SCHEMA_ID = "traceforensics.analysis/1"


def build_json(analysis: Analysis) -> dict[str, Any]:
    """Assemble the JSON-ready dict for one analysis."""
    meta = analysis.session.meta
    devices = [d.to_json() for d in analysis.summary.devices]
    return {
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
        "warnings": analysis.warnings,
    }
