"""The host time of each step by phase: the answer for a trace without GPU work.

``tf`` attributes GPU idle time; a trace with no GPU (a CPU-only capture) has none, so its
report says instead where the host time of each step went. One rule, used by ``tf analyze``
(the ``host`` section of every report) and by ``capture()``'s printout (the loader's share).

Steps, per rank, the first source that yields any (``steps.first_step_ranges``): the user's
step pattern (``StepOptions.pattern``) alone when given, else ``ProfilerStep#N`` ranges, else
ranges named like a step or iteration (``GENERIC_STEP_RE``); host ranges (``annotation``,
``cpu_op``) only. A step range that starts inside the previous kept one of its rank (nested
or overlapping step names) is dropped: each host ns is in at most one step. A rank with no
step range at all gets one pseudo-step, ``whole trace`` (source ``whole_trace``): its main
thread (the most recorded host time) from its first range to its last.

Phases of a step: the host ranges on the step's own thread (same rank, pid and tid), clipped
to the step; each ns goes to the first range class covering it, in the order of the one phase
rule (``analysis.phases``: data loading, communication, optimizer, backward, forward, other
named ranges, any other operator as forward); collectives recorded on the host count as
``other`` in this view, and the rest of the step (Python between operators, nothing recorded)
is ``other`` too:

    step      [ProfilerStep#3 ......................................................)
    thread      [DataLoader)[aten::linear][aten::mse][AddmmBackward0][Optimizer.step#]
    phases      data_loading forward.............. backward...... optimizer.... other

So the five phases of a step add up to its duration exactly.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Final

import numpy as np
import polars as pl

from traceforensics.analysis.options import AnalysisOptions
from traceforensics.analysis.phases import CLASS_PHASE, range_classes, split_by_class
from traceforensics.analysis.steps import first_step_ranges, step_number
from traceforensics.model.session import TraceSession

#: The phases, in report order (JSON keys of ``phase_ns``).
PHASES: Final[tuple[str, ...]] = ("data_loading", "forward", "backward", "optimizer", "other")
#: Where the step ranges came from (``HostBreakdown.step_source``), by pattern tried.
STEP_SOURCES: Final[tuple[str, ...]] = (
    "user_pattern",
    "profiler_step",
    "step_ranges",
    "whole_trace",
)
#: The name of a rank's one pseudo-step when it has no step range (source ``whole_trace``).
WHOLE_TRACE: Final = "whole trace"

#: Host kinds holding named ranges and operators.
_RANGE_KINDS: Final = ("annotation", "cpu_op")
_THREAD: Final = ["rank", "pid", "tid"]


@dataclass(frozen=True)
class HostStep:
    """One step's host time (ns): ``phase_ns`` over ``PHASES`` adds up to ``dur_ns``."""

    rank: int
    name: str
    number: int | None
    start_ns: int
    dur_ns: int
    phase_ns: dict[str, int]

    def to_json(self) -> dict[str, Any]:
        return {
            "rank": self.rank,
            "name": self.name,
            "number": self.number,
            "start_ns": self.start_ns,
            "dur_ns": self.dur_ns,
            "phase_ns": dict(self.phase_ns),
        }


@dataclass(frozen=True)
class HostBreakdown:
    """The host time of every step by phase (``steps`` in (rank, start) order); without steps
    ``steps`` is empty and ``step_source`` None. ``sources``: the patterns that gave the ranks
    their steps (``STEP_SOURCES``), each once, sorted."""

    steps: list[HostStep] = field(default_factory=list)
    sources: tuple[str, ...] = ()

    @property
    def step_source(self) -> str | None:
        """The one source of every rank's steps, ``mixed`` when ranks differ, None without."""
        return None if not self.sources else self.sources[0] if len(self.sources) == 1 else "mixed"

    @property
    def step_ns(self) -> int:
        return sum(s.dur_ns for s in self.steps)

    @property
    def phase_ns(self) -> dict[str, int]:
        """Each phase summed over every step."""
        return {p: sum(s.phase_ns[p] for s in self.steps) for p in PHASES}

    @property
    def ranks(self) -> int:
        return len({s.rank for s in self.steps})

    def to_json(self) -> dict[str, Any]:
        return {
            "step_source": self.step_source,
            "step_count": len(self.steps),
            "step_ns": self.step_ns,
            "phase_ns": self.phase_ns,
            "steps": [s.to_json() for s in self.steps],
        }


def host_breakdown(session: TraceSession, options: AnalysisOptions) -> HostBreakdown:
    """The host breakdown of ``session`` (see the module's rule); times in ns."""
    ev = session.events.filter(pl.col("kind").cast(pl.String).is_in(_RANGE_KINDS)).select(
        "rank",
        pl.col("pid").fill_null(-1),
        pl.col("tid").fill_null(-1),
        pl.col("kind").cast(pl.String),
        pl.col("name").cast(pl.String),
        "start_ns",
        (pl.col("start_ns") + pl.col("dur_ns").clip(0)).alias("end_ns"),
        "is_comm",
    )
    if ev.height == 0:
        return HostBreakdown()
    steps, sources = _steps(ev, options.steps.pattern)
    if steps.height == 0:
        return HostBreakdown()
    cls = ev.with_columns(pl.Series("cls", range_classes(ev, options)))
    out: list[HostStep] = []
    for key, mine in steps.group_by(_THREAD, maintain_order=True):
        rows = cls.filter(
            (pl.col("rank") == key[0]) & (pl.col("pid") == key[1]) & (pl.col("tid") == key[2])
        )
        out += _thread_steps(mine, rows)
    out.sort(key=lambda s: (s.rank, s.start_ns))
    return HostBreakdown(out, tuple(sorted(set(sources.values()))))


def _steps(ev: pl.DataFrame, pattern: str | None) -> tuple[pl.DataFrame, dict[int, str]]:
    """The kept step ranges (``rank, pid, tid, name, start_ns, end_ns``) and each rank's
    source: per rank the first pattern with any range, then nested/overlapping ones dropped."""
    found = first_step_ranges(ev, pattern)
    sources = {int(r): str(s) for r, s in found.select("rank", "source").unique().iter_rows()}
    whole = _whole_trace(ev.filter(~pl.col("rank").is_in(list(sources))))
    for rank in whole.get_column("rank").to_list():
        sources[int(rank)] = "whole_trace"
    parts = [found.drop("source"), whole]
    steps = pl.concat(parts).sort(["rank", "start_ns", "end_ns"], descending=[False, False, True])
    # a step starting before the end of an earlier one of its rank is inside it, or overlaps it
    before = pl.col("end_ns").cum_max().shift(1).over("rank")
    kept = steps.filter(before.is_null() | (pl.col("start_ns") >= before))
    return kept, sources


def _whole_trace(ev: pl.DataFrame) -> pl.DataFrame:
    """One pseudo-step per rank of ``ev`` (ranks without any step range): the thread holding
    the most recorded host time (range durations summed), from its first range's start to its
    last range's end, named ``WHOLE_TRACE``. A capture without step ranges still gets its host
    time split by phase, over the main thread's recorded span."""
    if ev.height == 0:
        return ev
    held = ev.group_by(_THREAD).agg(
        pl.col("start_ns").min(),
        pl.col("end_ns").max(),
        (pl.col("end_ns") - pl.col("start_ns")).sum().alias("held"),
    )
    main = held.sort(["rank", "held", "pid", "tid"], descending=[False, True, False, False])
    main = main.group_by("rank", maintain_order=True).first()
    return main.select(
        *_THREAD,
        pl.lit("annotation").alias("kind"),
        pl.lit(WHOLE_TRACE).alias("name"),
        "start_ns",
        "end_ns",
        pl.lit(False).alias("is_comm"),
    ).cast({c: ev.schema[c] for c in ev.columns})


def _thread_steps(steps: pl.DataFrame, rows: pl.DataFrame) -> list[HostStep]:
    """The steps of one thread, each split by the range classes (``phases.split_by_class``:
    a ns covered by several classes goes to the first); what no range covers is ``other``."""
    lo = steps.get_column("start_ns").to_numpy().astype(np.int64)
    hi = np.maximum(steps.get_column("end_ns").to_numpy().astype(np.int64), lo)
    cls = rows.get_column("cls").to_numpy().astype(np.int8)
    rs = rows.get_column("start_ns").to_numpy().astype(np.int64)
    re_ = rows.get_column("end_ns").to_numpy().astype(np.int64)
    by_class = split_by_class(rs, re_, cls, tuple(range(len(CLASS_PHASE))), lo, hi)
    phase = {p: np.zeros(lo.size, np.int64) for p in PHASES}
    for k, name in enumerate(CLASS_PHASE):
        # (no launch calls here; collectives recorded on the host are ``other`` in this view)
        phase[name if name in phase else "other"] += by_class[:, k]
    phase["other"] += (hi - lo) - by_class.sum(axis=1)
    numbers = steps.select(step_number(pl.col("name"))).to_series()
    return [
        HostStep(
            rank=int(r),
            name=str(n),
            number=None if num is None else int(num),
            start_ns=int(lo[i]),
            dur_ns=int(hi[i] - lo[i]),
            phase_ns={p: int(phase[p][i]) for p in PHASES},
        )
        for i, (r, n, num) in enumerate(
            zip(steps.get_column("rank"), steps.get_column("name"), numbers, strict=True)
        )
    ]
