"""Early scan: a trace file gunzipped and scanned while the command still imports polars.

A cold ``tf analyze TRACE`` spends its first ~0.4 s importing click, polars, numpy and the
analysis modules, all holding the interpreter lock. zlib and the compiled scanner read without
it, so a thread started first (``start``, from the console script) reads the file on the other
core meanwhile, cutting it into the same chunks as the stream (``chunks``)::

    main   |-- imports (click, polars, numpy, analysis) --|take|-- columns, table, passes --|
    early  |-- gunzip, cut, scan chunk 1 .. chunk n --|       ^ joined, handed to the stream

The stream (``stream.stream_events``) builds its columns from these scanned chunks instead of
reading the file only when they are of the same file, unchanged (``input_identity``: path,
size, mtime, inode, ctime), and the scan reached the end of the event list with every chunk
read by the scanner at its first boundary, as the stream itself would have. Anything else (the
scanner off, a chunk it cannot read, a file beyond ``EARLY_MAX_JSON``, an error) gives up, and
the stream reads the file as always: a load gives the same table with or without the early
scan. Nothing here imports numpy, polars or msgspec.
"""

from __future__ import annotations

import os
import pickle
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Final, NoReturn

from traceforensics.cache_keys import input_identity
from traceforensics.ingest.detect import GZIP_MAGIC
from traceforensics.ingest.kineto import chunks, scanner
from traceforensics.ingest.kineto.chunks import (
    boundaries,
    check_size,
    closed_view,
    keep_from,
    pieces,
    read_header,
)
from traceforensics.ingest.kineto.scanner import RawScan

#: Most JSON text scanned early (bytes; ~25 MB of scanned chunks held until the stream takes
#: them). Beyond it the load is long enough that the imports are a small part of it, and the
#: decode worker's path (``parallel.MIN_PARALLEL_BYTES``) reads the file.
EARLY_MAX_JSON: Final = 48 << 20


@dataclass(frozen=True, slots=True)
class EarlyScan:
    """A file read up to its last chunk: ``top``, the keys before the event list; ``batches``,
    the scanner's result of every chunk in file order; ``rest``, ``[`` + the text after the
    last chunk (the last events and the keys after the list); ``read``, [bytes of the file
    read, its size]; ``tail``, the rest read too when it is the clean case: (the keys after
    the list, the scanner's result of the last events), and then ``rest`` is left empty."""

    top: dict[str, Any]
    batches: list[RawScan]
    rest: bytearray
    read: list[int]
    tail: tuple[dict[str, Any], RawScan] | None = None


class _Pending:
    """The one early scan of this process: its file's identity, and the child process that
    reads it, answering in a memory file."""

    def __init__(self, path: Path) -> None:
        self.identity = input_identity(path)
        self.parent = os.getpid()
        # the answer goes through a memory file, not a pipe: the child writes it whole and
        # exits while this process imports, instead of waiting for it to read 64 KB at a time
        self.answer = os.memfd_create("tf-early", os.MFD_CLOEXEC)
        self.answer_read: EarlyScan | None = None
        try:
            self.pid = os.fork()
        except OSError:
            os.close(self.answer)
            raise
        if self.pid == 0:  # the child: scan, answer, and leave without running any cleanup
            _answer(path, self.answer)

    def result(self) -> EarlyScan | None:
        """The child's answer (waiting for it the first time), None when it gave up or
        failed."""
        if self.pid:
            os.waitpid(self.pid, 0)
            self.pid = 0
            with os.fdopen(self.answer, "rb") as fh:
                fh.seek(0)  # the child's writes moved the offset this descriptor shares
                data = fh.read()
            try:
                out = pickle.loads(data) if data else None
            except Exception:  # a child killed mid-answer: the stream reads the file
                out = None
            self.answer_read = out if isinstance(out, EarlyScan) else None
        return self.answer_read


def _answer(path: Path, answer: int) -> NoReturn:
    """In the child: ``scan_file(path)`` pickled into the memory file ``answer`` (None on any
    failure), then ``os._exit``: the parent's buffers, atexit handlers and finally blocks are
    the parent's to run."""
    try:
        try:
            data = pickle.dumps(scan_file(path), protocol=pickle.HIGHEST_PROTOCOL)
        except BaseException:  # any doubt: the stream reads the file and says what is wrong
            data = pickle.dumps(None)
        with os.fdopen(answer, "wb") as fh:
            fh.write(data)
    finally:
        os._exit(0)


_STATE: dict[str, _Pending] = {}


def start(path: Path) -> None:
    """Start the early scan of ``path`` in a child process: at most one per process, and none
    when the scanner is off, the system has no ``fork`` (Linux only: elsewhere a forked child
    of a Python process is not safe), or the file is not a regular file of at most
    ``EARLY_MAX_JSON`` bytes."""
    if _STATE or not scanner.enabled() or not sys.platform.startswith("linux"):
        return
    try:
        if not path.is_file() or json_size(path) > EARLY_MAX_JSON:
            return
        _STATE["file"] = _Pending(path)
    except Exception:  # no fork, an unreadable file, a symlink loop: the stream reads the file
        return  # (or says what is wrong with it)


def json_size(path: Path) -> int:
    """Bytes of JSON in the file: its size, or for gzip the size its trailer records (of the
    last member, modulo 4 GiB: a guess ``scan_file`` does not rely on)."""
    with path.open("rb") as fh:
        if fh.read(2) != GZIP_MAGIC:
            return path.stat().st_size
        fh.seek(-4, os.SEEK_END)
        return int.from_bytes(fh.read(4), "little")


def take(path: Path) -> EarlyScan | None:
    """The early scan of ``path`` (waiting for it to finish), once: None when none was started
    (in this process), it gave up, or it was of another file or of this one before it changed.
    Whatever the answer, the scan's memory is let go."""
    pending = _STATE.pop("file", None)
    if pending is None or pending.parent != os.getpid():
        return None
    result = pending.result()
    try:
        same = input_identity(path) == pending.identity
    except OSError:
        return None
    return result if same else None


def scan_file(path: Path) -> EarlyScan | None:
    """``path`` read as the stream reads it, every chunk by the scanner; None as soon as a chunk
    is not the scanner's clean case at its first boundary (the stream would then try the typed
    decoder) or the text goes beyond ``EARLY_MAX_JSON``. Raises what reading the file raises
    (``chunks.NotStreamableError`` for a file the stream does not take)."""
    read = [0, 0]
    text = pieces(path, read)
    top, pending = read_header(text)
    batches: list[RawScan] = []
    seen = len(pending)
    for piece in text:
        pending += piece
        seen += len(piece)
        if seen > EARLY_MAX_JSON:
            return None
        if len(pending) >= chunks.CHUNK_BYTES and not _cut(pending, batches):
            return None
    # the rest too, as ``stream._tail`` reads it (msgspec: imported in the child alone)
    from traceforensics.ingest.kineto.typed import split_tail

    split = split_tail(bytearray(pending))
    last = None if split is None else scanner.scan_raw(split[1])
    if split is None or last is None:  # the stream reads it (the typed decoder, or says why)
        return EarlyScan(top, batches, pending, read)
    return EarlyScan(top, batches, bytearray(), read, (split[0], last))


def _cut(pending: bytearray, batches: list[RawScan]) -> bool:
    """The stream's cut (``stream._emit``) with the scanner alone: the events before the last
    element boundary scanned into ``batches`` and dropped from ``pending``; False when the
    scanner does not read them (the stream would try the typed decoder, then other
    boundaries). No boundary yet: nothing is cut (more text is read)."""
    first = next(boundaries(pending), None)
    if first is None:
        check_size(pending)
        return True
    end, nxt = first
    with closed_view(pending, end) as view:
        out = scanner.scan_raw(view)
    if out is None:
        return False
    batches.append(out)
    keep_from(pending, nxt)
    return True
