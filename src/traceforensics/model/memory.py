"""Give memory freed by a load back to the operating system, and hold less of it
(``nulls_as_constants``).

A load builds and drops millions of small Python objects (decoded events, per-batch lists);
glibc keeps the freed heap pages for later ``malloc`` calls, but the event table and the
analysis allocate through polars' and numpy's own allocators, which never reuse them. Without
this, a 3M-event load leaves ~700 MB resident that nothing will use again (measured on the 40x
tiled ResNet-50 trace). ``malloc_trim(0)`` returns the free pages; on other C libraries this
is a no-op.
"""

from __future__ import annotations

import ctypes
import gc
import sys
from functools import cache
from typing import Any

import polars as pl


@cache
def _libc() -> Any:
    if not sys.platform.startswith("linux"):
        return None
    try:
        # the process's own C library (``find_library`` would run ``ldconfig -p`` in a
        # subprocess: a fork of this process on every run, for a name already loaded)
        libc = ctypes.CDLL(None)
        return libc if hasattr(libc, "malloc_trim") else None
    except OSError:
        return None


def freeze_for_exit() -> None:
    """Move every object to the collector's permanent generation, for a process about to end.

    The interpreter's finalization runs one last collection over every object, and with
    polars imported that walk took ~80-110 ms, a tenth of a small trace's whole ``tf analyze``
    and a fifth of a run the caches serve (measured: import polars, exit: 105 ms of teardown;
    with this, 17 ms). Frozen objects are never collected: only for the end of a process (the
    CLI's entry, the decode worker's loop), never in a library call. Files are closed by
    their ``with`` blocks and the standard streams are flushed by the interpreter as before;
    atexit handlers still run."""
    gc.freeze()


#: Allocations between two collections of the youngest generation in the console script.
YOUNG_THRESHOLD = 20_000


def startup_done() -> None:
    """The console script's imports are done: resume the collector the entry paused for them
    (``cli.entry``), their objects first moved to the permanent generation.

    Imports make ~200k objects (functions, classes, module dicts) and free almost none; the
    collector walked them again and again while they were made (~0.05 s of a 1x ResNet-50
    ``tf analyze``) and would walk them in every full collection after. They live as long as
    the process: only for the console script, never in a library call. The youngest
    generation is collected every ``YOUNG_THRESHOLD`` allocations instead of 700: the
    analysis frees its objects by reference counts (tables live in polars and numpy), and
    the ~20 collections of a 1x run cost ~2 ms of its ~0.35 s."""
    gc.freeze()
    gc.set_threshold(YOUNG_THRESHOLD, *gc.get_threshold()[1:])
    gc.enable()


def release_free_memory() -> bool:
    """Return freed heap memory to the OS (glibc); True when it could be asked."""
    libc = _libc()
    if libc is None:
        return False
    libc.malloc_trim(0)
    return True


def nulls_as_constants(frame: pl.DataFrame) -> pl.DataFrame:
    """``frame`` with every all-null column held as one typed null (polars keeps a constant
    column unexpanded): a kernel-only program's copy columns, or a trace without launching
    ops, hold nothing instead of 8 bytes per GPU op each (~190 MB at 10M kernels)."""
    if frame.height == 0:
        return frame
    empty = [c for c, s in frame.to_dict().items() if s.null_count() == frame.height]
    return frame.with_columns(pl.lit(None, dtype=frame.schema[c]).alias(c) for c in empty)
