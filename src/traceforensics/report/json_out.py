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


def dumps(obj: Any, *, indent: bool = True) -> bytes:
    """JSON bytes: indented and newline-terminated (the files and stdout), or compact with
    ``indent=False`` (``tf mcp``'s answers, one line). A text holding a lone surrogate (a file
    name with bytes that are not UTF-8) is written as its ``\\udcXX`` escape, still valid
    JSON."""
    option = orjson.OPT_NON_STR_KEYS | (orjson.OPT_INDENT_2 if indent else 0)
    end = b"\n" if indent else b""
    try:
        return orjson.dumps(obj, option=option) + end
    except TypeError:
        text = json.dumps(
            obj,
            indent=2 if indent else None,
            ensure_ascii=True,
            separators=None if indent else (",", ":"),
        )
        return text.encode("ascii") + end
