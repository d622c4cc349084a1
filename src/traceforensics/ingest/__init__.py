"""Ingesters: one subpackage per input format, all ending in ``TraceSession.validate()``.

Importing the package imports no polars (the readers are imported by ``load_path``).
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

from traceforensics.ingest.detect import check_input

if TYPE_CHECKING:
    from traceforensics.model.session import TraceSession


def load_path(path: str | Path, *, use_cache: bool = False) -> TraceSession:
    """Detect the format of ``path`` (file or directory of rank files) and load it.

    With ``use_cache`` a previously loaded session for the same unchanged input is read from the
    user cache directory instead (``traceforensics.cache``).
    """
    p = Path(path)
    check_input(p)
    if use_cache:
        from traceforensics.cache import cached_session

        return cached_session(p, _load_uncached)
    return _load_uncached(p)


def _load_uncached(p: Path) -> TraceSession:
    # imported here, not above: the package stays light (no polars before a reader is needed)
    from traceforensics.ingest.ranksets import load_directory
    from traceforensics.ingest.readers import reader_of
    from traceforensics.ingest.suspects import graph_launch_notes, suspect_row_notes

    session = load_directory(p) if p.is_dir() else reader_of(p).load(p)
    # what the trace cannot show is said once, the same for every format
    session.meta.warnings.extend(graph_launch_notes(session.events))
    session.meta.warnings.extend(suspect_row_notes(session.events))
    session.validate()
    return session


__all__ = ["load_path"]
