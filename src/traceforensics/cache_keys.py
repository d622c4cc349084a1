"""The cache keys (the session cache, ``ingest.cache``; the analysis cache and its replay,
``cli``), in a module that imports only the standard library: a repeat run computes its key
before anything else is imported (``cli.replay``).

A key hashes the input's identity (absolute path, size, mtime, inode and ctime of every file) with
the tool version and a hash of the source that made the entry: a changed input or reader never
serves an old entry, and the version number alone does not move between releases.
"""

from __future__ import annotations

import functools
import os
from collections.abc import Iterable
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
    sources = (
        f for part in parts for ext in ("py", "c") for f in package.glob(f"{part}/**/*.{ext}")
    )
    return _files_hash(package, sources)[:12]


def package_fingerprint(package: Path) -> str:
    """Hash of every file of ``package`` (names and bytes; its data files too) but bytecode
    and the built scanner (its C source counts)."""
    files = (
        f
        for f in package.rglob("*")
        if f.is_file() and "__pycache__" not in f.parts and f.suffix not in _BUILT
    )
    return _files_hash(package, files)


#: Files of the package that are not what it runs from.
_BUILT = (".pyc", ".so", ".pyd")


def _files_hash(package: Path, files: Iterable[Path]) -> str:
    import hashlib  # (where a hash is made: ``tf analyze`` starts without OpenSSL's library)

    h = hashlib.sha256()
    for src in sorted(files):
        h.update(src.relative_to(package).as_posix().encode() + b"\0" + src.read_bytes())
    return h.hexdigest()


def input_identity(path: Path) -> bytes:
    """What identifies the input: its absolute path and (name, size, mtime_ns, inode,
    ctime_ns) of every file (of a directory: the files in it). A file replaced by another of
    the same size and mtime (``cp -p``, ``touch -r``) still has another inode or ctime."""
    p = path.resolve()
    files = sorted(q for q in p.iterdir() if q.is_file()) if p.is_dir() else [p]
    # names as the OS bytes (a name may hold bytes that are not UTF-8)
    parts = [os.fsencode(p)]
    for f in files:
        st = f.stat()
        stamp = f"|{st.st_size}|{st.st_mtime_ns}|{st.st_ino}|{st.st_ctime_ns}"
        parts.append(b"|" + os.fsencode(f.name) + stamp.encode())
    return b"".join(parts)


def input_key(path: Path) -> str:
    """Hash of the input's identity (``input_identity``) + the tool version."""
    import hashlib

    head = f"{CACHE_FORMAT}|{_tool_version()}|".encode()
    return hashlib.sha256(head + input_identity(path)).hexdigest()[:32]


def session_entry(path: Path) -> Path:
    """The session cache's entry of ``path`` (``ingest.cache``): a directory, holding
    ``meta.json`` once a load of the unchanged input has been saved (``session_saved``)."""
    return cache_root() / input_key(path)


def session_saved(entry: Path) -> bool:
    """Whether the session cache's ``entry`` holds a saved session (``TraceSession.save``
    writes its ``meta.json``; an entry appears whole, by one rename)."""
    return (entry / "meta.json").exists()
