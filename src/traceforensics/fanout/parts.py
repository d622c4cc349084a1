"""What travels between the parent and a rank worker: the task, and the rank's part.

A ``RankTask`` names one rank file and what the parent decided before fanning out (in a
merged set, the rank's number and clock shift); a ``RankPart`` is everything the merge needs
from that rank: the file's metadata and the per-rank results of the passes (device records,
idle, kernels, patterns, findings), the collective-kernel rows and the step table of the
multi-rank view, the event count and time span. Never the event table: the part of a 57k-event
rank (the ResNet-50 trace) pickles to 45 kB. Both are plain picklable data (process pools and
Dask ship them).

Errors travel as data (``Failure``): an ``OptionError`` does not survive pickling (its
``option`` argument), and the parent re-raises the same one-line ``InputError`` either way.
"""

from __future__ import annotations

from dataclasses import dataclass, field, fields, is_dataclass, replace
from typing import Any, NoReturn, TypeVar

import polars as pl

from traceforensics.analysis.devices import DeviceRecord
from traceforensics.analysis.diagnostics import Diagnostic
from traceforensics.analysis.findings.results import Finding
from traceforensics.analysis.host_steps import HostBreakdown
from traceforensics.analysis.idle.gaps import IdleAnalysis
from traceforensics.analysis.idle.results import Evidence
from traceforensics.analysis.kernels.results import KernelAnalysis
from traceforensics.analysis.memory import DeviceMemory
from traceforensics.analysis.options import AnalysisOptions
from traceforensics.analysis.serving import ServingAnalysis
from traceforensics.analysis.utilization.timeline import DevicePattern
from traceforensics.analysis.work_size import DeviceWork
from traceforensics.ingest.readers import Reader
from traceforensics.model import errors
from traceforensics.model.session import TraceMeta

T = TypeVar("T")


@dataclass(frozen=True)
class RankTask:
    """One rank file to load and analyse. ``fmt``: the directory's rank set, ``reader`` its
    registry row (``ingest.readers.set_reader``; a worker process registers it if its list
    lacks it). A merged set (no ``load_set``, e.g. nsys): ``rank`` (``ingest.ranksets.
    assign_ranks``) and ``shift_ns`` onto the job's clock (the earliest session start); a set
    with a ``load_set`` (Kineto): ``rank`` None (the file's own rank; the parent settles
    collisions afterwards)."""

    index: int
    path: str
    fmt: str
    options: AnalysisOptions
    rank: int | None = None
    shift_ns: int = 0
    use_cache: bool = False
    reader: Reader | None = None


@dataclass(frozen=True)
class Failure:
    """An ``InputError`` raised in a worker, as data: its class name, message and (for an
    ``OptionError``) the option."""

    kind: str
    message: str
    option: str | None = None

    @classmethod
    def of(cls, exc: errors.InputError) -> Failure:
        return cls(type(exc).__name__, str(exc), getattr(exc, "option", None))

    def raise_(self) -> NoReturn:
        """Raise the error again, same class and message, in this process."""
        if self.option is not None:
            raise errors.OptionError(self.message, self.option)
        kind = getattr(errors, self.kind, errors.InputError)
        if not (isinstance(kind, type) and issubclass(kind, errors.InputError)):
            kind = errors.InputError
        raise kind(self.message)


@dataclass
class RankResults:
    """The per-rank results of the passes (``analysis.pipeline.analyze_context(job=False)``)
    and the parts of the multi-rank view (``analysis.ranks.rank_analysis``): ``collectives``
    (``collective_kernels`` rows) and ``steps`` (the step table), both with ``dev`` = index
    into ``devices``. ``evidence_gaps``: per finding, per evidence item, the index into
    ``idle.gaps`` of the gap it was taken from (None: not from a gap), since the job keeps
    fewer of the rank's gaps; ``attention``: the rank's largest materialised attention
    (``findings.busy_losses.attention_scores``), for the kernel-efficiency findings the merge
    makes again from the ops the job keeps. Times are ns on the job's clock."""

    event_count: int
    trace_span: tuple[int, int]
    devices: list[tuple[int, int]]
    records: list[DeviceRecord]
    idle: IdleAnalysis
    kernels: KernelAnalysis
    patterns: list[DevicePattern]
    findings: list[Finding]
    collectives: pl.DataFrame
    steps: pl.DataFrame
    names: pl.DataFrame  # ``findings.program.name_counts``: the job's program from all ranks
    evidence_gaps: list[list[int | None]] = field(default_factory=list)
    attention: tuple[int, Evidence] | None = None
    diagnostics: list[Diagnostic] = field(default_factory=list)  # the rank's analysis's
    host: HostBreakdown | None = None  # the rank's host steps, when it has no GPU activity
    work_size: list[DeviceWork] = field(default_factory=list)  # its devices' work per step
    memory: list[DeviceMemory] = field(default_factory=list)  # its devices' memory over time
    serving: ServingAnalysis | None = None  # its server iterations, when it is a server


@dataclass
class RankPart:
    """One rank file's answer. ``meta``: the file's metadata (None when it was skipped or
    failed); ``info``: its Kineto ``distributedInfo``; ``results`` None when ``--steps``
    selects nothing on this rank (``dropped``: that error, raised if every rank is dropped),
    when the file is not a trace (``skipped``: why; a Kineto directory leaves it out) or when
    loading failed (``failure``)."""

    index: int
    path: str
    rank: int = 0
    meta: TraceMeta | None = None
    info: dict[str, Any] | None = None
    graph_notes: list[str] = field(default_factory=list)
    results: RankResults | None = None
    dropped: Failure | None = None
    skipped: str | None = None
    failure: Failure | None = None


def relabel(part: RankPart, rank: int) -> RankPart:
    """``part`` as rank ``rank``: every ``rank`` field, key and column of its metadata and
    results replaced. One rank's analysis does not depend on its number (it is a constant
    in every sort and group), so this gives what analysing it as ``rank`` gives."""
    if rank == part.rank:
        return part
    results = _with_rank(part.results, rank)
    if results is not None:  # (rank, device) pairs: the one place a rank is not named "rank"
        results.devices = [(rank, device) for _, device in results.devices]
    return replace(part, rank=rank, meta=_with_rank(part.meta, rank), results=results)


def _with_rank(obj: T, rank: int) -> T:
    """``obj`` with every ``rank`` replaced, through dataclasses, lists, tuples, dicts and
    polars frames."""
    out: Any
    if isinstance(obj, pl.DataFrame):
        if "rank" not in obj.columns:
            return obj  # type: ignore[return-value]
        out = obj.with_columns(pl.lit(rank, obj.schema["rank"]).alias("rank"))
    elif is_dataclass(obj) and not isinstance(obj, type):
        changes = {
            f.name: rank if f.name == "rank" else _with_rank(getattr(obj, f.name), rank)
            for f in fields(obj)
            if f.init
        }
        out = replace(obj, **changes)
    elif isinstance(obj, list):
        out = [_with_rank(v, rank) for v in obj]
    elif isinstance(obj, dict):
        out = {k: rank if k == "rank" else _with_rank(v, rank) for k, v in obj.items()}
    else:
        return obj
    return out  # type: ignore[no-any-return]
