"""Nsight Systems files as the ranks of one job (the ``nsys`` rows of ``ingest.readers``).

``rank_files``: the exports (``.sqlite`` files with the SQLite magic) and reports
(``.nsys-rep``/``.qdrep``) of a directory. A report whose export sits beside it (``r0.nsys-rep``
and ``r0.sqlite``) is the same capture and is read once, from the export; other files (JSON
notes, logs) are left out with a note naming them. Exports carry no rank: ranks come from the
file names (``ingest.ranksets.assign_ranks``).

``session_start``: the export's ``TARGET_INFO_SESSION_START_TIME`` (wall ns), on which the
ranks are put on one clock (``ingest.ranksets``); a report is exported first (cached beside it).
"""

from __future__ import annotations

from pathlib import Path

from traceforensics.ingest.detect import NSYS_REP_SUFFIXES, SQLITE_MAGIC, left_out_note
from traceforensics.ingest.nsys.db import ExportDb
from traceforensics.ingest.nsys.export import ensure_sqlite
from traceforensics.ingest.nsys.meta import session_start_ns


def _is_sqlite(path: Path) -> bool:
    try:
        with path.open("rb") as fh:
            return fh.read(len(SQLITE_MAGIC)) == SQLITE_MAGIC
    except OSError:
        return False


def _stem(path: Path) -> str:
    for suffix in NSYS_REP_SUFFIXES:
        if path.name.endswith(suffix):
            return path.name[: -len(suffix)]
    return path.name


def rank_files(directory: Path, files: list[Path]) -> tuple[list[Path], list[str]]:
    """``(exports and reports, notes)`` of ``files`` (a directory's files in name order;
    module docstring); no note when there is no Nsight Systems file."""
    exports = [p for p in files if _is_sqlite(p)]
    exported = {p.with_suffix("").name if p.suffix == ".sqlite" else p.name for p in exports}
    reports = [
        p
        for p in files
        if p.name.endswith(NSYS_REP_SUFFIXES) and _stem(p) not in exported and p not in exports
    ]
    chosen = sorted(exports + reports)
    taken = set(chosen)
    # a report whose export is read instead is not worth a note
    others = [
        p
        for p in files
        if p not in taken and not (p.name.endswith(NSYS_REP_SUFFIXES) and _stem(p) in exported)
    ]
    return chosen, left_out_note(directory, others, "Nsight Systems exports") if chosen else []


def session_start(path: Path) -> int | None:
    """Wall-clock ns of an export's (or a report's) session start; None when it records none.
    ``OSError``/``InputError`` when the file cannot be read or exported."""
    with path.open("rb") as fh:
        is_export = fh.read(len(SQLITE_MAGIC)) == SQLITE_MAGIC
    with ExportDb(path if is_export else ensure_sqlite(path)) as db:
        return session_start_ns(db)


__all__ = ["rank_files", "session_start"]
