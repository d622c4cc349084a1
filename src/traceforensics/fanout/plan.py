"""What the parent decides around the fan-out: the rank files, and the job's metadata after.

Before: the directory's rank set (``ingest.ranksets.directory_set``, from the reader registry
``ingest.readers``) and its registry row. A merged set (no ``load_set``, e.g. nsys): each
file's rank (``ingest.ranksets.assign_ranks`` with the row's ``rank_of``: metadata or names,
else order) and, when the row has a ``clock_start`` (nsys: each export's
``TARGET_INFO_SESSION_START_TIME``, read in the workers by ``worker.session_start``), the clock
shift onto the earliest session start, so workers emit job-clock ns.

After: the parts in the joint loader's order, errors raised as it would raise them (the
first failing file), and the job's ``TraceMeta`` as the joint loader builds it:

- a merged set: ``ingest.ranksets.merge_sessions`` itself, on the parts' metadata (no events);
- a set read by its ``load_set`` (Kineto, ``ingest.kineto``, the only such set today): ranks
  by ``ingest.kineto.meta.assign_ranks`` over every file that is a trace (``distributedInfo``,
  file names, positions; collisions fall back to positions) and parts relabelled; files that
  are not traces are left out with one warning; inputs, devices and warnings in file order;
  ``distributed`` = the first ``distributedInfo`` plus ``rank_source``; a wall clock when
  every file has one.

Every rank's graph-launch warning (``ingest.suspects``) follows, prefixed with its rank: the
joint loader counts the launches of all ranks in one line.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from traceforensics.analysis.options import AnalysisOptions
from traceforensics.fanout.parts import Failure, RankPart, RankTask, relabel
from traceforensics.ingest.kineto import meta as kmeta
from traceforensics.ingest.ranksets import (
    assign_ranks,
    clock_shifts,
    directory_set,
    merge_sessions,
)
from traceforensics.ingest.readers import Reader, set_reader
from traceforensics.model.errors import UnsupportedFormatError
from traceforensics.model.schema import empty_args, empty_events
from traceforensics.model.session import TraceMeta, TraceSession


@dataclass
class RankSet:
    """The rank files of a directory (``fmt``: the rank set, ``reader`` its registry row) and
    the notes on the files left out. A merged set: ``ranks`` per file, how they were found and
    the rule's warning."""

    fmt: str
    files: list[Path]
    notes: list[str]
    reader: Reader
    ranks: list[int] = field(default_factory=list)
    rank_source: str = ""
    rank_warning: str = ""


def rank_set(directory: Path) -> RankSet:
    """The rank set of ``directory`` (module docstring); ``InputError`` when it has none."""
    fmt, files, notes = directory_set(directory)
    out = RankSet(fmt, files, notes, set_reader(fmt))
    if out.reader.load_set is None:
        out.ranks, out.rank_source, out.rank_warning = assign_ranks(files, out.reader.rank_of)
    return out


def tasks(
    rs: RankSet,
    options: AnalysisOptions,
    use_cache: bool,
    starts: Callable[[list[tuple[Reader, str]]], list[int | Failure | None]],
) -> list[RankTask]:
    """One task per rank file. A merged set with a ``clock_start``: ``starts(items)`` reads
    the session starts (in the workers: an nsys report may need exporting first); a failure
    there is raised in rank order."""
    paths = [str(p) for p in rs.files]
    row = rs.reader
    if row.load_set is not None:
        return [
            RankTask(i, p, rs.fmt, options, use_cache=use_cache, reader=row)
            for i, p in enumerate(paths)
        ]
    shifts = [0] * len(paths)
    if row.clock_start is not None:
        bases = starts([(row, p) for p in paths])
        for i in sorted(range(len(paths)), key=lambda i: rs.ranks[i]):
            base = bases[i]
            if isinstance(base, Failure):
                base.raise_()
        _, shifts = clock_shifts([b if isinstance(b, int) else None for b in bases])
    return [
        RankTask(i, p, rs.fmt, options, rs.ranks[i], shift, use_cache, row)
        for i, (p, shift) in enumerate(zip(paths, shifts, strict=True))
    ]


def settle(rs: RankSet, parts: Sequence[RankPart]) -> tuple[list[RankPart], TraceMeta]:
    """The parts that are traces (final ranks) and the job's metadata (module docstring);
    the first failing file's error is raised, in the joint loader's order."""
    if rs.reader.load_set is None:
        order = sorted(parts, key=lambda p: rs.ranks[p.index])
        _raise_first(order)
        return order, _merged_meta(rs, order)
    _raise_first(parts)
    traces = [p for p in parts if p.skipped is None]
    skipped = [p.skipped for p in parts if p.skipped is not None]
    if not traces:
        raise UnsupportedFormatError(skipped[0])
    tops = [{"distributedInfo": p.info} if p.info is not None else {} for p in traces]
    ranks, warning, source = kmeta.assign_ranks([Path(p.path) for p in traces], tops)
    traces = [relabel(p, r) for p, r in zip(traces, ranks, strict=True)]
    notes = []
    if skipped:  # worded as ``ingest.kineto`` words it
        reasons = "; ".join(s.split("; pass ")[0] for s in skipped)
        notes.append(f"left out {len(skipped)} file(s) that are not traces: {reasons}")
    return traces, _kineto_meta(traces, notes + ([warning] if warning else []), source)


def _raise_first(parts: Sequence[RankPart]) -> None:
    for p in parts:
        if p.failure is not None:
            p.failure.raise_()


def _merged_meta(rs: RankSet, parts: list[RankPart]) -> TraceMeta:
    # the joint merge itself, on sessions without events: same ranks, shifts, warnings
    sessions = [
        (p.rank, TraceSession(empty_events(), p.meta, empty_args()))
        for p in parts
        if p.meta is not None
    ]
    warnings = rs.notes + ([rs.rank_warning] if rs.rank_warning else [])
    aligned = rs.reader.clock_start is not None
    meta = merge_sessions(sessions, rs.rank_source, warnings, aligned=aligned).meta
    meta.warnings += _graph_notes(parts)
    return meta


def _kineto_meta(parts: list[RankPart], warnings: list[str], source: str) -> TraceMeta:
    metas = [p.meta for p in parts if p.meta is not None]
    versions = [m.format_version or "" for m in metas]
    by_rank = {str(p.rank): p.info for p in parts if p.info is not None}
    first: dict[str, Any] = next(iter(by_rank.values()), {})
    extra: dict[str, Any] = {
        "kineto": {k: v for m in metas for k, v in m.extra.get("kineto", {}).items()}
    }
    if len(by_rank) > 1:
        extra["distributed_by_rank"] = by_rank
    wall = all(m.clock_is_wall for m in metas)
    return TraceMeta(
        source_format=metas[0].source_format,
        format_version=versions[0] if len(set(versions)) == 1 else "; ".join(versions),
        inputs=[i for m in metas for i in m.inputs],
        devices=[d for m in metas for d in m.devices],
        distributed={**first, "rank_source": source},
        clock_base_ns=0 if wall else None,
        clock_is_wall=wall,
        warnings=warnings + [w for m in metas for w in m.warnings] + _graph_notes(parts),
        extra=extra,
    )


def _graph_notes(parts: Sequence[RankPart]) -> list[str]:
    if len(parts) == 1:  # one rank: its note is the job's
        return list(parts[0].graph_notes)
    ordered = sorted(parts, key=lambda p: p.rank)
    return [f"rank {p.rank}: {n}" for p in ordered for n in p.graph_notes]
