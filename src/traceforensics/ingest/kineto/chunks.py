"""The JSON text of one Kineto file in pieces, and the cuts of its event list into chunks.

Shared by the stream (``stream``) and the early scan (``early``), so both cut a file at the
same element boundaries; nothing here imports numpy or polars::

    {"schemaVersion": 1, ..., "traceEvents": [ {..}, {..}, ... {..}, {..}, ... {..} ], "k": v}
    |--------- header ---------|  read_header |-- chunk 1 --|^ |-- chunk 2 --|^
                                                            boundaries(): "}" "," "{"
"""

from __future__ import annotations

import re
import zlib
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any, Final, cast

import orjson

from traceforensics.ingest.detect import GZIP_MAGIC
from traceforensics.ingest.kineto import scanner
from traceforensics.ingest.kineto.reader import reading
from traceforensics.model.errors import CorruptTraceError

try:  # ISA-L's inflate, where its wheel installs: ~4x zlib's on trace text (docs/benchmarks.md)
    from isal import isal_zlib as _inflate

    # (its stubs declare ``error`` an instance: it is the class ``IsalError``)
    _INFLATE_ERRORS: tuple[type[Exception], ...] = (zlib.error, cast(Any, _inflate.error))
except ImportError:  # pragma: no cover - a platform without its wheel
    _inflate = zlib  # type: ignore[misc]
    _INFLATE_ERRORS = (zlib.error,)

#: JSON text decoded per batch (bytes): large enough that per-call costs vanish, small enough
#: that a batch's structs and lists stay in the allocators' reused memory. 4 MB against 16 MB
#: on the 10x ResNet-50 trace: a quarter fewer page faults, ~0.4 s less CPU and wall time.
CHUNK_BYTES: Final = 4 << 20
#: Text without an element boundary beyond this (bytes) is not a stream of events.
MAX_EVENT_BYTES: Final = 64 << 20
#: Compressed bytes read per step, and most decompressed bytes produced per step. 1 MB
#: against 4 MB: the pieces and the text they are joined to take less fresh memory (the 1x
#: ResNet-50 early scan: ~1.5k fewer page faults; docs/benchmarks.md).
READ_BYTES: Final = 1 << 20
#: The header must end (``"traceEvents": [`` found) within this many bytes.
HEADER_LIMIT: Final = 64 << 20
#: Element boundaries tried per chunk before more text is read.
MAX_TRIES: Final = 16
_EVENTS_KEY: Final = re.compile(rb'"traceEvents"\s*:\s*\[')
_BOUNDARY: Final = re.compile(rb"\}\s*,\s*\{")
_BOM: Final = b"\xef\xbb\xbf"


class NotStreamableError(Exception):
    """The file needs the generic whole-file reader (see ``stream``)."""


def pieces(path: Path, read: list[int] | None = None) -> Iterator[bytes]:
    """The file's JSON text in pieces of at most ``READ_BYTES`` bytes, gunzipped (every member)
    when it starts with the gzip magic. A cut gzip stream raises ``NotStreamableError``.
    ``read``, when given, is kept at ``[bytes of the file read, its size]``.

    Inflated by ISA-L (``isal``) when it is installed, else by zlib: the same bytes for a
    whole stream; a cut one is read by the generic reader (``reader``, zlib), which keeps
    every byte before the cut (ISA-L may hold back the last)."""
    read = read if read is not None else [0, 0]
    with reading(path) as fh:
        size = max(path.stat().st_size, 1)
        read[1] = size
        first = fh.read(READ_BYTES)
        if not first.startswith(GZIP_MAGIC):
            block = first
            while block:
                yield block
                read[0] = fh.tell()
                block = fh.read(READ_BYTES)
            return
        stream = _inflate.decompressobj(wbits=31)
        block = first
        try:
            while block:
                while block:
                    out = stream.decompress(block, READ_BYTES)
                    block = stream.unconsumed_tail
                    if stream.eof:  # another member may follow (after zero padding)
                        block = stream.unused_data.lstrip(b"\0") + block
                        stream = _inflate.decompressobj(wbits=31) if block else stream
                    if out:
                        yield out
                read[0] = fh.tell()
                block = fh.read(READ_BYTES)
            while not stream.eof and (out := stream.flush(READ_BYTES)):
                yield out
        except _INFLATE_ERRORS as exc:
            raise CorruptTraceError(
                f"{path}: the gzip stream is corrupt ({exc}); re-copy or re-export the trace"
            ) from exc
        if not stream.eof:
            raise NotStreamableError("the gzip stream is cut")


def read_header(pieces: Iterator[bytes]) -> tuple[dict[str, Any], bytearray]:
    """``(top-level keys before the event list, "[" + the text after its "[")``."""
    buf = b""
    match = None
    for piece in pieces:
        if not buf and not piece.removeprefix(_BOM).lstrip().startswith(b"{"):
            raise NotStreamableError("not a JSON object")
        buf += piece
        match = _EVENTS_KEY.search(buf)
        if match is not None or len(buf) > HEADER_LIMIT:
            break
    if match is None:
        raise NotStreamableError("no event list")
    pending = bytearray(b"[")
    pending += buf[match.end() :]
    return parse_header(buf[: match.start()]), pending


def parse_header(head: bytes) -> dict[str, Any]:
    """The top-level keys before the event list; ``head`` ends just before ``"traceEvents"``."""
    text = head.removeprefix(_BOM).strip()
    if not text.startswith(b"{"):
        raise NotStreamableError("not a JSON object")
    text = text.rstrip()
    text = text[:-1] if text.endswith(b",") else text
    try:
        value = orjson.loads(text + b"}")
    except orjson.JSONDecodeError as exc:
        raise NotStreamableError("the header is not plain JSON") from exc
    if not isinstance(value, dict):  # pragma: no cover - starts with "{"
        raise NotStreamableError("not a JSON object")
    return value


def scanned_tail(pending: bytearray) -> tuple[dict[str, Any], bytes] | None:
    """The rest of a file after its last chunk (``[`` + the last events, ``]``, the keys after
    the event list, ``}``) as ``(those keys, the last events' JSON array text)``, by the
    scanner (``scanner.array_end``) and orjson. None when the
    scanner does not read the events, or what follows them is not ``}`` or ``, "key": ...}``
    of plain JSON without another ``traceEvents`` (the generic reader then judges the
    text)."""
    end = scanner.array_end(pending)
    if end is None:
        return None
    after = bytes(pending[end:]).lstrip(_JSON_SPACE)
    if after.startswith(b","):  # (a comma, then a key: not ``],}``)
        keys = after[1:].lstrip(_JSON_SPACE)
        text = b"{" + keys if keys.startswith(b'"') else b""
    else:  # (the object closes: no keys after the list)
        text = b"{" + after if after.startswith(b"}") else b""
    try:
        rest = orjson.loads(text) if text else None
    except orjson.JSONDecodeError:
        return None
    if not isinstance(rest, dict) or "traceEvents" in rest:
        return None
    return rest, bytes(pending[:end])


#: JSON's white space (RFC 8259), which ``bytes.strip`` alone would widen.
_JSON_SPACE: Final = b" \t\r\n"


def boundaries(pending: bytearray) -> Iterator[tuple[int, int]]:
    """``(end, next)`` of the last ``MAX_TRIES`` element boundaries in ``pending``, last first:
    ``end`` is the offset of a ``}`` followed by ``,`` and ``{``, ``next`` that ``{``'s."""
    pos = pending.rfind(b"}")
    tries = 0
    while pos > 0 and tries < MAX_TRIES:
        m = _BOUNDARY.match(pending, pos)
        if m is not None:
            tries += 1
            yield pos, m.end() - 1
        pos = pending.rfind(b"}", 0, pos)


@contextmanager
def closed_view(pending: bytearray, end: int) -> Iterator[memoryview]:
    """``pending`` up to ``end`` closed with ``]``, where it lies, while the block runs (the
    byte after ``end`` is put back after it)."""
    after = pending[end + 1]  # "," or white space: "}]" closes the array
    pending[end + 1] = ord("]")
    try:
        with memoryview(pending) as view, view[: end + 2] as text:
            yield text
    finally:
        pending[end + 1] = after


def keep_from(pending: bytearray, nxt: int) -> None:
    """Drop the text before the event starting at ``nxt``; ``pending`` is ``[`` + the rest."""
    del pending[: nxt - 1]  # keep one byte before the next "{" ...
    pending[0] = ord("[")  # ... as the new opening bracket


def check_size(pending: bytearray) -> None:
    if len(pending) > MAX_EVENT_BYTES:
        raise NotStreamableError("no event boundary found")
