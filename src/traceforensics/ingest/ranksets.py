"""Rank sets: a directory of per-rank (or per-node) traces read as one multi-rank session.

Which files a directory holds: the first rank set of the reader registry
(``ingest.readers``, list order: Nsight Systems exports and reports, then Kineto
``*.json``/``*.json.gz``, then any format added) whose ``members`` finds files there. A set
read by its own ``load_set`` (Kineto) is handed over whole; any other is merged here, each file
loaded by its reader.

Rank of a merged file: the set's ``rank_of`` (the file's own metadata or name), by default a
number in its name (``rank-3``, ``rank_3``, ``rank3``; ``..._3.`` as well when several files
are loaded); unknown ranks fall back to positions in name order, and so do colliding numbers,
with a warning. The output says which rule gave the ranks (``meta.distributed["rank_source"]``).

Clock (sets whose reader has a ``clock_start``, e.g. nsys): an export's times are ns since its
own session start, and the start is recorded in wall-clock ns (``meta.clock_base_ns``). Ranks
are put on one clock by shifting each by its session start minus the earliest one::

    rank 0 export   |0 ---- t ---->            session start S0 (wall ns)
    rank 1 export        |0 ---- t ---->       session start S1 = S0 + d
    merged          |0 ---- t ---->
                         |d + t ---->          rank 1 shifted by d = S1 - S0

which is exact on one host (one clock) and as good as the hosts' clock sync across hosts; the
shifts are reported (``meta.distributed["clock_shift_ns"]``). An export without a session
start is not shifted (with a warning).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import replace
from functools import partial
from pathlib import Path

import polars as pl

from traceforensics.ingest.detect import left_out_note, rank_from_name
from traceforensics.ingest.readers import Reader, rank_sets, reader_of, set_reader
from traceforensics.model.errors import InputError
from traceforensics.model.session import TraceMeta, TraceSession


def assign_ranks(
    paths: Sequence[Path], rank_of: Callable[[Path], int | None] | None = None
) -> tuple[list[int], str, str]:
    """``(rank per file, how they were found, warning or '')``: ``rank_of`` per file (None:
    the file-name rule, ``rank_from_name``), else positions (module docstring)."""
    if rank_of is None:
        found = [rank_from_name(p, explicit_only=len(paths) == 1) for p in paths]
        source, where = "file name", "in the file names"
    else:
        found = [rank_of(p) for p in paths]
        source, where = "file metadata", "of the files"
    if all(r is not None for r in found):
        ranks = [int(r) for r in found if r is not None]
        if len(set(ranks)) == len(ranks):
            return ranks, source, ""
        return (
            list(range(len(paths))),
            "file order",
            (
                f"rank numbers {ranks} {where} collide; ranks were assigned in file "
                "name order instead"
            ),
        )
    return list(range(len(paths))), "file order", ""


def load_ranks(paths: Sequence[Path], reader: Reader, notes: Sequence[str] = ()) -> TraceSession:
    """Load each file by its reader and merge them into one session (module docstring):
    ``rank`` from ``assign_ranks`` with the set's ``rank_of``, times shifted onto the earliest
    session start when the set has a ``clock_start``, event ids renumbered in rank order."""
    ranks, source, warning = assign_ranks(paths, reader.rank_of)
    order = sorted(range(len(paths)), key=lambda i: ranks[i])
    sessions = [(ranks[i], reader_of(paths[i]).load(paths[i])) for i in order]
    warnings = list(notes) + ([warning] if warning else [])
    return merge_sessions(sessions, source, warnings, aligned=reader.clock_start is not None)


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
    sessions: Sequence[tuple[int, TraceSession]],
    rank_source: str,
    warnings: list[str],
    *,
    aligned: bool = True,
) -> TraceSession:
    """One session of several single-rank ones (``(rank, session)`` in rank order); with
    ``aligned`` each is shifted onto the earliest ``clock_base_ns`` (module docstring)."""
    starts = [s.meta.clock_base_ns if aligned else None for _, s in sessions]
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
    """One session of the rank files of ``directory`` (``directory_set``): read whole by the
    set's ``load_set`` when it has one (Kineto, which reads each file's rank from its
    metadata), else merged here (``load_ranks``)."""
    name, files, notes = directory_set(directory)
    reader = set_reader(name)
    if reader.load_set is not None:
        return reader.load_set(files)
    return load_ranks(files, reader, notes)


def directory_set(directory: Path) -> tuple[str, list[Path], list[str]]:
    """``(rank set, files, notes)`` of a directory of rank files (module docstring)."""
    files = sorted(p for p in directory.iterdir() if p.is_file())
    for reader in rank_sets():
        members = reader.members or partial(_sniffed, reader)
        chosen, notes = members(directory, files)
        if chosen:
            return str(reader.rank_set), chosen, notes
    raise InputError(
        f"{directory}: the directory holds no trace files (.json/.json.gz PyTorch Profiler "
        "traces or .sqlite/.nsys-rep Nsight Systems exports); pass a trace file or a "
        "directory of per-rank traces"
    )


def _sniffed(set_row: Reader, directory: Path, files: list[Path]) -> tuple[list[Path], list[str]]:
    """The files that sniff as a row of ``set_row``'s set; a note names the others."""
    chosen = [p for p in files if _set_of(p) == set_row.rank_set]
    taken = set(chosen)
    others = [p for p in files if p not in taken]
    return chosen, left_out_note(directory, others, f"{set_row.rank_set} traces") if chosen else []


def _set_of(path: Path) -> str | None:
    try:
        return reader_of(path).rank_set
    except (InputError, OSError):
        return None
