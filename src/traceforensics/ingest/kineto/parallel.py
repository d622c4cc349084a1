"""A second process that decodes chunks of a big Kineto file while this one decodes others.

Decoding a chunk and reducing it to columns is pure Python and C work under one interpreter
lock; on a machine with two cores or more, a worker process does about half the chunks::

    this process   | read | chunk 1 | chunk 2 | chunk 4 | ... | tail | join in order |
    worker         | (start)  | chunk 0 | chunk 3 | chunk 5 | ... |

(the worker is handed a chunk whenever it holds fewer than ``stream.WORKER_QUEUE``; this
process decodes the others). The worker's cyclic GC is paused while it decodes, as here.

The worker gets a chunk's JSON text (``[`` events ``]``) and returns its ``Columns`` (pickled:
compact lists, arrays and small frames, not event objects), both through files and taken by
this process itself (``worker``: no helper threads waiting for the interpreter lock);
results are joined in file order,
so the table is the same as a sequential load. If the worker cannot start or fails, that chunk
is decoded here: a load never depends on it.

Off unless ``set_workers(1)`` is called (the setting is in ``ingest.workers``): the CLI does (its
main module is import-safe, which the ``spawn`` start method needs); library users may, in a
script with an ``if __name__ == "__main__":`` guard. ``TF_INGEST_WORKERS=0`` turns it off.
"""

from __future__ import annotations

import atexit
import gc
import os
from concurrent.futures import Future
from typing import TYPE_CHECKING, Any

from traceforensics.ingest.kineto.batches import build_batch
from traceforensics.ingest.kineto.colscan import decode
from traceforensics.ingest.kineto.columns import Columns
from traceforensics.ingest.workers import decode_workers, set_workers

if TYPE_CHECKING:  # imported when a worker starts: ``multiprocessing`` is not needed before
    from traceforensics.ingest.kineto.worker import DecodeWorker


class _State:
    pool: DecodeWorker | None = None


_STATE = _State()
#: Below this much JSON a worker's start-up costs more than it saves (bytes).
MIN_PARALLEL_BYTES = 48 << 20
__all__ = ["collect", "decode_batch", "pool_for", "release", "result", "set_workers", "submit"]


def pool_for(json_bytes_estimate: int) -> DecodeWorker | None:
    """The decode worker when it is on (``ingest.workers``), the machine has a spare core and
    the file is big."""
    if (
        decode_workers() == 0
        or (os.cpu_count() or 1) < 2
        or json_bytes_estimate < MIN_PARALLEL_BYTES
    ):
        return None
    if _STATE.pool is None:
        from traceforensics.ingest.kineto.worker import DecodeWorker

        try:
            _STATE.pool = DecodeWorker()
        except (OSError, ValueError, RuntimeError):
            return None
    return _STATE.pool


def _shutdown(wait: bool = False) -> None:
    if _STATE.pool is not None:
        _STATE.pool.shutdown(wait=wait)
        _STATE.pool = None


atexit.register(_shutdown)


def release() -> None:
    """End the worker after a load: its memory (interpreter, last chunk) is not held through
    the analysis that follows; the next big file starts a fresh one."""
    _shutdown(wait=True)


def decode_batch(text: bytes) -> Columns | None:
    """The columns of one chunk's events (``[`` ... ``]``), or None when the text does not
    decode as a list of events (the caller then reads the file another way)."""
    # the worker is a fresh interpreter: its cyclic GC is on, and would scan the chunk's
    # (cycle-free) lists and dicts again and again as they grow (~40 % of a chunk's time);
    # the loading process pauses it the same way (``load_kineto``)
    was_enabled = gc.isenabled()
    gc.disable()
    try:
        events = decode(text)
        return None if events is None else build_batch(events)
    finally:
        if was_enabled:
            gc.enable()


def collect(pool: Any) -> None:
    """Take the results the worker has finished (its futures are completed here, by polling:
    ``worker`` says why no thread does it)."""
    from traceforensics.ingest.kineto.worker import DecodeWorker  # (loaded by ``pool_for``)

    if isinstance(pool, DecodeWorker):
        pool.poll()


def submit(pool: Any, text: bytes) -> Future[Columns | None] | Columns | None:
    """Hand ``text`` to the worker, or decode it here when there is none or it fails."""
    if pool is not None:
        try:
            fut: Future[Columns | None] = pool.submit(text)
            return fut
        except RuntimeError:  # a broken or shut-down pool
            _shutdown()
    return decode_batch(text)


def result(pending: Any, text: bytes) -> Columns | None:
    """The columns of a submitted chunk; decoded here if the worker failed."""
    if not isinstance(pending, Future):
        return pending  # type: ignore[no-any-return]
    from traceforensics.ingest.kineto.worker import DecodeWorker  # (loaded by ``pool_for``)

    if isinstance(_STATE.pool, DecodeWorker):
        _STATE.pool.wait(pending)
    try:
        return pending.result()  # type: ignore[no-any-return]
    except Exception:  # the worker died or could not pickle: do it here
        _shutdown()
        return decode_batch(text)
