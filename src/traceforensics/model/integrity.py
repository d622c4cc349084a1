"""Checksums of the files a session is saved in (``TraceSession.save``), checked before one is
read back: a table whose bytes changed since it was written is never read as the saved one.

Why a checksum of our own: the Parquet pages polars writes (zstd) carry none that polars
checks on reading. 64 bytes flipped in the middle of a cached ``events.parquet`` of the
ResNet-50 trace decoded without an error into other values, and the cached re-run reported
another analysis (its top finding ``untraced`` instead of ``data_loading``), exit 0. A cut file
already failed (no footer); a changed one did not.

The record (in ``meta.json``, ``files``): each file's size in bytes and CRC-32 (zlib's, as 8
hex digits). CRC-32 catches damage and stray edits, not tampering; it reads at several GB/s,
so checking costs a fraction of reading the table (docs/benchmarks.md). A session saved before
the record existed (no ``files`` in its ``meta.json``) is read unchecked.
"""

from __future__ import annotations

import zlib
from pathlib import Path
from typing import Final

from traceforensics.model.errors import CorruptTraceError

#: Bytes read at a time while a file's CRC is computed.
_BLOCK: Final = 1 << 22

#: One file's record: ``{"bytes": size, "crc32": "89abcdef"}``.
FileRecord = dict[str, int | str]


def file_record(path: Path) -> FileRecord:
    """The size (bytes) and CRC-32 of ``path``, as ``meta.json`` records them."""
    crc, size = 0, 0
    buffer = bytearray(_BLOCK)
    view = memoryview(buffer)
    with path.open("rb", buffering=0) as fh:
        while n := fh.readinto(buffer):
            crc = zlib.crc32(view[:n], crc)
            size += n
    return {"bytes": size, "crc32": f"{crc:08x}"}


def check_file(path: Path, record: FileRecord | None) -> None:
    """Raise ``CorruptTraceError`` when ``path`` is not the file ``record`` describes (another
    size, another CRC-32); no record: nothing to check (a session saved without one)."""
    if record is None:
        return
    size = path.stat().st_size
    if size == record.get("bytes") and file_record(path) == record:
        return
    raise CorruptTraceError(
        f"{path}: its bytes do not match the size and checksum meta.json recorded when the "
        "session was saved (damaged or changed since); save the session again"
    )


__all__ = ["FileRecord", "check_file", "file_record"]
