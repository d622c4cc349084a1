"""Session cache: a re-run on the same unchanged input is near-instant.

The cache lives only in the user cache directory (``$XDG_CACHE_HOME/traceforensics`` or
``~/.cache/traceforensics``), never beside the input. The key is a hash of the input's identity:
absolute path, size and mtime (ns) of every file read, the tool version and a hash of the source
of the ingesters and the model (so a changed reader never serves a session an older one made;
the version number alone does not move between releases). A changed input gets a new key; stale
entries are simply never read again.
"""

from __future__ import annotations

import functools
import hashlib
import os
import shutil
import tempfile
from collections.abc import Callable
from pathlib import Path

import polars as pl

from traceforensics.model.session import DAMAGED_FILE, TraceSession

CACHE_FORMAT = "1"


def cache_root() -> Path:
    """The directory holding cached sessions (respects ``XDG_CACHE_HOME``)."""
    base = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(base) / "traceforensics" / "sessions"


@functools.cache
def _tool_version() -> str:
    from traceforensics._version import __version__

    return f"{__version__}+{source_fingerprint(Path(__file__).resolve().parents[1])}"


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
    """Hash of (path, size, mtime_ns) of the input (every file of a directory) + tool version."""
    p = path.resolve()
    files = sorted(q for q in p.iterdir() if q.is_file()) if p.is_dir() else [p]
    h = hashlib.sha256()
    # names as the OS bytes (a name may hold bytes that are not UTF-8)
    h.update(f"{CACHE_FORMAT}|{_tool_version()}|".encode() + os.fsencode(p))
    for f in files:
        st = f.stat()
        h.update(b"|" + os.fsencode(f.name) + f"|{st.st_size}|{st.st_mtime_ns}".encode())
    return h.hexdigest()[:32]


def cached_load(path: Path, loader: Callable[[Path], TraceSession]) -> TraceSession:
    """Load ``path`` through the cache: read a saved session if present, else load and save."""
    entry = cache_root() / input_key(path)
    if (entry / "meta.json").exists():

        def reload() -> tuple[pl.DataFrame, pl.DataFrame]:
            shutil.rmtree(entry, ignore_errors=True)
            fresh = _saved(entry, loader(path))
            return fresh.events, fresh.args

        try:
            # the tables are read when first needed: a run the analysis cache serves needs
            # only the metadata; a damaged table is then read from the input instead
            return _as_typed(TraceSession.load(entry, defer=True, fallback=reload), path)
        except DAMAGED_FILE:
            shutil.rmtree(entry, ignore_errors=True)
    return _saved(entry, loader(path))


def _saved(entry: Path, session: TraceSession) -> TraceSession:
    """``session``, written to the cache ``entry`` (an unwritable cache is skipped)."""
    try:
        entry.parent.mkdir(parents=True, exist_ok=True)
        tmp = Path(tempfile.mkdtemp(prefix=".tmp-", dir=entry.parent))
        session.save(tmp)
        try:
            tmp.rename(entry)
        except OSError:  # another process won the race; ours is identical
            shutil.rmtree(tmp, ignore_errors=True)
    except OSError:
        pass  # an unwritable cache must never fail the analysis
    return session


def _as_typed(session: TraceSession, path: Path) -> TraceSession:
    """A cached session named as the user typed ``path`` this time: the cache key is the
    resolved path, so an earlier run may have typed it differently (``./a.json``, an absolute
    path, a symlink). Input paths and the warnings that quote them are rewritten."""
    inputs = session.meta.inputs
    if not inputs:
        return session
    old_first = Path(inputs[0].path)
    if path.is_dir():
        old, new = str(old_first.parent), str(path)
        for info in inputs:
            info.path = str(path / Path(info.path).name)
    else:
        old, new = inputs[0].path, str(path)
        inputs[0].path = new
    if old != new:
        session.meta.warnings = [w.replace(old, new) for w in session.meta.warnings]
    return session
