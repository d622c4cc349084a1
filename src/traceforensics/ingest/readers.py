"""The reader registry: every trace format ``tf`` reads, in one list.

A ``Reader`` names a format (the ``format`` of ``InputInfo`` and ``detect.Format``), says from
a file's first bytes whether the file is one (``sniff``), loads one file (``load``) and names
the rank set its files join in a directory (``rank_set``: files of one set are read as the
ranks of one job, ``ingest.ranksets``; None: such files are not read as ranks). Detection
(``sniff_file``), the loads of ``ingest.load_path`` and the rank directories
(``ranksets``, and through them ``fanout``) read this list; a new format is its module and
one line here. ``sniff`` is asked in list order, first yes wins::

    nsys-sqlite  SQLite magic
    kineto       a Chrome-trace JSON (gzip or text) with Kineto keys or categories
    rocprof      a Chrome-trace JSON with rocprof's lanes
    nsys-rep     a .nsys-rep / .qdrep name (exported with ``nsys`` first)

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
from traceforensics.model.errors import InputError, UnsupportedFormatError

if TYPE_CHECKING:
    from traceforensics.model.session import TraceSession


@dataclass(frozen=True)
class Reader:
    """One input format: ``sniff(path, head)`` (``head``: the file's first 64 bytes) says
    whether ``path`` is one; ``load(path)`` reads it; ``rank_set`` names the rank set of a
    directory its files join."""

    name: Format
    sniff: Callable[[Path, bytes], bool]
    load: Callable[[Path], TraceSession]
    rank_set: str | None


def _is_json(path: Path, head: bytes) -> bool:
    """gzip (whatever the name), else JSON text not named as an nsys report."""
    if head.startswith(GZIP_MAGIC):
        return True
    text = head.lstrip(b"\xef\xbb\xbf \t\r\n")[:1] in (b"{", b"[")
    return text and not path.name.endswith(NSYS_REP_SUFFIXES)


def _producer(name: Format) -> Callable[[Path, bytes], bool]:
    def sniff(path: Path, head: bytes) -> bool:
        return _is_json(path, head) and json_producer(path, json_head(path)) == name

    return sniff


def _load_kineto(path: Path) -> TraceSession:
    from traceforensics.ingest.kineto import load_kineto

    return load_kineto([path])


def _load_nsys(path: Path) -> TraceSession:
    from traceforensics.ingest.nsys import load_nsys

    return load_nsys(path)


def _load_rocprof(path: Path) -> TraceSession:
    from traceforensics.ingest.rocprof import load_rocprof

    return load_rocprof(path)


READERS: list[Reader] = [
    Reader("nsys-sqlite", lambda _, head: head.startswith(SQLITE_MAGIC), _load_nsys, "nsys"),
    Reader("kineto", _producer("kineto"), _load_kineto, "kineto"),
    Reader("rocprof", _producer("rocprof"), _load_rocprof, None),
    Reader("nsys-rep", lambda p, _: p.name.endswith(NSYS_REP_SUFFIXES), _load_nsys, "nsys"),
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


__all__ = ["READERS", "Reader", "reader_named", "reader_of", "sniff_file"]
