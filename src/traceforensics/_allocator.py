"""The allocators' settings, in a module that imports nothing of ours (nor polars): they are
set before polars loads, and before any thread starts.

``dirty_decay_ms``: how long jemalloc keeps freed pages for reuse before giving them back
(``traceforensics/__init__.py`` says why 100 ms).
"""

from __future__ import annotations

import ctypes
import sys

TF_ALLOCATOR_CONF = "dirty_decay_ms:100,muzzy_decay_ms:0"

#: glibc ``mallopt`` parameter number of ``M_ARENA_MAX``.
_M_ARENA_MAX = -8


def limit_arenas(count: int = 2) -> bool:
    """Cap glibc's malloc arenas: every thread that allocates (the analysis runs steps on
    worker threads, numpy allocates there) otherwise gets an arena of its own, each keeping
    its freed pages (~50 MB of the 40x peak). Only arenas created later are affected, so this
    is called before any thread starts. True when it could be asked (glibc only)."""
    if not sys.platform.startswith("linux"):
        return False
    try:
        mallopt = getattr(ctypes.CDLL(None), "mallopt", None)  # the process's own C library
    except OSError:
        return False
    return bool(mallopt(_M_ARENA_MAX, count)) if mallopt is not None else False
