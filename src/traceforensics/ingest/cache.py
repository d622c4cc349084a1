"""Session cache: a re-run on the same unchanged input is near-instant.

The cache lives only in the user cache directory (``$XDG_CACHE_HOME/traceforensics`` or
``~/.cache/traceforensics``), never beside the input. The key is a hash of the input's identity:
absolute path, size and mtime (ns) of every file read, the tool version and a hash of the source
of the ingesters and the model (so a changed reader never serves a session an older one made;
the version number alone does not move between releases). A changed input gets a new key; stale
entries are simply never read again.
"""

from __future__ import annotations

import shutil
import tempfile
from collections.abc import Callable
from pathlib import Path

import polars as pl

from traceforensics.cache_keys import (  # the keys: in a module that imports no polars
    CACHE_FORMAT,
    cache_root,
    input_key,
    session_entry,
    session_saved,
    source_fingerprint,
)
from traceforensics.model.session import DAMAGED_FILE, TraceSession

__all__ = [
    "CACHE_FORMAT",
    "CACHE_SKIPPED",
    "cache_root",
    "cache_skipped",
    "cached_load",
    "input_key",
    "source_fingerprint",
]


def cached_load(path: Path, loader: Callable[[Path], TraceSession]) -> TraceSession:
    """Load ``path`` through the cache: read a saved session if present, else load and save."""
    entry = session_entry(path)
    if session_saved(entry):

        def reload() -> tuple[pl.DataFrame, pl.DataFrame]:
            shutil.rmtree(entry, ignore_errors=True)
            fresh = _saved(entry, loader(path))
            return fresh.events, fresh.args

        try:
            # the tables are read when first needed: a run the analysis cache serves needs
            # only the metadata; a damaged table is then read from the input instead
            # (``require_checks``: an entry written by this code carries its checksums)
            loaded = TraceSession.load(entry, defer=True, fallback=reload, require_checks=True)
            return _as_typed(loaded, path)
        except DAMAGED_FILE:
            shutil.rmtree(entry, ignore_errors=True)
    return _saved(entry, loader(path))


def _saved(entry: Path, session: TraceSession) -> TraceSession:
    """``session``, written to the cache ``entry``. A cache that cannot be written (a full or
    quota-limited file system, a read-only folder) is skipped: nothing is left behind and the
    session carries one warning (``cache_skipped``) instead of the run failing."""
    tmp: Path | None = None
    try:
        entry.parent.mkdir(parents=True, exist_ok=True)
        tmp = Path(tempfile.mkdtemp(prefix=".tmp-", dir=entry.parent))
        session.save(tmp)
        try:
            tmp.rename(entry)
            tmp = None
        except OSError:  # another process won the race; ours is identical
            pass
    # polars reports a write cut short by ENOSPC/EFBIG as its own error, not as OSError
    except (OSError, pl.exceptions.PolarsError) as exc:
        warning = cache_skipped(entry.parent, exc)
        if warning not in session.meta.warnings:
            session.meta.warnings.append(warning)
    finally:
        if tmp is not None:
            shutil.rmtree(tmp, ignore_errors=True)
    return session


def cache_skipped(folder: Path, exc: BaseException) -> str:
    """The one warning of a cache that could not be written (the rule for both caches: the
    session cache here, the analysis cache in ``cli.result_cache``)."""
    # polars does not say why its write failed; an OSError does (No space left, File too large)
    reason = exc.strerror if isinstance(exc, OSError) and exc.strerror else "a write failed"
    return (
        f"{CACHE_SKIPPED} ({reason}) at {folder}; free space there or point "
        "XDG_CACHE_HOME at a writable folder (or pass --no-cache)"
    )


#: The start of ``cache_skipped``'s warning: a run warns once however many writes failed.
CACHE_SKIPPED = "the cache could not be written, this run is not cached"


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
        for d in session.meta.diagnostics:  # their messages are the warnings' texts
            d["message"] = d["message"].replace(old, new)
    return session
