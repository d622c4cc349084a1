"""Rank sets: a directory of per-rank (or per-node) traces read as one multi-rank session.

Which files a directory holds, first rule that applies:

- Nsight Systems exports (``.sqlite`` files with the SQLite magic, ``.nsys-rep``/``.qdrep``
  reports): an nsys rank set. A report whose export sits beside it (``r0.nsys-rep`` and
  ``r0.sqlite``) is the same capture and is read once, from the export. Other files (JSON
  notes, logs) are left out with a warning naming them.
- else every ``*.json``/``*.json.gz``: a Kineto rank set (``ingest.kineto``).

Rank of an nsys file: a number in its name (``rank-3``, ``rank_3``, ``rank3``; ``..._3.`` as
well when several files are loaded), else its position in name order; colliding numbers fall
back to positions with a warning. The output says which rule gave the ranks
(``meta.distributed["rank_source"]``).

Clock: an export's times are ns since its own session start, and the start is recorded in
wall-clock ns (``TARGET_INFO_SESSION_START_TIME``). Ranks are put on one clock by shifting each
by its session start minus the earliest one::

    rank 0 export   |0 ---- t ---->            session start S0 (wall ns)
    rank 1 export        |0 ---- t ---->       session start S1 = S0 + d
    merged          |0 ---- t ---->
                         |d + t ---->          rank 1 shifted by d = S1 - S0

which is exact on one host (one clock) and as good as the hosts' clock sync across hosts; the
shifts are reported (``meta.distributed["clock_shift_ns"]``). An export without a session
start is not shifted (with a warning).
"""

from __future__ import annotations

import re
from collections.abc import Callable, Sequence
from dataclasses import replace
from pathlib import Path

import polars as pl

from traceforensics.ingest.detect import (
    KINETO_SUFFIXES,
    NSYS_REP_SUFFIXES,
    SQLITE_MAGIC,
    is_rocprof,
)
from traceforensics.model.errors import InputError
from traceforensics.model.session import TraceMeta, TraceSession

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


def _is_sqlite(path: Path) -> bool:
    try:
        with path.open("rb") as fh:
            return fh.read(len(SQLITE_MAGIC)) == SQLITE_MAGIC
    except OSError:
        return False


def nsys_files(directory: Path) -> tuple[list[Path], list[Path]]:
    """``(nsys exports and reports, other files)`` of a directory (not recursive), sorted by
    name; a report whose ``.sqlite`` export sits beside it is left out (the same capture)."""
    files = sorted(p for p in directory.iterdir() if p.is_file())
    exports = [p for p in files if _is_sqlite(p)]
    exported = {p.with_suffix("").name if p.suffix == ".sqlite" else p.name for p in exports}
    reports = [
        p
        for p in files
        if p.name.endswith(NSYS_REP_SUFFIXES) and _stem(p) not in exported and p not in exports
    ]
    chosen = sorted(exports + reports)
    taken = set(chosen)
    return chosen, [p for p in files if p not in taken and not _is_companion(p, exported)]


def _stem(path: Path) -> str:
    for suffix in NSYS_REP_SUFFIXES:
        if path.name.endswith(suffix):
            return path.name[: -len(suffix)]
    return path.name


def _is_companion(path: Path, exported: set[str]) -> bool:
    """A report whose export is read instead: not worth a warning."""
    return path.name.endswith(NSYS_REP_SUFFIXES) and _stem(path) in exported


def assign_ranks(paths: Sequence[Path]) -> tuple[list[int], str, str]:
    """``(rank per file, how they were found, warning or '')`` for files without rank
    metadata of their own (nsys exports): file-name numbers, else positions."""
    found = [rank_from_name(p, explicit_only=len(paths) == 1) for p in paths]
    if all(r is not None for r in found):
        ranks = [int(r) for r in found if r is not None]
        if len(set(ranks)) == len(ranks):
            return ranks, "file name", ""
        return (
            list(range(len(paths))),
            "file order",
            (
                f"rank numbers {ranks} in the file names collide; ranks were assigned in file "
                "name order instead"
            ),
        )
    return list(range(len(paths))), "file order", ""


def load_nsys_ranks(
    paths: Sequence[Path], load_one: Callable[[Path], TraceSession], notes: Sequence[str] = ()
) -> TraceSession:
    """Load each export with ``load_one`` and merge them into one session (module docstring):
    ``rank`` from ``assign_ranks``, times shifted onto the earliest session start, event ids
    renumbered in rank order."""
    ranks, source, warning = assign_ranks(paths)
    order = sorted(range(len(paths)), key=lambda i: ranks[i])
    sessions = [(ranks[i], load_one(paths[i])) for i in order]
    warnings = list(notes) + ([warning] if warning else [])
    return merge_sessions(sessions, source, warnings)


def clock_shifts(starts: Sequence[int | None]) -> tuple[int | None, list[int]]:
    """``(earliest session start, shift of each file onto it)`` (module docstring); a file
    without a session start is not shifted. ``fanout`` shifts ranks analysed apart by the same
    rule, so both paths give the same absolute ns."""
    known = [s for s in starts if s is not None]
    origin = min(known) if known else None
    return origin, [0 if s is None or origin is None else s - origin for s in starts]


def on_job_clock(session: TraceSession, rank: int, shift: int) -> TraceSession:
    """One rank's session as rank ``rank`` of the job, its times shifted by ``shift`` ns onto
    the job's clock; its metadata keeps its own session start (``clock_base_ns``)."""
    events = session.events.with_columns(
        (pl.col("start_ns") + shift).alias("start_ns"),
        pl.lit(rank, dtype=pl.Int32()).alias("rank"),
    )
    meta = replace(
        session.meta,
        inputs=[replace(i, rank=rank) for i in session.meta.inputs],
        devices=[replace(d, rank=rank) for d in session.meta.devices],
    )
    return TraceSession(events, meta, session.args)


def merge_sessions(
    sessions: Sequence[tuple[int, TraceSession]], rank_source: str, warnings: list[str]
) -> TraceSession:
    """One session of several single-rank ones (``(rank, session)`` in rank order)."""
    starts = [s.meta.clock_base_ns for _, s in sessions]
    origin, shifts = clock_shifts(starts)
    if origin is not None and None in starts:
        missing = [str(s.meta.inputs[0].path) for _, s in sessions if s.meta.clock_base_ns is None]
        warnings.append(
            f"{', '.join(missing)}: no session start time, so these ranks could not be put on "
            "the others' clock"
        )
    frames, arg_frames, devices, inputs = [], [], [], []
    offset = 0
    for (rank, session), shift in zip(sessions, shifts, strict=True):
        placed = on_job_clock(session, rank, shift)
        frames.append(placed.events.with_columns(pl.col("event_id") + offset))
        arg_frames.append(session.args.with_columns(pl.col("event_id") + offset))
        # ids stay unique: the next rank starts after this one's largest id
        if session.events.height:
            offset += int(session.events.select(pl.col("event_id").max()).item()) + 1
        devices += placed.meta.devices
        inputs += placed.meta.inputs
        warnings.extend(session.meta.warnings)
    first = sessions[0][1].meta
    meta = TraceMeta(
        source_format=first.source_format,
        format_version=first.format_version,
        inputs=inputs,
        devices=devices,
        distributed={
            "world_size": len(sessions),
            "rank_source": rank_source,
            "clock_shift_ns": {str(r): s for (r, _), s in zip(sessions, shifts, strict=True)},
        },
        clock_base_ns=origin,
        clock_is_wall=False,
        warnings=warnings,
        extra={"ranks": [{"rank": r, **s.meta.extra} for r, s in sessions]},
        diagnostics=[d for _, s in sessions for d in s.meta.diagnostics],
    )
    events = pl.concat(frames, how="vertical_relaxed")
    return TraceSession.from_frames(events, meta, pl.concat(arg_frames))


def load_directory(directory: Path) -> TraceSession:
    """One session of the rank files of ``directory`` (``directory_set``): an nsys set merged
    here, each file by its reader (``ingest.readers``); a Kineto set by the Kineto reader,
    which reads each file's rank from its metadata (``ingest.kineto.meta``)."""
    from traceforensics.ingest.readers import reader_of

    kind, files, notes = directory_set(directory)
    if kind == "nsys":
        return load_nsys_ranks(files, lambda p: reader_of(p).load(p), notes)
    from traceforensics.ingest.kineto import load_kineto

    return load_kineto(files, skip_non_traces=True)


def directory_set(directory: Path) -> tuple[str, list[Path], list[str]]:
    """``(format, files, notes)`` of a directory of rank files (module docstring)."""
    exports, others = nsys_files(directory)
    if exports:
        notes = []
        if others:
            names = ", ".join(p.name for p in others[:5]) + (" ..." if len(others) > 5 else "")
            notes.append(
                f"{directory}: {len(others)} file(s) that are not Nsight Systems exports were "
                f"left out ({names})"
            )
        return "nsys", exports, notes
    # no nsys file: ``others`` holds every file of the directory, in name order
    kineto = [p for p in others if p.name.endswith(KINETO_SUFFIXES)]
    if not kineto:
        raise InputError(
            f"{directory}: the directory holds no trace files (.json/.json.gz PyTorch Profiler "
            "traces or .sqlite/.nsys-rep Nsight Systems exports); pass a trace file or a "
            "directory of per-rank traces"
        )
    # rocprof traces are not Kineto rank files: refused here, not misread (issue 43)
    rocprof = [p.name for p in kineto if is_rocprof(p)]
    if rocprof:
        raise InputError(
            f"{directory}: {len(rocprof)} rocprof trace(s) ({', '.join(rocprof[:3])}); a "
            "directory of rocprof traces is not read as one job yet: pass each file alone"
        )
    return "kineto", kineto, []
