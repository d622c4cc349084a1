"""Early scan: a trace file read and decoded while the command still imports polars.

A cold ``tf analyze TRACE`` spends its first 0.2-0.5 s (by machine) importing click, polars,
numpy and the analysis modules. A child process forked first (``start``, from the console
script, which imports numpy just before the fork so the child holds it too) reads the file on
the other core meanwhile as the stream does (``text``, the compiled scanner), decodes the
chunks with the one decoder (``decode``: numpy, no polars) and answers in a memory file
(``answer_file``); the rules that need the whole file run once, in polars, in the command::

    parent |numpy|-- imports (click, polars, analysis) -------------|take|-- rules, passes --|
    child        |-- gunzip, cut, scan and decode chunk 1 .. n, the tail --|  ^ its answer

A process, not a thread: zlib and the scanner release the interpreter lock, yet a thread's
gunzip and scan slowed the imports by about as much as they saved (docs/benchmarks.md).

The child answers only with the whole file decoded, and the load takes the answer only when
it is of the same file, unchanged (``input_identity``: path, size, mtime, inode, ctime).
Anything else (the scanner off, a chunk the scanner does not read at its first boundary, an
end of the file it does not read, a file beyond ``EARLY_MAX_JSON``, an error) gives up, and
the stream reads the file as always: a load gives the same table with or without the early
scan. (A child that handed over the chunks it had read for the stream to finish paid only for
such rare files: one answer is simpler.) Importing this module imports no numpy or polars.
"""

from __future__ import annotations

import os
import select
import signal
import sys
import threading
import time
from pathlib import Path
from typing import TYPE_CHECKING, Any, BinaryIO, Final, NamedTuple, NoReturn

from traceforensics._allocator import reuse_big_blocks
from traceforensics.cache import input_identity
from traceforensics.ingest.detect import json_size_estimate
from traceforensics.ingest.kineto import scanner
from traceforensics.ingest.kineto.answer_file import read_answer, write_answer

if TYPE_CHECKING:
    from traceforensics.ingest.kineto.decode import Decoded

#: Most JSON text scanned early (bytes; the child holds ~25 MB of scanned chunks while it
#: decodes them). Beyond it the load is long enough that the imports are a small part
#: of it, and the stream reads the file.
EARLY_MAX_JSON: Final = 48 << 20
#: ``TF_EARLY_SCAN=0`` turns the early scan off (no child process is forked).
OFF: Final = "TF_EARLY_SCAN"
#: Most seconds the load waits for the child once it asks for its answer (a scan takes well
#: under one; a child stuck on a file swapped for a FIFO is killed, and the stream reads it).
WAIT_S: Final = 60.0


# (a NamedTuple, and ``text`` imported by the functions the child runs: the console script
# imports this module before it forks, and dataclasses or orjson would delay the fork)
class EarlyScan(NamedTuple):
    """A file read and decoded whole by the child: ``top``, its top-level keys (before and
    after the event list); ``read``, [bytes of the file read, its size]; ``decoded``, its
    events (``decode.Decoded``, by the decoder the stream uses)."""

    top: dict[str, Any]
    read: list[int]
    decoded: Decoded


class _Pending:
    """The one early scan of this process: its file's identity, and the child process that
    reads it, answering in a memory file."""

    identity: bytes
    parent: int
    answer: int  # the memory file; -1 once read or let go
    done: int  # a pipe's read end: the child writes one byte once its answer is whole
    pid: int
    answered: EarlyScan | None = None

    def __init__(self, path: Path) -> None:
        if sys.platform != "linux":  # (``start`` checks; memfd_create is Linux's)
            raise OSError("no memory files here")
        self.identity = input_identity(path)
        self.parent = os.getpid()
        # the answer goes through a memory file, not a pipe: the child writes it whole and
        # exits while this process imports, instead of waiting for it to read 64 KB at a time
        self.answer = os.memfd_create("tf-early", os.MFD_CLOEXEC)
        # and says so on a pipe: its answer is read while it exits (its end, unmapping
        # ~150 MB, comes a few ms after its last write)
        self.done, said = os.pipe2(os.O_CLOEXEC)
        # Ctrl-C between the fork and the child's handlers would run this process's code in
        # the child: it is held off there (the child ends by itself, within its scan and
        # decode: well under a second for ``EARLY_MAX_JSON``)
        held = signal.pthread_sigmask(signal.SIG_BLOCK, {signal.SIGINT})
        try:
            self.pid = os.fork()
        except OSError:
            for fd in (self.answer, self.done, said):
                os.close(fd)
            raise
        finally:
            if os.getpid() == self.parent:
                signal.pthread_sigmask(signal.SIG_SETMASK, held)
        if self.pid == 0:  # the child: scan, answer, and leave without running any cleanup
            os.close(self.done)
            _answer(path, self.answer, said)
        os.close(said)

    def result(self) -> EarlyScan | None:
        """The child's answer, waiting at most ``WAIT_S`` for it (then the child is killed);
        None when it gave up, failed or was killed. Read once (then kept). The child is
        reaped before this returns: once it said its answer is whole, after the answer is
        read (it ends meanwhile); else as soon as it ended by itself."""
        if self.answer >= 0:
            poll = select.poll()  # (not ``select.select``: no limit on the descriptor)
            poll.register(self.done, select.POLLIN)
            ready = poll.poll(WAIT_S * 1000)
            whole = bool(ready) and os.read(self.done, 1) == b"1"
            os.close(self.done)
            ended = whole or self.wait(WAIT_S if ready else 0.0)  # (closed unsaid: it died)
            answer, self.answer = self.answer, -1
            try:
                self.answered = _mapped_answer(answer) if ended else None
            finally:
                os.close(answer)
            if whole:
                self.wait(WAIT_S)
        return self.answered

    def cancel(self) -> None:
        """Stop the child (its scan is not wanted) and let its answer go."""
        if self.answer >= 0:
            self.wait(0.0)
            for fd in (self.answer, self.done):
                os.close(fd)
            self.answer = -1

    def wait(self, seconds: float) -> bool:
        """Whether the child ended by itself within ``seconds``; else it is killed. Either way
        it is reaped (none is left behind as a zombie)."""
        deadline = time.monotonic() + seconds
        try:
            while os.waitpid(self.pid, os.WNOHANG) == (0, 0):
                if time.monotonic() >= deadline:
                    os.kill(self.pid, signal.SIGKILL)
                    os.waitpid(self.pid, 0)
                    return False
                time.sleep(0.001)
        except ChildProcessError:  # reaped already (SIGCHLD ignored by whoever started us)
            pass
        return True


def _mapped_answer(answer: int) -> EarlyScan | None:
    """The answer in the memory file ``answer`` (``answer_file``: its arrays views of a private
    mapping of the file, not copies); None when it is empty, cut or not a scan."""
    out = read_answer(answer)
    return out if isinstance(out, EarlyScan) else None


def _answer(path: Path, answer: int, said: int) -> NoReturn:
    """In the child: ``scan_file(path)`` pickled into the memory file ``answer`` (None on any
    failure), one byte on the pipe ``said`` once it is written, then ``os._exit``: the
    parent's buffers, atexit handlers and finally blocks are the parent's to run."""
    try:
        # the child writes nothing: it does not hold the command's output pipe open either
        # (``tf analyze T --bogus | cat`` ends when the command does)
        null = os.open(os.devnull, os.O_RDWR)
        for fd in (0, 1, 2):
            os.dup2(null, fd)
        with os.fdopen(answer, "wb") as fh:
            try:
                reuse_big_blocks()  # (its pieces of gunzipped text: the same few MB again)
                sent = _sent(fh, scan_file(path))
            except BaseException:  # any doubt: the stream reads the file and says what is wrong
                sent = False
            if not sent:
                _sent(fh, None)
        os.write(said, b"1")
    finally:
        os._exit(0)


def _sent(fh: BinaryIO, value: EarlyScan | None) -> bool:
    """Whether ``value`` was written whole into the memory file ``fh`` (``answer_file``: the
    pickle stream, then its arrays from where they lie: no copy of the answer in this
    process). On failure (an unpicklable value: None is sent next) the next try empties the
    file again."""
    return write_answer(fh, value)


_STATE: dict[str, _Pending] = {}


def start(path: Path) -> None:
    """Start the early scan of ``path`` in a child process: at most one per process, and none
    when the scanner or the early scan is off (``OFF``), the system is not Linux (elsewhere a
    forked child of a Python process is not safe), other Python threads run (the child would
    hold only this one: the console script has none at start-up), or the file is not a
    regular file of at most ``EARLY_MAX_JSON`` bytes of JSON (``json_size_estimate``).
    Imports numpy just before it forks (the child decodes with it)."""
    if _STATE or not scanner.enabled() or sys.platform != "linux":
        return
    if os.environ.get(OFF, "") == "0" or _other_threads():
        return
    try:
        if not path.is_file() or json_size_estimate(path) > EARLY_MAX_JSON:
            return
        # numpy before the fork: the child then has it to decode instead of importing it
        # on the other core while this process imports polars (this one needs numpy anyway).
        # Its OpenBLAS starts worker threads at import (one per core beyond the first): it
        # joins them in a pthread_atfork prepare handler, either process restarts them only on
        # a threaded BLAS call, and the child makes none
        import numpy  # noqa: F401

        _STATE["file"] = _Pending(path)
    except Exception:  # no fork, an unreadable file, a symlink loop: the stream reads the file
        return  # (or says what is wrong with it)


def _other_threads() -> bool:
    """Whether Python threads besides this one run (a forked child holds only the thread that
    forked: one of theirs might hold a lock the child then waits on for ever)."""
    return threading.active_count() > 1


def take(path: Path) -> EarlyScan | None:
    """The early scan of ``path`` (waiting for it to finish), once: None when none was started
    (in this process), it gave up, or it was of another file or of this one before it changed
    (its child is then stopped, not waited for). Whatever the answer, the scan's memory is
    let go."""
    pending = _STATE.pop("file", None)
    if pending is None or pending.parent != os.getpid():
        return None
    try:
        if input_identity(path) == pending.identity:
            return pending.result()
    except Exception:  # any doubt: the stream reads the file (and says what is wrong)
        pass
    pending.cancel()  # (a no-op once its answer was read)
    return None


def scan_file(path: Path) -> EarlyScan | None:
    """``path`` read and decoded as the stream reads it, every chunk by the scanner; None as
    soon as a chunk is not the scanner's clean case at its first boundary (the stream would
    then try earlier boundaries), the text goes beyond ``EARLY_MAX_JSON`` or the end of the
    file is not the clean case: the stream then reads the file (and says what is wrong).
    Raises what reading the file raises (``text.NotStreamableError`` for a file the stream
    does not take)."""
    from traceforensics.ingest.kineto import colscan
    from traceforensics.ingest.kineto import text as kt
    from traceforensics.ingest.kineto.decode import Decoded

    read, decoded = [0, 0], Decoded()
    pieces = kt.pieces(path, read)
    top, pending = kt.read_header(pieces)
    seen = len(pending)
    for piece in pieces:
        pending += piece
        seen += len(piece)
        if seen > EARLY_MAX_JSON:
            return None
        if len(pending) >= kt.CHUNK_BYTES and not _cut(pending, decoded):
            return None
    split = kt.scanned_tail(pending)  # the rest too, as ``text._tail`` reads it
    last = None if split is None else colscan.scan(split[1])
    if split is None or last is None:
        return None
    decoded.add(last)
    if not decoded.events_seen:
        return None
    decoded.memo = {}  # (shared values of the chunks: nothing more is decoded)
    return EarlyScan(top | split[0], read, decoded)


def _cut(pending: bytearray, decoded: Decoded) -> bool:
    """The stream's cut (``text._emit``) with the scanner alone: the events before the last
    element boundary scanned, decoded into ``decoded`` and dropped from ``pending``; False when
    the scanner does not read them (the stream would try other boundaries). No boundary yet:
    nothing is cut (more text is read)."""
    from traceforensics.ingest.kineto import colscan
    from traceforensics.ingest.kineto import text as kt

    first = next(kt.boundaries(pending), None)
    if first is None:
        kt.check_size(pending)
        return True
    end, nxt = first
    with kt.closed_view(pending, end) as view:
        out = colscan.scan(view)
    if out is None:
        return False
    decoded.add(out)
    kt.keep_from(pending, nxt)
    return True
