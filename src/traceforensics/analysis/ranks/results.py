"""Typed results of the multi-rank pass (``analyze_ranks``); JSON in docs/json-output.md
(``ranks``). Times are integer ns."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Final

import polars as pl

from traceforensics.analysis.idle.causes import CAUSES

#: The straggler's cause when its compute kernels, not its idle time, make it late.
SLOW_GPU: Final = "slow_gpu"


@dataclass(frozen=True)
class RankRow:
    """One participant (rank, device) of the job."""

    rank: int
    device: int
    step_time_ns_median: int | None
    steps: int
    window_ns: int
    busy_ns: int
    idle_ns: int
    idle_by_cause: dict[str, int]
    top_cause: str | None
    compute_ns: int
    #: wall-clock ns (unions, ``straggler.comm_time``): in collectives, waiting in them, the rest
    comm_ns: int
    comm_wait_ns: int
    comm_transfer_ns: int
    comm_estimated: bool
    last_arrivals: int
    clock_offset_ns: int
    mfu: float | None
    #: the job's straggler, when this participant waits for it
    waiting_for: int | None = None
    #: wall-clock ns waiting in matched collectives the straggler arrived last at
    wait_for_straggler_ns: int = 0
    #: the rank whose late arrival it waited on longest (matched collectives), and that wait
    waits_most_for: int | None = None
    waits_most_for_ns: int = 0

    def to_json(self) -> dict[str, Any]:
        return {
            "rank": self.rank,
            "device": self.device,
            "step_time_ns_median": self.step_time_ns_median,
            "steps": self.steps,
            "window_ns": self.window_ns,
            "busy_ns": self.busy_ns,
            "idle_ns": self.idle_ns,
            "idle_by_cause": dict(self.idle_by_cause),
            "top_cause": self.top_cause,
            "compute_ns": self.compute_ns,
            "comm_ns": self.comm_ns,
            "comm_wait_ns": self.comm_wait_ns,
            "comm_transfer_ns": self.comm_transfer_ns,
            "comm_split_estimated": self.comm_estimated,
            "last_arrivals": self.last_arrivals,
            "clock_offset_ns": self.clock_offset_ns,
            "mfu": None if self.mfu is None else round(self.mfu, 6),
            "waiting_for_rank": self.waiting_for,
            "wait_for_straggler_ns": self.wait_for_straggler_ns,
            "waits_most_for_rank": self.waits_most_for,
            "waits_most_for_ns": self.waits_most_for_ns,
        }


@dataclass(frozen=True)
class Straggler:
    """The rank the others wait for, and why.

    Figures (ns): ``others_wait_ns``, the other participants' mean time waiting in any
    collective over the trace (whoever was late); ``waited_for_ns``, their mean time waiting
    for this rank (the others' mean wait in each matched collective it arrived last at, summed
    over the trace: the figure a report states as "the others wait X each for it"; the steps'
    ``StepRow.slowest_rank_wait_ns`` of the steps it is slowest in add up to it, plus what
    lies outside steps); ``waited_for_total_ns``, the same summed over the others;
    ``wait_share``, its share of all waiting in matched collectives."""

    rank: int
    device: int
    cause: str
    cause_excess_ns_per_step: int
    others_wait_ns: int
    last_share: float
    evidence: list[str] = field(default_factory=list)
    waited_for_ns: int = 0
    waited_for_total_ns: int = 0
    wait_share: float = 0.0
    last_arrivals: int = 0
    matched_collectives: int = 0

    def to_json(self) -> dict[str, Any]:
        return {
            "rank": self.rank,
            "device": self.device,
            "cause": self.cause,
            "cause_excess_ns_per_step": self.cause_excess_ns_per_step,
            "others_wait_ns": self.others_wait_ns,
            "last_share": round(self.last_share, 6),
            "evidence": list(self.evidence),
            "waited_for_ns": self.waited_for_ns,
            "waited_for_total_ns": self.waited_for_total_ns,
            "wait_share": round(self.wait_share, 6),
            "last_arrivals": self.last_arrivals,
            "matched_collectives": self.matched_collectives,
        }

    def pointer(self) -> str:
        """What a waiting rank is told: ``waiting for rank 2 (data_loading, +31.0 ms/step)``."""
        excess = self.cause_excess_ns_per_step
        per_step = f", +{excess / 1e6:.1f} ms/step" if excess else ""
        return f"waiting for rank {self.rank} ({self.cause}{per_step})"


@dataclass(frozen=True)
class StepRow:
    """One step (by number) across ranks: who arrived last and what it cost the others.

    ``slowest_rank``: the rank waited for longest in the step (the others' wait in the matched
    collectives it arrived last at, weighted by that wait); ``slowest_rank_wait_ns``: the
    others' mean wait for it in the step (ns each), ``slowest_rank_wait_total_ns``: summed over
    them; ``others_wait_ns``: the others' mean wait in all the step's matched collectives,
    whoever arrived last (ns each)."""

    step: int
    slowest_rank: int | None
    others_wait_ns: int
    slowest_rank_wait_ns: int = 0
    slowest_rank_wait_total_ns: int = 0

    def to_json(self) -> dict[str, Any]:
        return {
            "step": self.step,
            "slowest_rank": self.slowest_rank,
            "others_wait_ns": self.others_wait_ns,
            "slowest_rank_wait_ns": self.slowest_rank_wait_ns,
            "slowest_rank_wait_total_ns": self.slowest_rank_wait_total_ns,
        }


@dataclass
class RankAnalysis:
    """The job across its ranks (``analyze_ranks``)."""

    world_size: int
    rank_source: str
    matching: str
    matched_collectives: int
    per_rank: list[RankRow]
    steps: list[StepRow]
    straggler: Straggler | None
    collectives: pl.DataFrame
    notes: list[str] = field(default_factory=list)

    def to_json(self) -> dict[str, Any]:
        return {
            "world_size": self.world_size,
            "ranks_loaded": len({r.rank for r in self.per_rank}),
            "rank_source": self.rank_source,
            "matching": self.matching,
            "matched_collectives": self.matched_collectives,
            "straggler": None if self.straggler is None else self.straggler.to_json(),
            "per_rank": [r.to_json() for r in self.per_rank],
            "steps": [s.to_json() for s in self.steps],
            "notes": list(self.notes),
        }

    def frame(self) -> pl.DataFrame:
        """``per_rank`` as a table (``RANK_SCHEMA``; idle by cause as ``idle_<cause>_ns``)."""
        return rank_frame(self.per_rank)


RANK_SCHEMA: Final[dict[str, Any]] = {
    "rank": pl.Int64,
    "device": pl.Int64,
    "step_time_ns_median": pl.Int64,
    "steps": pl.Int64,
    "window_ns": pl.Int64,
    "busy_ns": pl.Int64,
    "idle_ns": pl.Int64,
    "top_cause": pl.String,
    "compute_ns": pl.Int64,
    "comm_ns": pl.Int64,
    "comm_wait_ns": pl.Int64,
    "comm_transfer_ns": pl.Int64,
    "comm_split_estimated": pl.Boolean,
    "last_arrivals": pl.Int64,
    "clock_offset_ns": pl.Int64,
    "mfu": pl.Float64,
    "waiting_for_rank": pl.Int64,
    "wait_for_straggler_ns": pl.Int64,
    "waits_most_for_rank": pl.Int64,
    "waits_most_for_ns": pl.Int64,
    **{f"idle_{c}_ns": pl.Int64 for c in CAUSES},
}


def rank_frame(rows: list[RankRow]) -> pl.DataFrame:
    """Per-rank rows as a ``RANK_SCHEMA`` table (an empty list gives the columns alone)."""
    out = []
    for r in rows:
        row = r.to_json()
        by_cause = row.pop("idle_by_cause")
        out.append(row | {f"idle_{c}_ns": by_cause.get(c, 0) for c in CAUSES})
    return pl.DataFrame(out, schema=RANK_SCHEMA)
