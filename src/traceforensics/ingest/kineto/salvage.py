"""Traces cut off mid-write (a job killed while the profiler wrote it): keep what is complete.

- gzip: every member is decompressed; a stream that ends before its end-of-stream marker gives
  the bytes decompressed up to the cut (deflate output is an exact prefix). Damage inside the
  stream (a bad block) is not a cut and is refused by the caller.
- JSON: only a cut at the end of the data is salvaged (damage in the middle is refused). The
  text is closed after the last complete event and parsed again::

      {"schemaVersion": 1, ..., "traceEvents": [ {...}, {...}, {"ph": "X", "na|   <- cut
                                                          ^ last complete event
      kept:  {"schemaVersion": 1, ..., "traceEvents": [ {...}, {...} ]}

  When the cut falls after the event list was closed (in the keys that follow it), the list is
  whole and only the top-level object is closed. The Chrome array format (``[ {...}, ...``) is
  closed with ``]``. At most ``MAX_TRIES`` event boundaries are tried, from the end; a boundary
  pattern inside a string fails to parse and the next one is tried.
"""

from __future__ import annotations

import re
import zlib
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Final

import orjson

#: End of one event object and start of the next, between two array elements.
_BOUNDARY: Final = re.compile(rb"\}\s*,\s*\{")
#: The event list closed and another top-level key follows.
_LIST_CLOSED: Final = re.compile(rb"\}\s*\]\s*,\s*\"")
MAX_TRIES: Final = 16
_MAX_OUT: Final = 1 << 24
#: How far back from the end the last event boundaries are looked for first (bytes).
_TAIL: Final = 1 << 16


@dataclass(frozen=True)
class Salvaged:
    """A parsed prefix: the JSON value and how many bytes of the text it kept."""

    value: Any
    kept_bytes: int


def gunzip_prefix(data: bytes) -> tuple[bytes, bool]:
    """``(decompressed bytes, cut)``: all gzip members, and whether the last one ends before
    its end-of-stream marker. Raises ``zlib.error`` for a damaged stream."""
    out: list[bytes] = []
    rest = data
    while rest:
        stream = zlib.decompressobj(wbits=31)
        out.append(stream.decompress(rest))
        if not stream.eof:
            return b"".join(out), True
        rest = stream.unused_data.lstrip(b"\0")  # members may be zero-padded
    return b"".join(out), False


def gunzipped_size(path: Path, chunk: int = 1 << 20) -> int:
    """Decompressed size of a gzip file (all members, up to a cut), counted in bounded memory:
    ``chunk`` bytes in and at most ``_MAX_OUT`` bytes out at a time."""
    total = 0
    stream = zlib.decompressobj(wbits=31)
    with path.open("rb") as fh:
        while block := fh.read(chunk):
            while block:
                total += len(stream.decompress(block, _MAX_OUT))
                block = stream.unconsumed_tail
                if stream.eof:  # next member (after optional zero padding)
                    block = stream.unused_data.lstrip(b"\0") + block
                    stream = zlib.decompressobj(wbits=31)
    return total


def salvage_json(data: bytes) -> Salvaged | None:
    """The trace's complete events before a cut at the end of ``data``, or None when no
    event list can be closed (the cut came before the first event)."""
    head = data.lstrip()[:1]
    if head == b"[":
        return _close(data, _boundaries(data, 0), b"]")
    start = data.find(b'"traceEvents"')
    if head != b"{" or start < 0:
        return None
    tail = max(start, len(data) - _TAIL)
    closed = [data.index(b"]", m.start()) for m in _LIST_CLOSED.finditer(data, tail)]
    if closed:  # the list ended before the cut: close the object after the list
        found = _close_at(data, closed[-1], b"}")
        if found is not None:
            return found
    return _close(data, _boundaries(data, start), b"]}")


def _boundaries(data: bytes, start: int) -> list[int]:
    """Offsets of the ``}`` ending an array element, last first, at most ``MAX_TRIES``."""
    lo = max(start, len(data) - _TAIL)
    while True:
        found = [m.start() for m in _BOUNDARY.finditer(data, lo)]
        if len(found) >= MAX_TRIES or lo == start:
            return found[::-1][:MAX_TRIES]
        lo = max(start, lo - 16 * (len(data) - lo))


def _close(data: bytes, ends: list[int], closer: bytes) -> Salvaged | None:
    for end in ends:
        found = _close_at(data, end, closer)
        if found is not None:
            return found
    return None


def _close_at(data: bytes, end: int, closer: bytes) -> Salvaged | None:
    """Parse ``data[: end + 1] + closer`` (``end`` is the offset of a closing bracket)."""
    try:
        value = orjson.loads(data[: end + 1] + closer)
    except orjson.JSONDecodeError:
        return None
    return Salvaged(value, end + 1)
