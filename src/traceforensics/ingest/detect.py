"""Input checks and the content rules of format detection (magic bytes, not file names alone).

Which reader a file goes to is ``ingest.readers`` (``sniff_file``: the registry's ``sniff``
rules in order); a directory is a rank set (``ranksets``). Here: ``check_input``, the magic
bytes, and the producer of a Chrome-trace JSON from its first ``HEAD_BYTES`` (of text,
gunzipped).

The producer of a JSON file, first rule that applies:

- a Kineto top-level key (``schemaVersion``, ``deviceProperties``, ``baseTimeNanoseconds``,
  ...): ``kineto`` (libkineto writes ``schemaVersion`` first, so a real trace says it at once);
- ``rocprofiler-sdk-tool``: rocprofv3's own JSON, refused (exit 2) naming it;
- ``process_name`` labels that rocprof writes (``ingest.rocprof.lanes``): ``rocprof``;
- events and not one Kineto category (``cat``) among them: another tool's Chrome trace, refused
  (exit 2) naming what it holds, instead of being read as a trace with no GPU work;
- else ``kineto`` (hand-made and cut traces, no events at all: the Kineto reader says more).
"""

from __future__ import annotations

import os
import re
import stat
import zlib
from pathlib import Path
from typing import Literal

from traceforensics.model.errors import InputError, UnsupportedFormatError

Format = Literal["kineto", "nsys-sqlite", "nsys-rep", "rocprof"]

GZIP_MAGIC = b"\x1f\x8b"
SQLITE_MAGIC = b"SQLite format 3\x00"
NSYS_REP_SUFFIXES = (".nsys-rep", ".qdrep")
KINETO_SUFFIXES = (".json", ".json.gz")
#: Text of a JSON file the producer is told from (gunzipped; a real file says it in its first
#: few hundred bytes, a small hand-made one is read whole).
HEAD_BYTES = 64 * 1024
#: Top-level keys only libkineto writes (docs: /work/shared/reference, section 1.1).
_KINETO_KEYS = (
    b'"schemaVersion"',
    b'"deviceProperties"',
    b'"baseTimeNanoseconds"',
    b'"distributedInfo"',
    b'"traceName"',
    b'"cupti_version"',
    b'"roctracer_version"',
)
_ROCPROF_V3 = b'"rocprofiler-sdk-tool"'
# a metadata event's args with one ``name`` (process_name/thread_name labels)
_LABEL = re.compile(rb'"args"\s*:\s*\{\s*"name"\s*:\s*"((?:[^"\\]|\\.)*)"\s*\}')
_CAT = re.compile(rb'"cat"\s*:\s*"((?:[^"\\]|\\.)*)"')
_PHASE = re.compile(rb'"ph"\s*:\s*"[A-Za-z]"')


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


def json_head(path: Path) -> bytes:
    """The first ``HEAD_BYTES`` of a JSON file's text (gunzipped; less when the file, or the
    part of a damaged gzip stream that inflates, is shorter)."""
    out = bytearray()
    try:
        with path.open("rb") as fh:
            if fh.read(2) != GZIP_MAGIC:
                fh.seek(0)
                return fh.read(HEAD_BYTES)
            fh.seek(0)
            inflate = zlib.decompressobj(wbits=31)
            while len(out) < HEAD_BYTES:
                piece = fh.read(16 * 1024)
                if not piece:
                    break
                out += inflate.decompress(piece, HEAD_BYTES - len(out))
                if inflate.eof:
                    break
    except (OSError, zlib.error, EOFError):  # a damaged file: the reader says what is wrong
        pass
    return bytes(out)


def json_producer(path: Path, head: bytes) -> Format:
    """``kineto`` or ``rocprof`` for a Chrome-trace JSON from its ``head`` (rules in the module
    docstring), or raise ``UnsupportedFormatError`` naming another producer."""
    # the readers' rules, imported here: a command that reads no trace imports no reader
    from traceforensics.ingest.kineto.categories import KIND_BY_CAT, LAUNCH_FLOW_CATS
    from traceforensics.ingest.rocprof.lanes import producer_of

    if any(key in head for key in _KINETO_KEYS):
        return "kineto"
    if _ROCPROF_V3 in head:
        raise UnsupportedFormatError(
            f"{path}: a rocprofv3 (rocprofiler-sdk) JSON file, which tf does not read; give a "
            "rocprof results.json (--hip-trace/--sys-trace), a rocprofv2 --plugin json trace, "
            "or a PyTorch Profiler trace"
        )
    labels = {m.group(1).decode("utf-8", "replace") for m in _LABEL.finditer(head)}
    if producer_of(labels) is not None:
        return "rocprof"
    cats = {m.group(1).decode("utf-8", "replace") for m in _CAT.finditer(head)}
    kineto_cats = frozenset(KIND_BY_CAT) | LAUNCH_FLOW_CATS | {"Trace", "fwdbwd"}
    if _PHASE.search(head) and not cats & kineto_cats:
        what = f"categories {', '.join(sorted(cats)[:3])}" if cats else "no event categories"
        raise UnsupportedFormatError(
            f"{path}: a Chrome trace from another tool ({what}; no PyTorch Profiler keys or "
            "categories, no rocprof lanes); tf reads PyTorch Profiler (Kineto), rocprof and "
            "Nsight Systems traces"
        )
    return "kineto"


def is_rocprof(path: Path) -> bool:
    """Whether ``path`` is a rocprof Chrome trace (``json_producer``); False for anything else,
    unreadable files included (a directory's other files are judged by their own reader)."""
    try:
        return json_producer(path, json_head(path)) == "rocprof"
    except InputError:
        return False


def left_out_note(directory: Path, others: list[Path], what: str) -> list[str]:
    """The note naming the files of a rank directory that are not ``what`` (the first five):
    none when nothing was left out."""
    if not others:
        return []
    names = ", ".join(p.name for p in others[:5]) + (" ..." if len(others) > 5 else "")
    return [f"{directory}: {len(others)} file(s) that are not {what} were left out ({names})"]


#: Rank numbers in file names: ``rank-3``, ``rank_3``, ``rank3``; else ``_3.``.
_RANK_NAME_RES = (
    re.compile(r"rank[-_]?(\d+)", re.IGNORECASE),
    re.compile(r"_(\d+)\."),
)


def rank_from_name(path: Path, *, explicit_only: bool = False) -> int | None:
    """Rank number from a file name like ``rank-3.json.gz`` or ``trace_3.json``. With
    ``explicit_only`` only the ``rank`` spelling counts (a lone file named ``host_12345.json``
    carries a pid, not a rank)."""
    for pattern in _RANK_NAME_RES[:1] if explicit_only else _RANK_NAME_RES:
        match = pattern.search(path.name)
        if match:
            return int(match.group(1))
    return None
