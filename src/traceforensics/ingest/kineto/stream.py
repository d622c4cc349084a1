"""Stream one Kineto file: chunked gunzip, the event list decoded a chunk at a time.

Memory holds one chunk of JSON text and its decoded events, never the whole file::

    {"schemaVersion": 1, ..., "traceEvents": [ {..}, {..}, ... {..}, {..}, ... {..} ], "k": v}
    |-------- header ---------|              |--- chunk 1 ---|  |-- chunk 2 ---|  |--- tail ---|

- the header (everything before ``"traceEvents": [``) is parsed as an object on its own;
- every ``chunks.CHUNK_BYTES`` of text, the events up to the last element boundary (``}``
  ``,`` ``{``) are decoded into ``Event`` structs and handed to ``sink``. A boundary pattern
  inside a string or a nested object fails to decode as a list of events and an earlier one
  is tried;
- at the end, ``{"traceEvents": [`` + the rest is one JSON object: its last events and the keys
  after the list (``baseTimeNanoseconds``, ``traceName``, ...).

Reading and gunzip run on a thread ahead of the decode (zlib releases the interpreter lock).
The compiled scanner reads a chunk without the interpreter lock too, so each chunk's columns
are built on a thread one chunk behind the scan (``_Behind``). With the decode worker
(``parallel``), a chunk is cut at the last boundary without a trial decode and goes to the
worker while it has fewer than ``WORKER_QUEUE`` chunks, else is decoded here; results join in
file order.

A file the early scan read (``early``: gunzipped, scanned and built into columns while the
command imported polars) is not read again: its columns are taken, then its tail is read (when
the child did not read it too).

Anything outside this clean case raises ``NotStreamableError`` and the caller reads the file with
the generic whole-file reader (``reader``), which knows every irregular shape: the Chrome array
format, NaN literals, cut-off files (salvaged), damaged JSON (refused with the reason), a
header beyond ``chunks.HEADER_LIMIT``, an event list with no object in it.
"""

from __future__ import annotations

import queue
import threading
from collections import deque
from collections.abc import Callable, Iterator
from concurrent.futures import Future, ThreadPoolExecutor
from pathlib import Path
from typing import Any, Final

from traceforensics.ingest.kineto import chunks, colscan, early, parallel
from traceforensics.ingest.kineto.batches import ColumnBuilder, build_batch
from traceforensics.ingest.kineto.chunks import (
    NotStreamableError,
    boundaries,
    check_size,
    closed,
    closed_view,
    keep_from,
    pieces,
    read_header,
)
from traceforensics.ingest.kineto.colscan import Batch, decode
from traceforensics.ingest.kineto.early import EarlyScan
from traceforensics.ingest.kineto.typed import decode_chunk, split_tail
from traceforensics.ingest.progress import report

#: Chunks decoded or in flight but not yet joined, at most: 64 MB of text. While the worker
#: starts (about a second) this process goes on decoding instead of waiting for its first chunk.
MAX_UNJOINED: Final = max(4, (64 << 20) // chunks.CHUNK_BYTES)
#: Chunks handed to the decode worker and not yet done, at most (``_Ordered.split``). With
#: one, the worker idled between chunks (10x ResNet-50: two took 6.0 s to 5.6 s; four, ~4 % more).
WORKER_QUEUE: Final = 4


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


def _decoded(pending: bytearray, end: int) -> Batch | None:
    """``decode`` of ``closed_view``: scanned where it lies (the scanner keeps no pointer
    into its text; a 4 MB copy per chunk saved), else typed-decoded from a copy."""
    with closed_view(pending, end) as text:
        scanned = colscan.scan(text)
    return scanned if scanned is not None else decode_chunk(closed(pending, end))


def _emit(pending: bytearray, sink: Callable[[Batch], None]) -> int:
    """Hand the complete events in ``pending`` (``[`` + events + a partial one) to ``sink``
    and keep ``[`` + the rest in it; returns how many events went. A boundary that does not
    decode (inside a string or a nested object) gives way to an earlier one."""
    for end, nxt in boundaries(pending):
        events = _decoded(pending, end)
        if events is not None:
            sink(events)
            keep_from(pending, nxt)
            return len(events)
    check_size(pending)
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
        end, nxt = next(boundaries(pending), (-1, -1))
        if end < 0:
            check_size(pending)
            return
        text = closed(pending, end)
        keep_from(pending, nxt)
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


def stream_events(
    path: Path, builder: ColumnBuilder, pool: Any = None, scanned: EarlyScan | None = None
) -> dict[str, Any]:
    """Decode the file's events in batches into ``builder``; return its other top-level keys.
    With a ``pool`` (``parallel``), every other chunk is decoded by its worker; with
    ``scanned``, the file's early scan (``early.take``), its chunks are not read again.

    Raises ``NotStreamableError`` for anything but the clean case (see the module docstring),
    and ``InputError`` subclasses for files that cannot be read at all."""
    if scanned is not None:
        return _from_early(path, scanned, builder)
    read = [0, 0]
    text = _prefetched(pieces(path, read))
    top, pending = read_header(text)
    report(f"reading {path.name}: {read[0] / 1e6:.0f} of {read[1] / 1e6:.0f} MB")
    ordered = _Ordered(builder, pool) if pool is not None else None
    behind = _Behind(builder.add) if ordered is None and colscan.enabled() else None
    try:
        for piece in text:
            pending += piece
            if len(pending) >= chunks.CHUNK_BYTES:
                if ordered is not None:
                    ordered.split(pending)
                else:
                    _emit(pending, behind or builder.add)
                _report_read(path, read, builder)
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
    return _ended(builder, top | rest)


def _from_early(path: Path, scanned: EarlyScan, builder: ColumnBuilder) -> dict[str, Any]:
    """``stream_events`` of a file the early scan read: its chunks' columns (built by the child,
    else here), then the rest of the file as the stream reads it (``_tail``)."""
    if scanned.built is not None:
        builder.c, builder.memo = scanned.built
    else:
        early.build_columns(scanned, builder)
    _report_read(path, scanned.read, builder)
    if scanned.tail is None:
        rest, last = _tail(scanned.rest)
        builder.add(last)
    else:  # read by the child too, and in the columns now
        rest = scanned.tail[0]
    return _ended(builder, scanned.top | rest)


def _report_read(path: Path, read: list[int], builder: ColumnBuilder) -> None:
    early.report_read(path, read, builder.c.events_seen)


def _ended(builder: ColumnBuilder, top: dict[str, Any]) -> dict[str, Any]:
    """``top`` (the file's top-level keys), once its events are in ``builder``."""
    if builder.c.events_seen == 0:
        raise NotStreamableError("no event objects")  # the generic reader says which case
    return top


def _tail(pending: bytearray) -> tuple[dict[str, Any], Batch]:
    """``(top-level keys after the event list, its last events)`` from the rest of the file."""
    split = split_tail(pending)
    if split is None:
        raise NotStreamableError("the end of the file is not plain JSON")
    rest, text = split
    last = decode(text)
    if last is None:  # pragma: no cover - decoded above as part of the object
        raise NotStreamableError("the last events do not decode")
    return rest, last
