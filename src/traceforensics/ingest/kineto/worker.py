"""The decode worker process: chunks in and columns out through files, no helper threads here.

Why not ``ProcessPoolExecutor``: its feeder and result threads run in this process and need
the interpreter lock, which this process holds while it decodes chunks of its own (a typed
decode or a list pass holds it for tens of ms). Measured on the 10x ResNet-50 trace: a finished
chunk waited 75 ms on average before its result was taken and the next chunk handed over, and
the worker idled 1.45 s of a 3.5 s load. Here this process does both ends itself, in
``submit`` and ``poll``::

    this process: write chunk file -> send (ticket, path) ........ poll: recv (ticket, result path)
    worker:       recv -> read + delete -> decode -> write result -> send (ticket, result path)

Chunk texts and pickled results go through files in a private folder of ``/dev/shm`` (memory,
where there is one; else the temporary folder), so the pipe only carries small messages and
never blocks either side. Results are ``Future`` objects completed by ``poll`` in this
process. A worker that dies or cannot write fails its futures; the caller then decodes those
chunks itself (``parallel.result``).
"""

from __future__ import annotations

import contextlib
import os
import pickle
import shutil
import tempfile
from concurrent.futures import Future
from multiprocessing import get_context
from multiprocessing.connection import Connection
from pathlib import Path
from typing import Any

from traceforensics.model.memory import freeze_for_exit

#: Seconds to wait for the worker to end after it was told to.
_JOIN_S = 5.0


def _folder() -> str:
    shm = "/dev/shm"
    base = shm if os.path.isdir(shm) and os.access(shm, os.W_OK) else None
    return tempfile.mkdtemp(prefix="tf-decode-", dir=base)


def serve(conn: Connection, folder: str) -> None:
    """The worker's loop: decode each chunk file it is sent until told to stop (``None``).
    The process ends then, and the loading process waits for it: its heap is frozen first
    (``model.memory.freeze_for_exit``: ~0.1 s less of interpreter teardown)."""
    try:
        _serve(conn, folder)
    finally:
        freeze_for_exit()


def _serve(conn: Connection, folder: str) -> None:
    from traceforensics.ingest.kineto.parallel import decode_batch

    while True:
        try:
            msg = conn.recv()
        except (EOFError, OSError):
            return
        if msg is None:
            return
        ticket, path = msg
        try:
            text = Path(path).read_bytes()
            os.unlink(path)
            out = os.path.join(folder, f"r{ticket}")
            with open(out, "wb") as fh:
                pickle.dump(decode_batch(text), fh, protocol=pickle.HIGHEST_PROTOCOL)
            conn.send((ticket, out, None))
        except Exception as exc:  # reported; the chunk is then decoded by the caller
            conn.send((ticket, None, f"{type(exc).__name__}: {exc}"))


class DecodeWorker:
    """One worker process and the futures of the chunks it holds (module docstring)."""

    def __init__(self) -> None:
        ctx = get_context("spawn")
        self.folder = _folder()
        self.conn, child = ctx.Pipe()
        self.proc = ctx.Process(target=serve, args=(child, self.folder), daemon=True)
        self.proc.start()
        child.close()
        self.pending: dict[int, Future[Any]] = {}
        self._next = 0

    def submit(self, text: bytes) -> Future[Any]:
        """Hand ``text`` over to be decoded (``parallel.decode_batch``). Raises
        ``RuntimeError`` when the worker cannot take it."""
        ticket = self._next
        self._next += 1
        path = os.path.join(self.folder, f"t{ticket}")
        try:
            Path(path).write_bytes(text)
            self.conn.send((ticket, path))
        except (OSError, ValueError) as exc:
            raise RuntimeError(f"the decode worker cannot take a chunk: {exc}") from exc
        fut: Future[Any] = Future()
        self.pending[ticket] = fut
        return fut

    def poll(self, block: bool = False) -> None:
        """Complete the futures of the chunks the worker has finished; with ``block``, wait
        for at least one while any is pending."""
        try:
            while self.pending and self.conn.poll(None if block else 0):
                ticket, out, error = self.conn.recv()
                block = False
                fut = self.pending.pop(ticket)
                if error is not None or out is None:
                    fut.set_exception(RuntimeError(f"the decode worker failed: {error}"))
                    continue
                data = Path(out).read_bytes()
                os.unlink(out)
                fut.set_result(pickle.loads(data))
        except (EOFError, OSError, pickle.UnpicklingError) as exc:
            self._fail(f"the decode worker is gone ({type(exc).__name__})")

    def _fail(self, why: str) -> None:
        for fut in self.pending.values():
            fut.set_exception(RuntimeError(why))
        self.pending.clear()

    def wait(self, fut: Future[Any]) -> None:
        """Poll until ``fut`` is done (its result or the worker's failure)."""
        while not fut.done():
            if not self.pending:  # pragma: no cover - every pending future is in the table
                fut.set_exception(RuntimeError("the decode worker lost a chunk"))
                return
            self.poll(block=True)

    def shutdown(self, wait: bool = True) -> None:
        """Stop the worker and remove its folder; futures still pending fail (never run
        later)."""
        with contextlib.suppress(OSError, ValueError):
            self.conn.send(None)
        if wait:
            self.proc.join(_JOIN_S)
        if self.proc.is_alive():
            self.proc.terminate()
            self.proc.join(_JOIN_S)
        self.conn.close()
        self._fail("the decode worker was stopped")
        shutil.rmtree(self.folder, ignore_errors=True)
