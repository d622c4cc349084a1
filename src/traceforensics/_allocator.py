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


#: glibc ``mallopt`` parameter numbers of ``M_TRIM_THRESHOLD`` and ``M_MMAP_THRESHOLD``.
_M_TRIM_THRESHOLD, _M_MMAP_THRESHOLD = -1, -3


def _mallopt(param: int, value: int) -> bool:
    if not sys.platform.startswith("linux"):
        return False
    try:
        mallopt = getattr(ctypes.CDLL(None), "mallopt", None)  # the process's own C library
    except OSError:
        return False
    return bool(mallopt(param, value)) if mallopt is not None else False


def reuse_big_blocks(most: int = 32 << 20) -> bool:
    """Serve blocks up to ``most`` bytes from the heap and keep its freed top: a block glibc
    maps alone (from 128 KB at first) is unmapped when freed, and the next one of its size is
    faulted in afresh. For a short-lived process that reads a file in pieces of a few MB (the
    early-scan child: ~11k page faults, 7k of them for its gunzipped pieces); its heap grows
    to its peak and stays there until it ends. True when it could be asked (glibc only)."""
    return _mallopt(_M_MMAP_THRESHOLD, most) and _mallopt(_M_TRIM_THRESHOLD, 4 * most)


def limit_arenas(count: int = 2) -> bool:
    """Cap glibc's malloc arenas: every thread that allocates (the analysis runs steps on
    worker threads, numpy allocates there) otherwise gets an arena of its own, each keeping
    its freed pages (~50 MB of the 40x peak). Only arenas created later are affected, so this
    is called before any thread starts. True when it could be asked (glibc only)."""
    return _mallopt(_M_ARENA_MAX, count)
