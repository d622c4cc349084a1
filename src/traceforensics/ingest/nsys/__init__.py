"""Nsight Systems input: SQLite exports (schema 2.x to 3.28) and ``.nsys-rep`` reports.

See ``docs/nsys.md`` for what is mapped and which schema variants are handled.
"""

from __future__ import annotations

from pathlib import Path

from traceforensics.ingest.nsys.db import connect
from traceforensics.ingest.nsys.export import ensure_sqlite
from traceforensics.ingest.nsys.loader import load_sqlite
from traceforensics.model.errors import UnsupportedFormatError
from traceforensics.model.session import TraceSession

SQLITE_MAGIC = b"SQLite format 3\x00"
REP_SUFFIXES = (".nsys-rep", ".qdrep")


def load_nsys(path: Path) -> TraceSession:
    """Load an ``.sqlite`` export, or export a ``.nsys-rep``/``.qdrep`` first (cached)."""
    path = Path(path)
    with path.open("rb") as fh:
        head = fh.read(len(SQLITE_MAGIC))
    if head == SQLITE_MAGIC:
        return load_sqlite(path)
    if path.name.endswith(REP_SUFFIXES):
        exported = ensure_sqlite(path)
        return load_sqlite(exported, input_format="nsys-rep", display=path)
    raise UnsupportedFormatError(
        f"{path}: not an Nsight Systems file (neither a SQLite export nor a .nsys-rep); pass "
        "a .sqlite export or a .nsys-rep report"
    )


__all__ = ["connect", "load_nsys"]
