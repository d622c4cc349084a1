"""Decoding a rocprof Chrome trace: the event fields it writes, and its numbers.

rocprof writes numbers as text (v1: ``"ts":"1048928000311"``, v2: ``"dur":"250"``), v1 puts an
empty ``{}`` first in its event list, and v1's JSON is written without escaping (a name with a
quote makes the file unreadable): a file msgspec cannot decode is one line, naming it.
"""

from __future__ import annotations

import gzip
import math
import re
import zlib
from pathlib import Path
from typing import Any

import msgspec

from traceforensics.model.errors import CorruptTraceError


class Event(msgspec.Struct):
    """The fields of a Chrome trace event rocprof writes (``{}`` decodes to all None)."""

    ph: Any = None
    name: Any = None
    pid: Any = None
    tid: Any = None
    ts: Any = None
    dur: Any = None
    cat: Any = None
    id: Any = None
    args: Any = None


class _Top(msgspec.Struct):
    """The object form: the events and v1's ``otherData`` (rocminfo, ``meta``)."""

    traceEvents: list[Event] = []  # noqa: N815 (the format's spelling)
    otherData: Any = None  # noqa: N815


#: Largest magnitude read as an integer: times, ids and lanes beyond it are no number at all
#: (2^62 ns is 146 years; room is left for ``start + dur`` in int64).
_LIMIT = 1 << 62


def integer(value: object) -> int | None:
    """An integer written as a number or as text (rocprof writes numbers as text), None
    beyond ``_LIMIT``."""
    out: int | None = None
    if isinstance(value, int) and not isinstance(value, bool):
        out = value
    elif isinstance(value, str) and re.fullmatch(r"\s*-?\d+\s*", value):
        out = int(value)
    return out if out is not None and abs(out) < _LIMIT else None


def us_to_ns(value: object) -> int | None:
    """µs (a number or its text) as integer ns; None when it is neither or not finite."""
    whole = integer(value)
    if whole is not None:
        return whole * 1000 if abs(whole) < _LIMIT // 1000 else None
    try:
        number = float(value) if isinstance(value, (float, str)) else math.nan
    except ValueError:
        return None
    return round(number * 1000) if math.isfinite(number) and abs(number) < _LIMIT / 1e3 else None


def decode(path: Path) -> tuple[list[Event], Any]:
    """``(events, otherData or None)`` of a trace (object or bare array form, gzipped or not);
    ``CorruptTraceError`` (one line) for a file that cannot be read or decoded."""
    try:
        data = path.read_bytes()
        if data[:2] == b"\x1f\x8b":
            data = gzip.decompress(data)
        top = msgspec.json.decode(data, type=_Top | list[Event])
    except (OSError, EOFError, zlib.error, gzip.BadGzipFile) as exc:
        raise CorruptTraceError(f"{path}: cannot be read ({exc}); check the file") from None
    except msgspec.DecodeError as exc:
        raise CorruptTraceError(
            f"{path}: not a readable rocprof trace ({exc}); re-export it from rocprof "
            "(a cut or hand-edited file cannot be read)"
        ) from None
    return (top, None) if isinstance(top, list) else (top.traceEvents, top.otherData)
