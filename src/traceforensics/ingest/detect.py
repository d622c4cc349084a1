"""Input format detection by content (magic bytes), not by file name alone.

Rules, in order:
- a directory: a rank set (``ranksets``): its Nsight Systems exports, else its Kineto files;
- gzip magic ``1f 8b``: a gzipped Kineto JSON;
- SQLite magic ``SQLite format 3\\0``: an Nsight Systems export;
- a ``.nsys-rep``/``.qdrep`` name: an Nsight Systems report (needs ``nsys`` to export);
- first non-blank byte ``{`` or ``[``: Kineto/Chrome JSON.
"""

from __future__ import annotations

import os
import stat
from pathlib import Path
from typing import Literal

from traceforensics.model.errors import InputError, UnsupportedFormatError

Format = Literal["kineto", "nsys-sqlite", "nsys-rep"]

GZIP_MAGIC = b"\x1f\x8b"
SQLITE_MAGIC = b"SQLite format 3\x00"
NSYS_REP_SUFFIXES = (".nsys-rep", ".qdrep")
KINETO_SUFFIXES = (".json", ".json.gz")


def check_input(p: Path) -> None:
    """Raise ``InputError`` (what is wrong, what to do) unless ``p`` is a readable regular file
    or directory; never opens it, so a FIFO or device cannot block the process."""
    try:
        mode = p.stat().st_mode
    except FileNotFoundError:
        broken = p.is_symlink()
        what = "a broken symbolic link" if broken else "no such file or directory"
        raise InputError(f"{p}: {what}; check the path") from None
    except OSError as exc:  # too long a name, a symlink loop, no permission on a parent
        raise InputError(f"{p}: cannot open ({exc.strerror}); check the path") from None
    if not (stat.S_ISREG(mode) or stat.S_ISDIR(mode)):
        raise InputError(
            f"{p}: not a regular file (a pipe, socket or device); give a trace file or a "
            "directory of rank files"
        )
    # (the path's own permission: click is told not to check it, so this message is the one)
    if not os.access(p, os.R_OK | (os.X_OK if stat.S_ISDIR(mode) else 0)):
        raise InputError(f"{p}: permission denied; make it readable or copy it")


def sniff_file(path: Path) -> Format:
    """Return the format of one regular file, or raise ``InputError``."""
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
    if head.startswith(SQLITE_MAGIC):
        return "nsys-sqlite"
    if head.startswith(GZIP_MAGIC):
        return "kineto"
    if path.name.endswith(NSYS_REP_SUFFIXES):
        return "nsys-rep"
    stripped = head.lstrip(b"\xef\xbb\xbf \t\r\n")
    if stripped[:1] in (b"{", b"["):
        return "kineto"
    raise UnsupportedFormatError(
        f"{path}: not a recognised trace (neither JSON, gzip, SQLite nor .nsys-rep); pass a "
        "PyTorch Profiler trace (.json/.json.gz) or an Nsight Systems export (.sqlite/.nsys-rep)"
    )


def json_size_estimate(path: Path) -> int:
    """Bytes of JSON in the file (0 when it cannot be read): its size; for gzip the larger of
    the size its trailer records (the last member's, modulo 4 GiB: a multi-member or huge file
    can make it small) and 8x the file (text compresses ~8-10x; a trace often ~30x)."""
    try:
        size = path.stat().st_size
        with path.open("rb") as fh:
            if fh.read(2) != GZIP_MAGIC:
                return size
            fh.seek(-4, os.SEEK_END)
            trailer = int.from_bytes(fh.read(4), "little")
    except OSError:
        return 0
    return max(trailer, size * 8)
