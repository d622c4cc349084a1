"""The cache keys (the session cache, ``ingest.cache``; the analysis cache and its replay,
``cli``), in a module that imports only the standard library: a repeat run computes its key
before anything else is imported (``cli.replay``).

A key hashes the input's identity (absolute path, size, mtime, inode and ctime of every file) with
the tool version and a hash of the source that made the entry: a changed input or reader never
serves an old entry, and the version number alone does not move between releases.
"""

from __future__ import annotations

import functools
import hashlib
import os
from pathlib import Path

#: This package's directory (the source the fingerprints hash).
PACKAGE = Path(__file__).resolve().parent

CACHE_FORMAT = "1"


def cache_root() -> Path:
    """The directory holding cached sessions (respects ``XDG_CACHE_HOME``)."""
    base = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(base) / "traceforensics" / "sessions"


@functools.cache
def _tool_version() -> str:
    from traceforensics._version import __version__

    return f"{__version__}+{source_fingerprint(PACKAGE)}"


def source_fingerprint(package: Path, parts: tuple[str, ...] = ("ingest", "model")) -> str:
    """Hash of the source of ``parts`` (subpackages) under ``package`` (names and bytes): the
    Python modules and the C source of the compiled scanner (``ingest/kineto/_colscan.c``)."""
    h = hashlib.sha256()
    sources = (
        f for part in parts for ext in ("py", "c") for f in package.glob(f"{part}/**/*.{ext}")
    )
    for src in sorted(sources):
        h.update(src.relative_to(package).as_posix().encode() + b"\0" + src.read_bytes())
    return h.hexdigest()[:12]


def input_key(path: Path) -> str:
    """Hash of (path, size, mtime_ns, inode, ctime_ns) of the input (every file of a
    directory) + tool version: a file replaced by another of the same size and mtime (``cp -p``,
    ``touch -r``) still has another inode or ctime."""
    p = path.resolve()
    files = sorted(q for q in p.iterdir() if q.is_file()) if p.is_dir() else [p]
    h = hashlib.sha256()
    # names as the OS bytes (a name may hold bytes that are not UTF-8)
    h.update(f"{CACHE_FORMAT}|{_tool_version()}|".encode() + os.fsencode(p))
    for f in files:
        st = f.stat()
        stamp = f"|{st.st_size}|{st.st_mtime_ns}|{st.st_ino}|{st.st_ctime_ns}"
        h.update(b"|" + os.fsencode(f.name) + stamp.encode())
    return h.hexdigest()[:32]
