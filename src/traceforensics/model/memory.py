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
import resource
import sys
from functools import cache
from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:  # (the Kineto early scan's child reads ``available_memory`` without polars)
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
    import polars as pl

    return frame.with_columns(pl.lit(None, dtype=frame.schema[c]).alias(c) for c in empty)


def available_memory(root: Path = Path("/")) -> int | None:
    """Bytes a new allocation of this process may take (None when nothing is known): the
    least of the machine's ``MemAvailable``, the headroom of every memory cgroup above the
    process (v2 ``memory.max``, v1 ``memory.limit_in_bytes``, each minus the usage net of
    reclaimable file cache, as the kubelet counts a working set) and the address-space limit
    (``RLIMIT_AS`` minus ``VmSize``). A container or a batch job limits far below the
    machine's free memory: beyond its limit the process is killed, not refused. ``root``:
    where ``/proc`` and ``/sys`` are (tests point it at a fake tree)."""
    found = [
        _meminfo(root / "proc/meminfo"),
        *_cgroup_headroom(root),
        _address_space_left(root / "proc/self/status"),
    ]
    known = [f for f in found if f is not None]
    return max(0, min(known)) if known else None


def _read_int(path: Path) -> int | None:
    """The integer in a one-value kernel file; None when absent, unreadable or ``max``."""
    try:
        text = path.read_text(encoding="ascii").strip()
    except (OSError, UnicodeDecodeError):
        return None
    return int(text) if text.isdigit() else None


def _fields(path: Path) -> dict[str, int]:
    """``name value`` lines of a kernel file (``memory.stat``, ``meminfo`` without units)."""
    out: dict[str, int] = {}
    try:
        lines = path.read_text(encoding="ascii").splitlines()
    except (OSError, UnicodeDecodeError):
        return out
    for line in lines:
        parts = line.replace(":", " ").split()
        if len(parts) >= 2 and parts[1].isdigit():
            out[parts[0]] = int(parts[1])
    return out


def _meminfo(path: Path) -> int | None:
    kib = _fields(path).get("MemAvailable")
    return None if kib is None else kib * 1024


#: Above this a cgroup "limit" means none (v1 writes 2^63 rounded down to a page).
_NO_LIMIT = 1 << 62


def _cgroup_headroom(root: Path) -> list[int | None]:
    """Limit minus working set of the process's memory cgroup and each one above it, on the
    v2 (unified) and the v1 (``memory`` controller) hierarchy."""
    try:
        lines = (root / "proc/self/cgroup").read_text(encoding="utf-8").splitlines()
    except (OSError, UnicodeDecodeError):
        return []
    out: list[int | None] = []
    for line in lines:
        _id, _, rest = line.partition(":")
        controllers, _, rel = rest.partition(":")
        if controllers == "":  # v2: "0::/path"
            base, files = root / "sys/fs/cgroup", ("memory.max", "memory.current", "inactive_file")
        elif "memory" in controllers.split(","):
            base = root / "sys/fs/cgroup/memory"
            files = ("memory.limit_in_bytes", "memory.usage_in_bytes", "total_inactive_file")
        else:
            continue
        parts = [p for p in rel.split("/") if p not in ("", ".", "..")]
        for depth in range(len(parts), -1, -1):  # the process's own cgroup, then its parents
            folder = base.joinpath(*parts[:depth])
            limit, usage = _read_int(folder / files[0]), _read_int(folder / files[1])
            if limit is None or usage is None or limit >= _NO_LIMIT:
                continue
            cache = _fields(folder / "memory.stat").get(files[2], 0)
            out.append(limit - max(0, usage - cache))
    return out


def _address_space_left(status: Path) -> int | None:
    """``RLIMIT_AS`` (soft) minus the address space already mapped; None without a limit."""
    soft, _hard = resource.getrlimit(resource.RLIMIT_AS)
    if soft == resource.RLIM_INFINITY or soft < 0:
        return None
    mapped = _fields(status).get("VmSize", 0) * 1024
    return soft - mapped
