"""``load_kineto``: one Kineto trace, or the rank files of one job, into a session (see the
package docstring for the rules).

Each file is decoded (``decode.Decoded``) by the early-scan child (``early``), else by the
stream, else by the generic reader; its rules then run in polars (``rules.extract``). The
stream and the generic reader are imported only when a file is read here."""

from __future__ import annotations

import gc
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import polars as pl

from traceforensics.ingest.kineto import early
from traceforensics.ingest.kineto import meta as kmeta
from traceforensics.ingest.kineto.decode import Decoded
from traceforensics.ingest.kineto.reader import (
    CUT_NOTE_WORDS,
    TRACE_TRUNCATED,
    RawTrace,
    check_fits,
    read_trace,
)
from traceforensics.ingest.kineto.rules import Extracted, extract
from traceforensics.ingest.kineto.timeconv import TimeValueError
from traceforensics.ingest.progress import report, report_read
from traceforensics.model.errors import (
    CorruptTraceError,
    InputError,
    UnsupportedFormatError,
    not_enough_memory,
)
from traceforensics.model.memory import release_free_memory
from traceforensics.model.schema import empty_args, empty_events
from traceforensics.model.session import InputInfo, TraceMeta, TraceSession

SOURCE_FORMAT = "kineto"
#: Start times above this (ns, ~1973) mean absolute wall-clock epoch time.
_WALL_CLOCK_MIN_NS = 10**17
#: Peak memory of a streamed load per byte of JSON (measured on the tiled ResNet-50 trace: the
#: columns, the event table and one chunk; the generic reader needs ``MEMORY_PER_JSON_BYTE``).
STREAM_MEMORY_PER_JSON_BYTE = 1.5
#: Events converted per batch on the generic (whole-file) path.
_GENERIC_BATCH = 200_000


def read_decoded(path: Path) -> tuple[RawTrace, Decoded]:
    """One file's top-level keys (``RawTrace`` with no events) and its decoded rows: those the
    early scan decoded, else streamed when the file allows it, else read whole by the generic
    reader and decoded a batch at a time (``generic.scanned_events``)."""
    check_fits(path, STREAM_MEMORY_PER_JSON_BYTE)
    scan = early.take(path)  # read while the command imported polars (``early``)
    if scan is not None:  # (the stream is not even imported: ~6 ms)
        report_read(path, scan.read, scan.decoded.events_seen)
        return RawTrace(path=path, top=scan.top, events=[]), scan.decoded
    from traceforensics.ingest.kineto.text import NotStreamableError, stream_events

    decoded = Decoded()
    try:
        top = stream_events(path, decoded)
        release_free_memory()  # the decoded chunks are gone
    except NotStreamableError:
        from traceforensics.ingest.kineto.generic import scanned_events

        raw = read_trace(path)
        decoded = Decoded()
        for i in range(0, len(raw.events), _GENERIC_BATCH):
            decoded.add(scanned_events(raw.events[i : i + _GENERIC_BATCH]))
        raw.events = []
        return raw, decoded
    return RawTrace(path=path, top=top, events=[]), decoded


def load_kineto(paths: Sequence[Path], *, skip_non_traces: bool = False) -> TraceSession:
    """Load one Kineto trace, or several rank files of one job, into a validated session.

    Raises ``InputError`` subclasses (one line naming the file) for unusable input. With
    ``skip_non_traces`` (the files of a directory) a file that is not a trace at all (JSON notes
    beside the traces) is left out with a warning, as long as another file is one; a damaged
    trace is still refused.
    """
    if not paths:
        raise InputError("no Kineto trace files given; pass a trace file or a folder of them")
    # The parsed JSON tree has millions of objects and no cycles: the cyclic GC would scan it
    # again and again while it grows (about half the parse time), so it is paused while loading.
    gc_was_enabled = gc.isenabled()
    gc.disable()
    try:
        return _load(paths, skip_non_traces)
    finally:
        if gc_was_enabled:
            gc.enable()
        release_free_memory()  # the decoded events and their parts are gone now


def _read_all(
    paths: Sequence[Path], skip_non_traces: bool
) -> tuple[list[tuple[RawTrace, Decoded]], list[str]]:
    """Every file's top-level keys and decoded rows, plus a warning naming the files left
    out."""
    read: list[tuple[RawTrace, Decoded]] = []
    skipped: list[UnsupportedFormatError] = []
    for p in paths:
        try:
            read.append(_read(Path(p)))
        except UnsupportedFormatError as exc:
            if not skip_non_traces:
                raise
            skipped.append(exc)
    if not read:
        raise skipped[0]
    if not skipped:
        return read, []
    # the file and what it is, without the advice: the directory's traces were read
    reasons = "; ".join(str(exc).split("; pass ")[0] for exc in skipped)
    return read, [f"left out {len(skipped)} file(s) that are not traces: {reasons}"]


def _load(paths: Sequence[Path], skip_non_traces: bool = False) -> TraceSession:
    read, warnings = _read_all(paths, skip_non_traces)
    raws = [r for r, _ in read]
    # each file's decoded rows are let go as soon as its table is built, not held through the
    # concatenation and the validation (the peak of a 10M-event load)
    pending = [c for _, c in read]
    pending.reverse()  # pop() then takes them in file order
    del read
    ranks, rank_warning, rank_source = kmeta.assign_ranks(
        [r.path for r in raws], [r.top for r in raws]
    )
    warnings += [rank_warning] if rank_warning else []
    frames: list[pl.DataFrame] = []
    arg_frames: list[pl.DataFrame] = []
    inputs: list[InputInfo] = []
    devices = []
    wall: list[bool] = []
    versions: list[str] = []
    extra: dict[str, Any] = {"kineto": {}}
    offset = 0
    coded: list[dict[str, str]] = []  # the diagnostics of the warnings with a code of their own
    for raw, rank in zip(raws, ranks, strict=True):
        warnings.extend(raw.notes)
        coded += [{"code": TRACE_TRUNCATED, "message": n} for n in raw.notes if CUT_NOTE_WORDS in n]
        base = kmeta.base_time_ns(raw.top)
        decoded = pending.pop()
        report(f"building the event table of {raw.path.name} ({decoded.n_rows:,} rows)")
        part, seen = _extract(raw.path, decoded, rank, offset, base), decoded.events_seen
        del decoded
        release_free_memory()  # glibc keeps the lists' pages; polars' allocator cannot use them
        if part.events.height == 0:
            raise CorruptTraceError(
                f"{raw.path}: none of the {seen} events is a usable trace event "
                "(phase X/i with a known category, ts and dur); is this a PyTorch Profiler trace?"
            )
        offset += part.ids_used  # dropped rows leave gaps; ids stay unique across files
        frames.append(part.events)
        arg_frames.append(part.args)
        warnings.extend(part.warnings)
        version = kmeta.format_version(raw.top, part.legacy_categories, part.float_timestamps)
        versions.append(version)
        inputs.append(InputInfo(str(raw.path), SOURCE_FORMAT, rank, version))
        vendor = kmeta.detect_vendor(raw.top, part.runtime_names)
        devices.extend(kmeta.devices_for(raw.top, rank, part.devices_seen, vendor))
        wall.append(_is_wall_clock(part, base))
        extra["kineto"][str(raw.path)] = {
            "rank": rank,
            "array_format": raw.is_array_format,
            "correlation_from_flows": part.flow_filled,
            "base_time_ns": base,
        }
    events = pl.concat(frames, how="vertical") if frames else empty_events()
    args = pl.concat(arg_frames, how="vertical") if arg_frames else empty_args()
    distributed, by_rank = _distributed(raws, ranks)
    if len(by_rank) > 1:
        extra["distributed_by_rank"] = by_rank
    is_wall = bool(wall) and all(wall)
    meta = TraceMeta(
        source_format=SOURCE_FORMAT,
        format_version=versions[0] if len(set(versions)) == 1 else "; ".join(versions),
        inputs=inputs,
        devices=devices,
        distributed={**distributed, "rank_source": rank_source},
        clock_base_ns=0 if is_wall else None,
        clock_is_wall=is_wall,
        warnings=warnings,
        diagnostics=coded,
        extra=extra,
    )
    return TraceSession.from_frames(events, meta, args)


@contextmanager
def _input_errors(path: Path) -> Iterator[None]:
    """Everything that goes wrong reading ``path`` as one ``InputError`` line."""
    try:
        yield
    except TimeValueError as exc:
        raise CorruptTraceError(f"{path}: bad ts/dur value ({exc}); re-export the trace") from exc
    except InputError:
        raise
    except MemoryError as exc:  # a sound trace too big for this process: never "malformed"
        raise not_enough_memory(path, "the load ran out of memory") from exc
    except Exception as exc:
        # Malformed content of a shape no rule foresaw (an id beyond int64, a list where a
        # name should be...): one line for the user rather than a traceback.
        detail = " ".join(f"{type(exc).__name__}: {exc}".split())[:200]
        raise CorruptTraceError(
            f"{path}: malformed trace content ({detail}); re-export the trace"
        ) from exc


def _read(path: Path) -> tuple[RawTrace, Decoded]:
    with _input_errors(path):
        return read_decoded(path)


def _extract(path: Path, decoded: Decoded, rank: int, offset: int, base: int | None) -> Extracted:
    with _input_errors(path):
        return extract(path, decoded, rank, offset, base)


def _is_wall_clock(part: Extracted, base: int | None) -> bool:
    if base is not None:
        return True
    if part.events.height == 0:
        return False
    first = part.events.get_column("start_ns").min()
    return isinstance(first, int) and first > _WALL_CLOCK_MIN_NS


def _distributed(
    raws: list[RawTrace], ranks: list[int]
) -> tuple[dict[str, Any], dict[str, dict[str, Any]]]:
    """``distributedInfo`` of the first file that has one, and every file's by rank."""
    by_rank: dict[str, dict[str, Any]] = {}
    for raw, rank in zip(raws, ranks, strict=True):
        info = raw.top.get("distributedInfo")
        if isinstance(info, dict):
            by_rank[str(rank)] = info
    first = next(iter(by_rank.values()), {})
    return dict(first), by_rank


__all__ = ["load_kineto"]
