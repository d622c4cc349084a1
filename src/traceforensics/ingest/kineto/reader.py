"""Open one Kineto trace file: gzip or plain bytes, orjson parse, shape checks, one-line errors.

Accepted shapes:
- the Kineto JSON object ``{"schemaVersion": 1, ..., "traceEvents": [...]}``;
- the old Chrome "JSON array" format: a top-level list of events (also when the closing ``]`` is
  missing, which the Chrome trace format allows).

Every failure raises an ``InputError`` subclass whose message names the file:
"<file>: <what is wrong>; <what to do>".
"""

from __future__ import annotations

import gzip
import zlib
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import orjson

from traceforensics.model.errors import CorruptTraceError, InputError, UnsupportedFormatError

GZIP_MAGIC = b"\x1f\x8b"
_BOM = b"\xef\xbb\xbf"


@dataclass
class RawTrace:
    """One parsed trace file: its top-level keys (without ``traceEvents``) and the event list."""

    path: Path
    top: dict[str, Any]
    events: list[Any]
    is_array_format: bool = False
    notes: list[str] = field(default_factory=list)


def read_bytes(path: Path) -> bytes:
    """The file's JSON bytes, gunzipped when it starts with the gzip magic."""
    try:
        data = path.read_bytes()
    except FileNotFoundError as exc:
        raise InputError(f"{path}: no such file or directory") from exc
    except IsADirectoryError as exc:
        raise InputError(f"{path}: is a directory; pass a trace file") from exc
    except OSError as exc:
        raise InputError(f"{path}: cannot read the file ({exc.strerror or exc})") from exc
    if data.startswith(GZIP_MAGIC):
        try:
            data = gzip.decompress(data)
        except (EOFError, gzip.BadGzipFile, zlib.error) as exc:
            raise CorruptTraceError(
                f"{path}: the gzip stream is truncated or corrupt ({exc}); "
                "re-copy or re-export the trace"
            ) from exc
    return data


def _parse_json(path: Path, data: bytes) -> tuple[Any, list[str]]:
    notes: list[str] = []
    if data.startswith(_BOM):
        data = data[len(_BOM) :]
    if not data.strip():
        raise CorruptTraceError(
            f"{path}: the file is empty; pass a PyTorch Profiler trace (.json/.json.gz)"
        )
    try:
        return orjson.loads(data), notes
    except orjson.JSONDecodeError as exc:
        stripped = data.rstrip()
        # Chrome's array format may omit the closing bracket (a trace cut at process exit).
        if stripped.lstrip().startswith(b"[") and not stripped.endswith(b"]"):
            try:
                value = orjson.loads(stripped.rstrip(b",") + b"]")
            except orjson.JSONDecodeError:
                pass
            else:
                notes.append(f"{path}: JSON array without closing ']' (accepted)")
                return value, notes
        raise CorruptTraceError(
            f"{path}: not valid JSON ({exc.msg} at line {exc.lineno} column {exc.colno}); "
            "the trace may be truncated — re-export it"
        ) from exc


def read_trace(path: Path) -> RawTrace:
    """Read and shape-check one trace file. Raises ``InputError`` subclasses only."""
    value, notes = _parse_json(path, read_bytes(path))
    if isinstance(value, list):
        events, top, array_format = value, {}, True
    elif isinstance(value, dict):
        listed = value.get("traceEvents")
        if not isinstance(listed, list):
            raise UnsupportedFormatError(
                f"{path}: JSON but not a trace (no 'traceEvents' list); pass a PyTorch "
                "Profiler trace written by torch.profiler (export_chrome_trace or "
                "tensorboard_trace_handler)"
            )
        events = listed
        top = {k: v for k, v in value.items() if k != "traceEvents"}
        array_format = False
    else:
        raise UnsupportedFormatError(
            f"{path}: JSON but not a trace (top level is {type(value).__name__}); pass a "
            "PyTorch Profiler trace (.json/.json.gz)"
        )
    if not events:
        raise CorruptTraceError(
            f"{path}: the trace has no events (empty 'traceEvents'); the profiler recorded "
            "nothing — check the schedule/active steps and re-record"
        )
    if not any(type(e) is dict for e in events):
        raise UnsupportedFormatError(
            f"{path}: JSON but not a trace (no event objects in the event list); pass a "
            "PyTorch Profiler trace (.json/.json.gz)"
        )
    return RawTrace(path=path, top=top, events=events, is_array_format=array_format, notes=notes)
