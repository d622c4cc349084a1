"""Ingesters: one subpackage per input format, all ending in ``TraceSession.validate()``.

Importing the package imports no polars (the readers are imported by ``load_path``).
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

from traceforensics.ingest.detect import check_input, sniff_file

if TYPE_CHECKING:
    from traceforensics.model.session import TraceSession


def load_path(path: str | Path, *, use_cache: bool = False) -> TraceSession:
    """Detect the format of ``path`` (file or directory of rank files) and load it.

    With ``use_cache`` a previously loaded session for the same unchanged input is read from the
    user cache directory instead (see ``ingest.cache``).
    """
    p = Path(path)
    check_input(p)
    if use_cache:
        from traceforensics.ingest.cache import cached_load

        return cached_load(p, _load_uncached)
    return _load_uncached(p)


def _load_uncached(p: Path) -> TraceSession:
    # imported here, not above: the package stays light (polars is not imported before the
    # early scan of ``ingest.kineto.early`` starts)
    from traceforensics.ingest.ranksets import directory_set, load_nsys_ranks
    from traceforensics.ingest.suspects import graph_launch_notes, suspect_row_notes

    if p.is_dir():
        fmt, files, notes = directory_set(p)
        if fmt == "nsys":
            from traceforensics.ingest.nsys import load_nsys

            session = load_nsys_ranks(files, load_nsys, notes)
        else:
            from traceforensics.ingest.kineto import load_kineto

            session = load_kineto(files, skip_non_traces=True)
    else:
        fmt = sniff_file(p)
        if fmt == "kineto":
            from traceforensics.ingest.kineto import load_kineto

            session = load_kineto([p])
        elif fmt == "rocprof":
            from traceforensics.ingest.rocprof import load_rocprof

            session = load_rocprof(p)
        else:
            from traceforensics.ingest.nsys import load_nsys

            session = load_nsys(p)
    # what the trace cannot show is said once, the same for every format
    session.meta.warnings.extend(graph_launch_notes(session.events))
    session.meta.warnings.extend(suspect_row_notes(session.events))
    session.validate()
    return session


__all__ = ["load_path"]
