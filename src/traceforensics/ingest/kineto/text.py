"""The JSON text of one Kineto file: gunzip in pieces, the header, the event list cut into
chunks, and the stream that scans and decodes them one at a time.

Memory holds one chunk of JSON text and its decoded events, never the whole file::

    {"schemaVersion": 1, ..., "traceEvents": [ {..}, {..}, ... {..}, {..}, ... {..} ], "k": v}
    |-------- header ---------|  read_header |-- chunk 1 --|^ |-- chunk 2 --|^ |--- tail ---|
                                                           boundaries(): "}" "," "{"

- the header (everything before ``"traceEvents": [``) is parsed as an object on its own;
- every ``CHUNK_BYTES`` of text, the events up to the last element boundary are read by the
  compiled scanner (``colscan``) and decoded (``decode.Decoded``). A boundary pattern inside a
  string or a nested object does not scan as a list of events and an earlier one is tried;
- at the end, the last events and the keys after the list (``baseTimeNanoseconds``,
  ``traceName``, ...: ``scanned_tail``).

Reading and gunzip run on a thread ahead of the scan (zlib releases the interpreter lock). The
scanner reads a chunk without the interpreter lock too, so each chunk is decoded on a thread
one chunk behind the scan (``_Behind``). The early scan (``early``) cuts a file at the same
boundaries.

A chunk the scanner does not read at any of its last boundaries (a value outside its clean
case: a uint64 arg, an escaped key) is parsed as strict JSON and coded by ``generic`` in the
stream (``_parsed``). Anything else (the scanner off or not built, a chunk or tail that is not
strict JSON) raises ``NotStreamableError`` and the caller reads the file with the generic
whole-file reader (``reader``), which knows every irregular shape: the Chrome array format,
NaN literals, cut-off files (salvaged), damaged JSON (refused with the reason), a header beyond
``HEADER_LIMIT``, an event list with no object in it.
"""

from __future__ import annotations

import queue
import re
import threading
import zlib
from collections.abc import Callable, Iterator
from concurrent.futures import Future, ThreadPoolExecutor
from contextlib import contextmanager
from pathlib import Path
from typing import TYPE_CHECKING, Any, Final, cast

import orjson

from traceforensics.ingest.detect import GZIP_MAGIC
from traceforensics.ingest.kineto import colscan
from traceforensics.ingest.kineto.reader import reading
from traceforensics.ingest.progress import report, report_read
from traceforensics.model.errors import CorruptTraceError

if TYPE_CHECKING:
    from traceforensics.ingest.kineto.colscan import Scanned
    from traceforensics.ingest.kineto.decode import Decoded

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
#: The pattern that opens the event list, and the UTF-8 byte-order mark (``passthrough``).
EVENTS_KEY: Final = _EVENTS_KEY
BOM: Final = _BOM


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
    scanner (``colscan.array_end``) and orjson. None when the
    scanner does not read the events, or what follows them is not ``}`` or ``, "key": ...}``
    of plain JSON without another ``traceEvents`` (the generic reader then judges the
    text)."""
    end = colscan.array_end(pending)
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


def _prefetched(source: Iterator[bytes], depth: int = 4) -> Iterator[bytes]:
    """``source``, produced ``depth`` ahead on a thread: reading and gunzip (which release
    the interpreter lock) overlap the decoding of the text before them."""
    box: queue.Queue[tuple[bytes | None, BaseException | None]] = queue.Queue(depth)
    stop = threading.Event()

    def produce() -> None:
        try:
            for piece in source:
                while not stop.is_set():
                    try:
                        box.put((piece, None), timeout=0.1)
                        break
                    except queue.Full:
                        continue
                if stop.is_set():
                    return
            box.put((None, None))
        except BaseException as exc:  # handed to the consumer, raised there
            box.put((None, exc))

    thread = threading.Thread(target=produce, name="tf-read", daemon=True)
    thread.start()
    try:
        while True:
            piece, error = box.get()
            if error is not None:
                raise error
            if piece is None:
                return
            yield piece
    finally:
        stop.set()


def _decoded(pending: bytearray, end: int) -> Scanned | None:
    """The scan of ``closed_view``, where it lies (the scanner keeps no pointer into its text;
    a 4 MB copy per chunk saved); None when the scanner does not read it."""
    with closed_view(pending, end) as text:
        return colscan.scan(text)


def _parsed(text: bytes | memoryview) -> Scanned | None:
    """A chunk the scanner does not read (a value outside its clean case, e.g. a uint64 arg)
    parsed as strict JSON and coded as the scanner codes (``generic.scanned_events``: its kept
    args then read as compact JSON, not as written); None when it is not a JSON array (a cut
    inside a string, NaN literals: the file then goes to the generic reader)."""
    from traceforensics.ingest.kineto.generic import scanned_events

    try:
        events = orjson.loads(text)
    except orjson.JSONDecodeError:
        return None
    return scanned_events(events) if isinstance(events, list) else None


def _emit(pending: bytearray, sink: Callable[[Scanned], None]) -> int:
    """Hand the complete events in ``pending`` (``[`` + events + a partial one) to ``sink``
    and keep ``[`` + the rest in it; returns how many events went. A boundary that does not
    scan (inside a string or a nested object) gives way to an earlier one; when none of the
    last ``MAX_TRIES`` does, the last one that parses as strict JSON is read by the generic
    coder (``_parsed``: one odd value does not send a large file to the whole-file reader);
    when none does, the file goes to the generic reader."""
    cuts = list(boundaries(pending))
    for end, nxt in cuts:
        events = _decoded(pending, end)
        if events is not None:
            sink(events)
            keep_from(pending, nxt)
            return len(events)
    for end, nxt in cuts:
        with closed_view(pending, end) as text:
            events = _parsed(text)
        if events is not None:
            sink(events)
            keep_from(pending, nxt)
            return len(events)
    if cuts:
        raise NotStreamableError("a chunk that is not strict JSON")
    check_size(pending)
    return 0


class _Behind:
    """``sink`` of each batch run on a thread, one batch behind the caller, in order: the
    columns of chunk k are built while chunk k+1 is scanned (the scanner releases the
    interpreter lock; 1x ResNet-50: ~0.08 s of its ~0.3 s load). One batch waits at most, so
    memory holds two chunks' results, not the file's."""

    def __init__(self, sink: Callable[[Scanned], None]) -> None:
        self.sink = sink
        self.pool = ThreadPoolExecutor(1, thread_name_prefix="tf-columns")
        self.last: Future[None] | None = None

    def __call__(self, batch: Scanned) -> None:
        self.wait()
        self.last = self.pool.submit(self.sink, batch)

    def wait(self) -> None:
        """Until the last batch is in (its error raised here)."""
        error = self.failed()
        if error is not None:
            raise error

    def failed(self) -> BaseException | None:
        """The error of the last batch's build, once it is done (None if it went well)."""
        last, self.last = self.last, None
        return None if last is None else last.exception()

    def close(self) -> None:
        """Wait for the thread (it never outlives the read: the builder is not left half
        built behind an error of the caller's)."""
        self.pool.shutdown(wait=True)


def stream_events(path: Path, builder: Decoded) -> dict[str, Any]:
    """Decode the file's events in batches into ``builder``; return its other top-level keys.

    Raises ``NotStreamableError`` for anything but the clean case (see the module docstring),
    and ``InputError`` subclasses for files that cannot be read at all."""
    if not colscan.enabled():
        raise NotStreamableError("the scanner is off")  # the generic reader reads every file
    read = [0, 0]
    text = _prefetched(pieces(path, read))
    top, pending = read_header(text)
    report(f"reading {path.name}: {read[0] / 1e6:.0f} of {read[1] / 1e6:.0f} MB")
    behind = _Behind(builder.add)
    try:
        for piece in text:
            pending += piece
            if len(pending) >= CHUNK_BYTES:
                _emit(pending, behind)
                report_read(path, read, builder.events_seen)
        rest, last = _tail(pending)
        behind.wait()
    except BaseException as exc:
        # a batch's build that failed before this error is the one to report (as when the
        # columns were built here, before the next chunk was read)
        first = behind.failed()
        if first is not None:
            raise first from exc
        raise
    finally:
        behind.close()
    builder.add(last)
    return _ended(builder, top | rest)


def _ended(builder: Decoded, top: dict[str, Any]) -> dict[str, Any]:
    """``top`` (the file's top-level keys), once its events are in ``builder``."""
    if builder.events_seen == 0:
        raise NotStreamableError("no event objects")  # the generic reader says which case
    return top


def _tail(pending: bytearray) -> tuple[dict[str, Any], Scanned]:
    """``(top-level keys after the event list, its last events)`` from the rest of the file
    (``chunks.scanned_tail``)."""
    split = scanned_tail(pending)
    last = None if split is None else colscan.scan(split[1]) or _parsed(split[1])
    if split is None or last is None:
        raise NotStreamableError("the end of the file is not plain JSON")
    return split[0], last
