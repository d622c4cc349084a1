"""Analysis cache for ``tf analyze``: a second run on the same unchanged input with the same
options reads the finished analysis instead of recomputing it (the session cache,
``ingest.cache``, already spares the load; on big traces the analysis is then most of a run).

Key: the session cache key of the input (path, size, mtime of every file, the readers' source)
+ the analysis options + a hash of the source of ``ingest``, ``model`` and ``analysis``, so a
changed input, option or analysis rule never serves an old result. Stored as a pickle of the
``Analysis`` without its session under ``$XDG_CACHE_HOME/traceforensics/results`` (never beside
the input), after a head line with the pickle's SHA-256 (``sealed``): an entry whose bytes
changed since it was written is recomputed, never unpickled. The session is the one just
loaded, and the warnings are re-read from it (they quote the path as typed this time). A
session read from the session cache is deferred, so a run served here reads only its
metadata, never its tables, unless a renderer reads them (the terminal report's lead-in note,
figures). Not used with ``--monitor`` or ``--no-cache``. Any failure to read or write the
cache falls back to computing.
"""

from __future__ import annotations

import contextlib
import dataclasses
import functools
import hashlib
import pickle
from collections.abc import Callable
from pathlib import Path
from typing import cast

from traceforensics.analysis.options import AnalysisOptions
from traceforensics.analysis.pipeline import Analysis
from traceforensics.cli.sealed import read_entry, write_entry
from traceforensics.ingest.cache import (
    CACHE_SKIPPED,
    cache_root,
    cache_skipped,
    input_key,
    source_fingerprint,
)
from traceforensics.model.session import TraceSession

#: Bumped when what an entry holds changes (2: the head line with the pickle's SHA-256).
CACHE_FORMAT = "2"


@functools.cache
def _rules_fingerprint() -> str:
    package = Path(__file__).resolve().parents[1]
    return source_fingerprint(package, ("ingest", "model", "analysis"))


def result_key(path: Path, options: AnalysisOptions) -> str:
    """The cache key of analysing ``path`` with ``options`` (see the module docstring)."""
    text = f"{CACHE_FORMAT}|{input_key(path)}|{_rules_fingerprint()}|{options!r}"
    return hashlib.sha256(text.encode()).hexdigest()[:32]


def results_root() -> Path:
    return cache_root().parent / "results"


def cached_analyze(
    path: Path,
    session: TraceSession,
    options: AnalysisOptions,
    run: Callable[[], Analysis],
) -> Analysis:
    """``run()``'s analysis of ``session``, read from the cache when this input and these
    options were analysed before by the same rules; written there otherwise."""
    entry = results_root() / f"{result_key(path, options)}.pkl"
    with contextlib.suppress(Exception):
        stored = _read(entry)
        if isinstance(stored, Analysis) and stored.options == options:
            return dataclasses.replace(
                stored, session=session, warnings=list(session.meta.warnings)
            )
    result = run()
    _save(entry, result)
    return result


def cached_apart(path: str, options: AnalysisOptions, run: Callable[[], Analysis]) -> Analysis:
    """``run()``'s joined analysis of the rank files of directory ``path`` analysed apart
    (``traceforensics.fanout``), from the cache when it was made before by the same rules.
    Stored whole: its session holds no events, only the job's metadata (which quotes the path
    as typed, so the path as typed is part of the key)."""
    key = hashlib.sha256(f"{result_key(Path(path), options)}|apart|{path}".encode()).hexdigest()
    entry = results_root() / f"{key[:32]}.pkl"
    with contextlib.suppress(Exception):
        stored = _read(entry)
        if isinstance(stored, Analysis) and stored.options == options:
            return stored
    result = run()
    _save(entry, result, keep_session=True)
    return result


def _read(entry: Path) -> object:
    """The unpickled entry, after its head line (the pickle's SHA-256, ``sealed``) is checked."""
    head, body = read_entry(entry)
    if head.get("format") != CACHE_FORMAT:
        raise ValueError(f"{entry}: an entry of format {head.get('format')!r}")
    return pickle.loads(body)


def _save(entry: Path, result: Analysis, keep_session: bool = False) -> None:
    """Write ``result`` without its session (the session has its own cache) unless
    ``keep_session``; an unwritable cache never fails the analysis."""
    # (the row count travels: the JSON's ``event_count`` then needs no read of the tables of
    # a session the cache defers, ``TraceSession.deferred``)
    bare = (
        result
        if keep_session
        else dataclasses.replace(
            result, session=cast(TraceSession, None), event_total=result.event_count
        )
    )
    try:
        body = pickle.dumps(bare, protocol=pickle.HIGHEST_PROTOCOL)
        write_entry(entry, body, format=CACHE_FORMAT)
    except OSError as exc:  # a full or read-only cache folder: one warning, as for the session
        if not any(w.startswith(CACHE_SKIPPED) for w in result.warnings):
            result.warnings.append(cache_skipped(entry.parent, exc))
    except (pickle.PicklingError, TypeError, AttributeError):
        pass
