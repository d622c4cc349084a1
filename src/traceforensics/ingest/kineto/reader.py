"""Open one Kineto trace file: gzip or plain bytes, orjson parse, shape checks, one-line errors.

Accepted shapes:
- the Kineto JSON object ``{"schemaVersion": 1, ..., "traceEvents": [...]}``;
- the old Chrome "JSON array" format: a top-level list of events (also when the closing ``]`` is
  missing, which the Chrome trace format allows).

Every failure raises an ``InputError`` subclass whose message names the file:
"<file>: <what is wrong>; <what to do>".
"""

from __future__ import annotations

import json
import zlib
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, BinaryIO, Final

import orjson

from traceforensics.ingest.detect import GZIP_MAGIC
from traceforensics.ingest.kineto.salvage import (
    Salvaged,
    gunzip_prefix,
    gunzipped_size,
    salvage_json,
)
from traceforensics.ingest.progress import report
from traceforensics.model.errors import (
    CorruptTraceError,
    InputError,
    UnsupportedFormatError,
    not_enough_memory,
)
from traceforensics.model.memory import available_memory

_BOM = b"\xef\xbb\xbf"


@dataclass
class RawTrace:
    """One parsed trace file: its top-level keys (without ``traceEvents``) and the event list."""

    path: Path
    top: dict[str, Any]
    events: list[Any]
    is_array_format: bool = False
    notes: list[str] = field(default_factory=list)


#: Read size between progress reports (bytes).
READ_CHUNK = 64 << 20


def _read_error(path: Path, exc: OSError) -> InputError:
    """A file that cannot be read, as one line with what to do."""
    if isinstance(exc, FileNotFoundError):
        return InputError(f"{path}: no such file or directory; check the path")
    if isinstance(exc, IsADirectoryError):
        return InputError(f"{path}: is a directory; pass a trace file")
    if isinstance(exc, PermissionError):
        return InputError(f"{path}: permission denied; make it readable or copy it")
    return InputError(
        f"{path}: cannot read the file ({exc.strerror or exc}); check the path and the disk"
    )


@contextmanager
def reading(path: Path) -> Iterator[BinaryIO]:
    """The file open for reading; a file that cannot be read is one ``InputError`` line."""
    try:
        fh = path.open("rb")
    except OSError as exc:
        raise _read_error(path, exc) from exc
    with fh:
        try:
            yield fh
        except OSError as exc:
            raise _read_error(path, exc) from exc


def _read_reporting(path: Path) -> bytes:
    """The file's bytes, read in chunks with a progress report after each."""
    with reading(path) as fh:
        size = max(path.stat().st_size, 1)
        parts: list[bytes] = []
        done = 0
        while chunk := fh.read(READ_CHUNK):
            parts.append(chunk)
            done += len(chunk)
            report(f"reading {path.name}: {done / 1e6:.0f} of {size / 1e6:.0f} MB")
    return b"".join(parts)


def read_bytes(path: Path) -> tuple[bytes, bool]:
    """``(JSON bytes, cut)``: the file's bytes, gunzipped when it starts with the gzip magic;
    ``cut`` when the gzip stream ends before its end marker. A file that could
    not fit in memory once parsed is refused before anything is read (``check_fits``)."""
    check_fits(path)
    data = _read_reporting(path)
    if data.startswith(GZIP_MAGIC):
        report(f"decompressing {path.name} ({len(data) / 1e6:.0f} MB)")
        try:
            text, cut = gunzip_prefix(data)  # a cut stream: the JSON parse sees the cut
        except zlib.error as exc:
            raise CorruptTraceError(
                f"{path}: the gzip stream is corrupt ({exc}); re-copy or re-export the trace"
            ) from exc
        if cut and not text.strip():  # not "empty": the file has bytes, its stream was cut
            raise CorruptTraceError(
                f"{path}: the gzip stream is cut off after {len(data)} bytes, before any of "
                "its JSON (the job was killed while writing, or the copy was cut short?); "
                "re-copy or re-export the trace"
            )
        return text, cut
    return data, False


def _parse_json(path: Path, data: bytes) -> tuple[Any, list[str]]:
    notes: list[str] = []
    if data.startswith(_BOM):
        data = data[len(_BOM) :]
    if not data.strip():
        raise CorruptTraceError(
            f"{path}: the file is empty; pass a PyTorch Profiler trace (.json/.json.gz)"
        )
    try:
        return orjson.loads(data), notes
    except orjson.JSONDecodeError as exc:
        stripped = data.rstrip()
        # Chrome's array format may omit the closing bracket (a trace cut at process exit).
        if stripped.lstrip().startswith(b"[") and not stripped.endswith(b"]"):
            try:
                value = orjson.loads(stripped.rstrip(b",") + b"]")
            except orjson.JSONDecodeError:
                pass
            else:
                notes.append(f"{path}: JSON array without closing ']' (accepted)")
                return value, notes
        if exc.msg.startswith("unexpected character") and _non_finite_at(data, exc.pos):
            return _parse_with_stdlib(path, data, notes)
        if _is_cut(exc, len(data)) and (found := salvage_json(data)) is not None:
            notes.append(_cut_note(path, found, len(data)))
            return found.value, notes
        raise CorruptTraceError(
            f"{path}: not valid JSON ({exc.msg} at line {exc.lineno} column {exc.colno}); "
            f"{_json_advice(exc, len(data))}"
        ) from exc


def _is_cut(exc: orjson.JSONDecodeError, size: int) -> bool:
    """Whether the JSON error is the data ending early (not damage in the middle)."""
    return exc.pos >= size - 1 or "end of data" in exc.msg


#: The words of the warning of a trace cut off mid-write (``_cut_note``): ``load`` codes the
#: warnings holding them ``trace_truncated`` (``TraceMeta.diagnostics``).
CUT_NOTE_WORDS = ": the trace is cut off after "
TRACE_TRUNCATED = "trace_truncated"


def _cut_note(path: Path, found: Salvaged, size: int) -> str:
    value = found.value
    events = value.get("traceEvents") if isinstance(value, dict) else value
    n = len(events) if isinstance(events, list) else 0
    return (
        f"{path}{CUT_NOTE_WORDS}{size} bytes of JSON (a job killed while "
        f"writing?); analysed the {n} complete events before the cut ({found.kept_bytes} "
        "bytes): the end of the run is missing"
    )


def _json_advice(exc: orjson.JSONDecodeError, size: int) -> str:
    """What to do about a JSON error, by what it is (not always "truncated")."""
    if "UTF-8" in exc.msg or "surrogate" in exc.msg:
        return (
            "the file holds text that is not UTF-8 (a binary field or a broken write); re-export it"
        )
    if "depth" in exc.msg:
        return (
            "it nests deeper than any profiler writes: not a trace; pass a PyTorch Profiler trace"
        )
    if _is_cut(exc, size):
        return "the trace is truncated (the job was killed while writing?); re-copy or re-export it"
    return "the trace is damaged; re-export it"


def _non_finite_at(data: bytes, pos: int) -> bool:
    """Whether the JSON error at ``pos`` is a NaN/Infinity literal (valid for Python's json)."""
    return data[pos : pos + 3] in (b"NaN", b"Inf") or data[pos : pos + 4] == b"-Inf"


def _parse_with_stdlib(path: Path, data: bytes, notes: list[str]) -> tuple[Any, list[str]]:
    """Parse JSON holding NaN/Infinity literals (written by some profilers) with the stdlib."""
    try:
        value = json.loads(data)
    except (ValueError, RecursionError) as exc:
        raise CorruptTraceError(f"{path}: not valid JSON ({exc}); re-export it") from exc
    notes.append(f"{path}: NaN/Infinity literals in the JSON (accepted; such values are unknown)")
    return value, notes


#: Memory a trace needs once parsed, per byte of JSON (measured: the ResNet-50 trace, 35 MB of
#: JSON, peaks at about 6x its size).
MEMORY_PER_JSON_BYTE: Final = 6


def check_fits(path: Path, per_byte: float = MEMORY_PER_JSON_BYTE) -> None:
    """Refuse, before reading, a trace whose parsed form would not fit in the memory this
    process may use (``model.memory.available_memory``: the machine's, its cgroup's, its
    address-space limit): a crash (or a silent swap storm) is never the answer to a big file.

    A gzip file's size is first estimated from its trailer (the size mod 2^32) or 5x the
    compressed size; a cut file's last 4 bytes are not a trailer, so before refusing on that
    estimate the stream is decompressed (and discarded) to count its real size."""
    free = available_memory()
    if free is None:
        return
    try:
        size = path.stat().st_size
        with path.open("rb") as fh:
            head = fh.read(2)
            gzipped = head == GZIP_MAGIC and size >= 4
            if gzipped:
                fh.seek(-4, 2)
                size = max(int.from_bytes(fh.read(4), "little"), 5 * size)
        if gzipped and size * per_byte > free:
            size = gunzipped_size(path)
    except (OSError, zlib.error):
        return  # the read itself reports it
    need = int(size * per_byte)
    if need > free:
        gib = 1 << 30
        raise not_enough_memory(
            path,
            f"{size / gib:.1f} GiB of JSON needs about {need / gib:.0f} GiB of memory to load, "
            f"{free / gib:.1f} GiB are available to this process",
        )


def read_trace(path: Path) -> RawTrace:
    """Read and shape-check one trace file. Raises ``InputError`` subclasses only."""
    data, cut = read_bytes(path)
    report(f"decoding {len(data) / 1e6:.0f} MB of JSON")
    try:
        value, notes = _parse_json(path, data)
    except CorruptTraceError as exc:
        if cut and "truncated" in str(exc):  # say where the cut is: in the gzip stream
            raise CorruptTraceError(
                f"{path}: the gzip stream is cut off before the first complete event (the job "
                "was killed while writing?); re-copy or re-export the trace"
            ) from exc
        raise
    if cut and not notes:  # the JSON closed before the cut: only the gzip trailer is missing
        notes.append(f"{path}: the gzip stream ends early, after the complete JSON (accepted)")
    if isinstance(value, list):
        events, top, array_format = value, {}, True
    elif isinstance(value, dict):
        listed = value.get("traceEvents")
        if not isinstance(listed, list):
            raise UnsupportedFormatError(
                f"{path}: JSON but not a trace (no 'traceEvents' list); pass a PyTorch "
                "Profiler trace written by torch.profiler (export_chrome_trace or "
                "tensorboard_trace_handler)"
            )
        events = listed
        top = {k: v for k, v in value.items() if k != "traceEvents"}
        array_format = False
    else:
        raise UnsupportedFormatError(
            f"{path}: JSON but not a trace (top level is {type(value).__name__}); pass a "
            "PyTorch Profiler trace (.json/.json.gz)"
        )
    if not events:
        raise CorruptTraceError(
            f"{path}: the trace has no events (empty 'traceEvents'); the profiler recorded "
            "nothing — check the schedule/active steps and re-record"
        )
    if not any(type(e) is dict for e in events):
        raise UnsupportedFormatError(
            f"{path}: JSON but not a trace (no event objects in the event list); pass a "
            "PyTorch Profiler trace (.json/.json.gz)"
        )
    return RawTrace(path=path, top=top, events=events, is_array_format=array_format, notes=notes)
