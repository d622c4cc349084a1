"""Stream one Kineto file: chunked gunzip, the event list decoded a chunk at a time.

Memory holds one chunk of JSON text and its decoded events, never the whole file::

    {"schemaVersion": 1, ..., "traceEvents": [ {..}, {..}, ... {..}, {..}, ... {..} ], "k": v}
    |-------- header ---------|              |--- chunk 1 ---|  |-- chunk 2 ---|  |--- tail ---|

- the header (everything before ``"traceEvents": [``) is parsed as an object on its own;
- every ``chunks.CHUNK_BYTES`` of text, the events up to the last element boundary (``}``
  ``,`` ``{``) are read by the compiled scanner (``colscan``) and handed to ``sink``. A
  boundary pattern inside a string or a nested object does not scan as a list of events and
  an earlier one is tried;
- at the end, the last events and the keys after the list (``baseTimeNanoseconds``,
  ``traceName``, ...: ``chunks.scanned_tail``).

Reading and gunzip run on a thread ahead of the decode (zlib releases the interpreter lock).
The compiled scanner reads a chunk without the interpreter lock too, so each chunk's columns
are built on a thread one chunk behind the scan (``_Behind``).

A file the early scan read (``early``: gunzipped, scanned and built into columns while the
command imported polars) is not read again: its columns are taken, then its tail is read (when
the child did not read it too).

Anything outside this clean case (the scanner off or not built, a chunk or tail it does not
read) raises ``NotStreamableError`` and the caller reads the file with the generic whole-file
reader (``reader``), which knows every irregular shape: the Chrome array format, NaN literals,
cut-off files (salvaged), damaged JSON (refused with the reason), a header beyond
``chunks.HEADER_LIMIT``, an event list with no object in it.
"""

from __future__ import annotations

import queue
import threading
from collections.abc import Callable, Iterator
from concurrent.futures import Future, ThreadPoolExecutor
from pathlib import Path
from typing import Any

from traceforensics.ingest.kineto import chunks, colscan, early
from traceforensics.ingest.kineto.batches import ColumnBuilder
from traceforensics.ingest.kineto.chunks import (
    NotStreamableError,
    boundaries,
    check_size,
    closed_view,
    keep_from,
    pieces,
    read_header,
    scanned_tail,
)
from traceforensics.ingest.kineto.colscan import Scanned
from traceforensics.ingest.kineto.early import EarlyScan
from traceforensics.ingest.progress import report


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


def _emit(pending: bytearray, sink: Callable[[Scanned], None]) -> int:
    """Hand the complete events in ``pending`` (``[`` + events + a partial one) to ``sink``
    and keep ``[`` + the rest in it; returns how many events went. A boundary that does not
    scan (inside a string or a nested object) gives way to an earlier one; when none of the
    last ``chunks.MAX_TRIES`` does, the text is not the scanner's clean case and the file
    goes to the generic reader."""
    tried = False
    for end, nxt in boundaries(pending):
        tried = True
        events = _decoded(pending, end)
        if events is not None:
            sink(events)
            keep_from(pending, nxt)
            return len(events)
    if tried:
        raise NotStreamableError("a chunk the scanner does not read")
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


def stream_events(
    path: Path, builder: ColumnBuilder, scanned: EarlyScan | None = None
) -> dict[str, Any]:
    """Decode the file's events in batches into ``builder``; return its other top-level keys.
    With ``scanned``, the file's early scan (``early.take``), its chunks are not read again.

    Raises ``NotStreamableError`` for anything but the clean case (see the module docstring),
    and ``InputError`` subclasses for files that cannot be read at all."""
    if scanned is not None:
        return _from_early(path, scanned, builder)
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
            if len(pending) >= chunks.CHUNK_BYTES:
                _emit(pending, behind)
                _report_read(path, read, builder)
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


def _tail(pending: bytearray) -> tuple[dict[str, Any], Scanned]:
    """``(top-level keys after the event list, its last events)`` from the rest of the file
    (``chunks.scanned_tail``)."""
    split = scanned_tail(pending)
    last = None if split is None else colscan.scan(split[1])
    if split is None or last is None:
        raise NotStreamableError("the end of the file is not the scanner's clean case")
    return split[0], last
