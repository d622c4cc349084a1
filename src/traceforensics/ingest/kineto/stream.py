"""Stream one Kineto file: chunked gunzip, the event list decoded a chunk at a time.

Memory holds one chunk of JSON text and its decoded events, never the whole file::

    {"schemaVersion": 1, ..., "traceEvents": [ {..}, {..}, ... {..}, {..}, ... {..} ], "k": v}
    |-------- header ---------|              |--- chunk 1 ---|  |-- chunk 2 ---|  |--- tail ---|

- the header (everything before ``"traceEvents": [``) is parsed as an object on its own;
- every ``CHUNK_BYTES`` of text, the events up to the last element boundary (``}`` ``,`` ``{``)
  are decoded into ``Event`` structs and handed to ``sink``. A boundary pattern inside a string
  or a nested object fails to decode as a list of events and an earlier one is tried;
- at the end, ``{"traceEvents": [`` + the rest is one JSON object: its last events and the keys
  after the list (``baseTimeNanoseconds``, ``traceName``, ...).

Reading and gunzip run on a thread ahead of the decode (zlib releases the interpreter lock).
The compiled scanner reads a chunk without the interpreter lock too, so each chunk's columns
are built on a thread one chunk behind the scan (``_Behind``). With the decode worker
(``parallel``), a chunk is cut at the last boundary without a trial decode and goes to the
worker while it has fewer than ``WORKER_QUEUE`` chunks, else is decoded here; results join in
file order.

Anything outside this clean case raises ``NotStreamableError`` and the caller reads the file with
the generic whole-file reader (``reader``), which knows every irregular shape: the Chrome array
format, NaN literals, cut-off files (salvaged), damaged JSON (refused with the reason), a
header beyond ``HEADER_LIMIT``, an event list with no object in it.
"""

from __future__ import annotations

import queue
import re
import threading
import zlib
from collections import deque
from collections.abc import Callable, Iterator
from concurrent.futures import Future, ThreadPoolExecutor
from contextlib import contextmanager
from pathlib import Path
from typing import Any, Final

import msgspec
import orjson

from traceforensics.ingest.detect import GZIP_MAGIC
from traceforensics.ingest.kineto import colscan, parallel
from traceforensics.ingest.kineto.batches import ColumnBuilder, build_batch
from traceforensics.ingest.kineto.colscan import Batch, decode
from traceforensics.ingest.kineto.reader import reading
from traceforensics.ingest.kineto.typed import decode_chunk, decode_top
from traceforensics.ingest.progress import report
from traceforensics.model.errors import CorruptTraceError

#: JSON text decoded per batch (bytes): large enough that per-call costs vanish, small enough
#: that a batch's structs and lists stay in the allocators' reused memory. 4 MB against 16 MB
#: on the 10x ResNet-50 trace: a quarter fewer page faults, ~0.4 s less CPU and wall time.
CHUNK_BYTES: Final = 4 << 20
#: Chunks decoded or in flight but not yet joined, at most: 64 MB of text. While the worker
#: starts (about a second) this process goes on decoding instead of waiting for its first chunk.
MAX_UNJOINED: Final = max(4, (64 << 20) // CHUNK_BYTES)
#: Text without an element boundary beyond this (bytes) is not a stream of events.
MAX_EVENT_BYTES: Final = 64 << 20
#: Compressed bytes read per step, and most decompressed bytes produced per step.
_READ: Final = 4 << 20
#: The header must end (``"traceEvents": [`` found) within this many bytes.
HEADER_LIMIT: Final = 64 << 20
#: Chunks handed to the decode worker and not yet done, at most (``_Ordered.split``). With
#: one, the worker idled between chunks (10x ResNet-50: two took 6.0 s to 5.6 s; four, ~4 % more).
WORKER_QUEUE: Final = 4
#: Element boundaries tried per chunk before more text is read.
MAX_TRIES: Final = 16
_EVENTS_KEY: Final = re.compile(rb'"traceEvents"\s*:\s*\[')
_BOUNDARY: Final = re.compile(rb"\}\s*,\s*\{")
_BOM: Final = b"\xef\xbb\xbf"


class NotStreamableError(Exception):
    """The file needs the generic whole-file reader (see the module docstring)."""


def _pieces(path: Path, read: list[int] | None = None) -> Iterator[bytes]:
    """The file's JSON text in pieces of at most ``_READ`` bytes, gunzipped (every member)
    when it starts with the gzip magic. A cut gzip stream raises ``NotStreamableError``.
    ``read``, when given, is kept at ``[bytes of the file read, its size]``."""
    read = read if read is not None else [0, 0]
    with reading(path) as fh:
        size = max(path.stat().st_size, 1)
        read[1] = size
        first = fh.read(_READ)
        if not first.startswith(GZIP_MAGIC):
            block = first
            while block:
                yield block
                read[0] = fh.tell()
                block = fh.read(_READ)
            return
        stream = zlib.decompressobj(wbits=31)
        block = first
        try:
            while block:
                while block:
                    out = stream.decompress(block, _READ)
                    block = stream.unconsumed_tail
                    if stream.eof:  # another member may follow (after zero padding)
                        block = stream.unused_data.lstrip(b"\0") + block
                        stream = zlib.decompressobj(wbits=31) if block else stream
                    if out:
                        yield out
                read[0] = fh.tell()
                block = fh.read(_READ)
            while not stream.eof and (out := stream.flush(_READ)):
                yield out
        except zlib.error as exc:
            raise CorruptTraceError(
                f"{path}: the gzip stream is corrupt ({exc}); re-copy or re-export the trace"
            ) from exc
        if not stream.eof:
            raise NotStreamableError("the gzip stream is cut")


def _prefetched(pieces: Iterator[bytes], depth: int = 4) -> Iterator[bytes]:
    """``pieces``, produced ``depth`` ahead on a thread: reading and gunzip (which release
    the interpreter lock) overlap the decoding of the text before them."""
    box: queue.Queue[tuple[bytes | None, BaseException | None]] = queue.Queue(depth)
    stop = threading.Event()

    def produce() -> None:
        try:
            for piece in pieces:
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


def _header(head: bytes) -> dict[str, Any]:
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


def _boundaries(pending: bytearray) -> Iterator[tuple[int, int]]:
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
def _closed_view(pending: bytearray, end: int) -> Iterator[memoryview]:
    """``pending`` up to ``end`` closed with ``]``, where it lies, while the block runs (the
    byte after ``end`` is put back after it)."""
    after = pending[end + 1]  # "," or white space: "}]" closes the array
    pending[end + 1] = ord("]")
    try:
        with memoryview(pending) as view, view[: end + 2] as text:
            yield text
    finally:
        pending[end + 1] = after


def _closed(pending: bytearray, end: int) -> bytes:
    """A copy of ``_closed_view`` (the raw values of typed events point into their text, and
    ``pending`` must stay resizable)."""
    with _closed_view(pending, end) as text:
        return bytes(text)


def _decoded(pending: bytearray, end: int) -> Batch | None:
    """``decode`` of ``_closed_view``: scanned where it lies (the scanner keeps no pointer
    into its text; a 4 MB copy per chunk saved), else typed-decoded from a copy."""
    with _closed_view(pending, end) as text:
        scanned = colscan.scan(text)
    return scanned if scanned is not None else decode_chunk(_closed(pending, end))


def _keep_from(pending: bytearray, nxt: int) -> None:
    """Drop the text before the event starting at ``nxt``; ``pending`` is ``[`` + the rest."""
    del pending[: nxt - 1]  # keep one byte before the next "{" ...
    pending[0] = ord("[")  # ... as the new opening bracket


def _check_size(pending: bytearray) -> None:
    if len(pending) > MAX_EVENT_BYTES:
        raise NotStreamableError("no event boundary found")


def _emit(pending: bytearray, sink: Callable[[Batch], None]) -> int:
    """Hand the complete events in ``pending`` (``[`` + events + a partial one) to ``sink``
    and keep ``[`` + the rest in it; returns how many events went. A boundary that does not
    decode (inside a string or a nested object) gives way to an earlier one."""
    for end, nxt in _boundaries(pending):
        events = _decoded(pending, end)
        if events is not None:
            sink(events)
            _keep_from(pending, nxt)
            return len(events)
    _check_size(pending)
    return 0


class _Behind:
    """``sink`` of each batch run on a thread, one batch behind the caller, in order: the
    columns of chunk k are built while chunk k+1 is scanned (the scanner releases the
    interpreter lock; 1x ResNet-50: ~0.08 s of its ~0.3 s load). One batch waits at most, so
    memory holds two chunks' results, not the file's."""

    def __init__(self, sink: Callable[[Batch], None]) -> None:
        self.sink = sink
        self.pool = ThreadPoolExecutor(1, thread_name_prefix="tf-columns")
        self.last: Future[None] | None = None

    def __call__(self, batch: Batch) -> None:
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


class _Ordered:
    """Chunks handed to the worker or decoded here, joined into ``builder`` in file order."""

    def __init__(self, builder: ColumnBuilder, pool: Any) -> None:
        self.builder = builder
        self.pool = pool
        self.queue: deque[tuple[Any, bytes]] = deque()

    def split(self, pending: bytearray) -> None:
        """Cut ``pending`` after its last element boundary (no trial decode: a wrong cut
        makes the chunk's result None, and the file goes to the generic reader); the part
        before it goes to the worker while it holds fewer than ``WORKER_QUEUE``, else is
        decoded here."""
        end, nxt = next(_boundaries(pending), (-1, -1))
        if end < 0:
            _check_size(pending)
            return
        text = _closed(pending, end)
        _keep_from(pending, nxt)
        # keep the worker fed, decode the rest here meanwhile: with chunks queued behind the
        # one it works on, it never waits for this process to finish a chunk of its own
        # before it gets the next (a chunk's round trip is about twice its decode)
        parallel.collect(self.pool)
        in_flight = sum(1 for p, _ in self.queue if isinstance(p, Future) and not p.done())
        if in_flight < WORKER_QUEUE:
            self.queue.append((parallel.submit(self.pool, text), text))
        else:
            self.queue.append((parallel.decode_batch(text), b""))
        self.drain(keep=MAX_UNJOINED)

    def drain(self, keep: int = 0) -> None:
        """Join finished chunks at the head of the queue; wait while more than ``keep`` are
        in flight (bounds the memory of texts and results)."""
        while self.queue:
            pending, text = self.queue[0]
            if len(self.queue) <= keep and isinstance(pending, Future) and not pending.done():
                return
            self.queue.popleft()
            batch = parallel.result(pending, text)
            if batch is None:
                raise NotStreamableError("a chunk does not decode as a list of events")
            self.builder.c.extend(batch)


def stream_events(path: Path, builder: ColumnBuilder, pool: Any = None) -> dict[str, Any]:
    """Decode the file's events in batches into ``builder``; return its other top-level keys.
    With a ``pool`` (``parallel``), every other chunk is decoded by its worker.

    Raises ``NotStreamableError`` for anything but the clean case (see the module docstring),
    and ``InputError`` subclasses for files that cannot be read at all."""
    read = [0, 0]
    pieces = _prefetched(_pieces(path, read))
    top, pending = _read_header(pieces)
    report(f"reading {path.name}: {read[0] / 1e6:.0f} of {read[1] / 1e6:.0f} MB")
    ordered = _Ordered(builder, pool) if pool is not None else None
    behind = _Behind(builder.add) if ordered is None and colscan.enabled() else None
    try:
        for piece in pieces:
            pending += piece
            if len(pending) >= CHUNK_BYTES:
                if ordered is not None:
                    ordered.split(pending)
                else:
                    _emit(pending, behind or builder.add)
                report(
                    f"reading {path.name}: {read[0] / 1e6:.0f} of {read[1] / 1e6:.0f} MB, "
                    f"{builder.c.events_seen:,} events"
                )
        rest, last = _tail(pending)
        if behind is not None:
            behind.wait()
    except BaseException as exc:
        # a batch's build that failed before this error is the one to report (as when the
        # columns were built here, before the next chunk was read)
        first = behind.failed() if behind is not None else None
        if first is not None:
            raise first from exc
        raise
    finally:
        if behind is not None:
            behind.close()
    if ordered is None:
        builder.add(last)
    else:  # the last events are reduced while the worker finishes its chunks
        tail = build_batch(last)
        ordered.drain()
        builder.c.extend(tail)
    if builder.c.events_seen == 0:
        raise NotStreamableError("no event objects")  # the generic reader says which case
    return top | rest


def _read_header(pieces: Iterator[bytes]) -> tuple[dict[str, Any], bytearray]:
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
    return _header(buf[: match.start()]), pending


def _tail(pending: bytearray) -> tuple[dict[str, Any], Batch]:
    """``(top-level keys after the event list, its last events)`` from the rest of the file."""
    pending[0:1] = b'{"traceEvents":['
    try:
        tail = decode_top(pending)
        rest = {k: orjson.loads(bytes(v)) for k, v in tail.items() if k != "traceEvents"}
    except (msgspec.DecodeError, orjson.JSONDecodeError) as exc:
        raise NotStreamableError("the end of the file is not plain JSON") from exc
    last = decode(bytes(tail["traceEvents"]))
    if last is None:  # pragma: no cover - decoded above as part of the object
        raise NotStreamableError("the last events do not decode")
    return rest, last
