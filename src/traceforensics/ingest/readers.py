"""The reader registry: every trace format ``tf`` reads, in one list.

A ``Reader`` names a format (the ``format`` of ``InputInfo`` and ``detect.Format``), says from
a file's first bytes whether the file is one (``sniff``) and loads one file (``load``).
Detection (``sniff_file``), the loads of ``ingest.load_path``, the rank directories
(``ingest.ranksets``) and the fan-out (``fanout``) read this list; a new format is its module
and one line here. ``sniff`` is asked in list order, first yes wins::

    nsys-sqlite  SQLite magic
    kineto       a Chrome-trace JSON (gzip or text) with Kineto keys or categories
    rocprof      a Chrome-trace JSON with rocprof's lanes
    nsys-rep     a .nsys-rep / .qdrep name (exported with ``nsys`` first)

A directory is read as the ranks of one job through the rows' rank-set fields (all optional;
rows with the same ``rank_set`` make one set, whose hooks are those of its first row; the
first set, in list order, with files in the directory is read):

- ``rank_set``: the set's name (None: such files are not read as ranks);
- ``members(directory, files)``: the set's files among the directory's (name order) and notes
  on those left out; may refuse the directory (``InputError``). Default: the files that
  ``sniff`` as a row of the set, the others named in a note;
- ``rank_of(path)``: a file's rank from its own metadata or name (None: unknown). Default: the
  file-name rule (``detect.rank_from_name``); unknown or colliding ranks fall back to
  positions in name order (``ranksets.assign_ranks``);
- ``clock_start(path)``: wall ns of the file's session start, read before loading (the
  fan-out shifts each rank by it before analysing); the set is put on its earliest start, and
  ``load`` must give the same value as ``meta.clock_base_ns``. None: ranks are not shifted;
- ``load_set(files)``: the format reads the whole set itself, ranks and clock included
  (Kineto: each file's ``distributedInfo``, settled across the set; files that are not traces
  left out); the fan-out then takes each file's own rank and settles them after.

A JSON file from another tool is refused by ``detect.json_producer`` (exit 2, naming it).
Monitoring logs (``--monitor``) are another input, aligned with a trace, and keep their own
sniffing (``ingest.monitor``). The loaders are imported on first use: importing this module
imports no polars.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from traceforensics.ingest.detect import (
    GZIP_MAGIC,
    NSYS_REP_SUFFIXES,
    SQLITE_MAGIC,
    Format,
    json_head,
    json_producer,
)
from traceforensics.ingest.kineto import rank_files
from traceforensics.model.errors import InputError, UnsupportedFormatError

if TYPE_CHECKING:
    from traceforensics.model.session import TraceSession


@dataclass(frozen=True)
class Reader:
    """One input format: ``sniff(path, head)`` (``head``: the file's first 64 bytes) says
    whether ``path`` is one; ``load(path)`` reads it; the rest say how its files make the
    ranks of a directory (module docstring). Rows are pickled to fan-out workers: their
    functions are module-level ones, not lambdas."""

    name: Format
    sniff: Callable[[Path, bytes], bool]
    load: Callable[[Path], TraceSession]
    rank_set: str | None = None
    members: Callable[[Path, list[Path]], tuple[list[Path], list[str]]] | None = None
    rank_of: Callable[[Path], int | None] | None = None
    clock_start: Callable[[Path], int | None] | None = None
    load_set: Callable[[list[Path]], TraceSession] | None = None


def _is_json(path: Path, head: bytes) -> bool:
    """gzip (whatever the name), else JSON text not named as an nsys report."""
    if head.startswith(GZIP_MAGIC):
        return True
    text = head.lstrip(b"\xef\xbb\xbf \t\r\n")[:1] in (b"{", b"[")
    return text and not path.name.endswith(NSYS_REP_SUFFIXES)


def _is_sqlite(_: Path, head: bytes) -> bool:
    return head.startswith(SQLITE_MAGIC)


def _is_report(path: Path, _: bytes) -> bool:
    return path.name.endswith(NSYS_REP_SUFFIXES)


def _load_kineto(path: Path) -> TraceSession:
    from traceforensics.ingest.kineto import load_kineto

    return load_kineto([path])


def _load_nsys(path: Path) -> TraceSession:
    from traceforensics.ingest.nsys import load_nsys

    return load_nsys(path)


def _load_rocprof(path: Path) -> TraceSession:
    from traceforensics.ingest.rocprof import load_rocprof

    return load_rocprof(path)


def _load_kineto_set(paths: list[Path]) -> TraceSession:
    from traceforensics.ingest.kineto import load_kineto

    return load_kineto(paths, skip_non_traces=True)


def _nsys_members(directory: Path, files: list[Path]) -> tuple[list[Path], list[str]]:
    from traceforensics.ingest.nsys.ranks import rank_files

    return rank_files(directory, files)


def _nsys_start(path: Path) -> int | None:
    from traceforensics.ingest.nsys.ranks import session_start

    return session_start(path)


def _is_kineto(path: Path, head: bytes) -> bool:
    return _is_json(path, head) and json_producer(path, json_head(path)) == "kineto"


def _is_rocprof(path: Path, head: bytes) -> bool:
    return _is_json(path, head) and json_producer(path, json_head(path)) == "rocprof"


READERS: list[Reader] = [
    Reader("nsys-sqlite", _is_sqlite, _load_nsys, "nsys", _nsys_members, clock_start=_nsys_start),
    Reader("kineto", _is_kineto, _load_kineto, "kineto", rank_files, load_set=_load_kineto_set),
    Reader("rocprof", _is_rocprof, _load_rocprof),
    Reader("nsys-rep", _is_report, _load_nsys, "nsys", _nsys_members, clock_start=_nsys_start),
]


def reader_of(path: Path) -> Reader:
    """The reader of one regular file (the first whose ``sniff`` says yes), or raise
    ``InputError``."""
    try:
        with path.open("rb") as fh:
            head = fh.read(64)
    except PermissionError as exc:
        raise InputError(f"{path}: permission denied; make it readable or copy it") from exc
    except IsADirectoryError as exc:  # pragma: no cover - callers check first
        raise InputError(f"{path}: is a directory; pass a trace file") from exc
    if not head:
        raise UnsupportedFormatError(
            f"{path}: the file is empty; pass a PyTorch Profiler trace (.json/.json.gz) "
            "or an Nsight Systems export (.sqlite/.nsys-rep)"
        )
    for reader in READERS:
        if reader.sniff(path, head):
            return reader
    raise UnsupportedFormatError(
        f"{path}: not a recognised trace (neither JSON, gzip, SQLite nor .nsys-rep); pass a "
        "PyTorch Profiler trace (.json/.json.gz) or an Nsight Systems export (.sqlite/.nsys-rep)"
    )


def sniff_file(path: Path) -> Format:
    """The format of one regular file (``reader_of``), or raise ``InputError``."""
    return reader_of(path).name


def reader_named(name: str) -> Reader:
    """The reader of format ``name`` (``KeyError`` for none)."""
    for reader in READERS:
        if reader.name == name:
            return reader
    raise KeyError(name)


def rank_sets() -> list[Reader]:
    """The first row of each rank set, in list order: the one whose hooks the set uses."""
    firsts: dict[str, Reader] = {}
    for reader in READERS:
        if reader.rank_set is not None:
            firsts.setdefault(reader.rank_set, reader)
    return list(firsts.values())


def set_reader(name: str) -> Reader:
    """The row of rank set ``name`` (``rank_sets``; ``KeyError`` for none)."""
    for reader in rank_sets():
        if reader.rank_set == name:
            return reader
    raise KeyError(name)


def register(reader: Reader) -> None:
    """Add ``reader`` at the end of the list unless a row of its name is there: a fan-out
    worker process starts with the built-in list, and its task names the set's row."""
    if all(r.name != reader.name for r in READERS):
        READERS.append(reader)


__all__ = [
    "READERS",
    "Reader",
    "rank_sets",
    "reader_named",
    "reader_of",
    "register",
    "set_reader",
    "sniff_file",
]
