"""The machine-readable analysis object (``tf analyze --json``).

Schema id ``traceforensics.analysis/1``; the object is ``Analysis.to_json()``
(``analysis/export.py``), written here as indented UTF-8 JSON.
"""

from __future__ import annotations

import json
from typing import Any

import orjson

from traceforensics.analysis.export import SCHEMA_ID
from traceforensics.analysis.pipeline import Analysis

__all__ = ["SCHEMA_ID", "build_json", "dumps"]


def build_json(analysis: Analysis) -> dict[str, Any]:
    """The JSON-ready dict of one analysis."""
    return analysis.to_json()


def dumps(obj: dict[str, Any]) -> bytes:
    """Indented JSON bytes, newline-terminated. A text holding a lone surrogate (a file name
    with bytes that are not UTF-8) is written as its ``\\udcXX`` escape, still valid JSON."""
    try:
        return orjson.dumps(obj, option=orjson.OPT_INDENT_2 | orjson.OPT_NON_STR_KEYS) + b"\n"
    except TypeError:
        return json.dumps(obj, indent=2, ensure_ascii=True).encode("ascii") + b"\n"
