"""Result types of the idle-gap analysis (``analysis.gaps.analyze_gaps``). All times in ns."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Literal

from traceforensics.analysis.idle.causes import DEFAULT_DATA_PATTERNS


@dataclass(frozen=True)
class GapOptions:
    """Knobs of ``analyze_gaps``.

    step_pattern: regex (searched, case-sensitive unless it says ``(?i)``) naming step ranges;
        None = ``ProfilerStep#N``, else NVTX/user ranges named like steps or iterations.
    data_patterns: words that mark user data-loading ranges (see ``causes.data_regex``).
    top_gaps: how many of the largest gaps to keep with evidence.
    window: ``"trace"`` (default) = from the first to the last recorded interval of the rank
        (instant markers such as "Record Window End" excluded), so idle before the first and
        after the last GPU work counts; ``"device"`` = from the device's first to its last
        GPU work.
    step_window: ``"tiled"`` = a step runs from the previous step's last GPU work to its own
        last GPU work (so the idle before its first GPU work is charged to it); ``"annotation"``
        = the step's own device-side span (GPU step annotation when recorded).
    """

    step_pattern: str | None = None
    data_patterns: tuple[str, ...] = DEFAULT_DATA_PATTERNS
    top_gaps: int = 10
    window: Literal["device", "trace"] = "trace"
    step_window: Literal["tiled", "annotation"] = "tiled"


@dataclass
class Evidence:
    """One recorded event that justifies (part of) a gap's attribution."""

    cause: str
    kind: str
    name: str
    start_ns: int
    dur_ns: int
    tid: int | None
    detail: str

    def to_json(self) -> dict[str, Any]:
        return {
            "cause": self.cause,
            "kind": self.kind,
            "name": self.name,
            "start_ns": self.start_ns,
            "dur_ns": self.dur_ns,
            "tid": self.tid,
            "detail": self.detail,
        }


@dataclass
class Gap:
    """One device-level idle gap with its causes (summing exactly to ``dur_ns``)."""

    rank: int
    device: int
    start_ns: int
    dur_ns: int
    causes: dict[str, int]
    evidence: list[Evidence] = field(default_factory=list)

    def to_json(self) -> dict[str, Any]:
        return {
            "rank": self.rank,
            "device": self.device,
            "start_ns": self.start_ns,
            "dur_ns": self.dur_ns,
            "causes": dict(self.causes),
            "evidence": [e.to_json() for e in self.evidence],
        }


@dataclass
class DeviceIdle:
    """Device-level busy/idle in the analysis window; ``idle_by_cause`` sums to ``idle_ns``."""

    rank: int
    device: int
    window_start_ns: int
    window_ns: int
    busy_ns: int
    idle_ns: int
    idle_by_cause: dict[str, int]
    comm_ns: int
    exposed_comm_ns: int
    n_gaps: int = 0


@dataclass
class StepStats:
    """One step on one device: device-side span, busy, idle by cause, exposed communication."""

    rank: int
    device: int
    name: str
    start_ns: int
    dur_ns: int
    busy_ns: int
    idle_ns: int
    idle_by_cause: dict[str, int]
    exposed_comm_ns: int
    comm_ns: int = 0

    def to_json(self) -> dict[str, Any]:
        return {
            "rank": self.rank,
            "device": self.device,
            "name": self.name,
            "start_ns": self.start_ns,
            "dur_ns": self.dur_ns,
            "busy_ns": self.busy_ns,
            "idle_ns": self.idle_ns,
            "idle_by_cause": dict(self.idle_by_cause),
            "exposed_comm_ns": self.exposed_comm_ns,
            "comm_ns": self.comm_ns,
        }


@dataclass
class StepOutlier:
    """A slow step and why: the largest excess over the median step, by cause (or busy)."""

    name: str
    dur_ns: int
    excess_ns: int
    reason: str
    top_cause: str

    def to_json(self) -> dict[str, Any]:
        return {
            "name": self.name,
            "dur_ns": self.dur_ns,
            "excess_ns": self.excess_ns,
            "reason": self.reason,
            "top_cause": self.top_cause,
        }


@dataclass
class StepSummary:
    """Step-time statistics of one (rank, device). ``cv`` = stdev / mean (population)."""

    rank: int
    device: int
    source: str
    n_steps: int
    mean_ns: float
    p50_ns: float
    p95_ns: float
    cv: float
    outliers: list[StepOutlier] = field(default_factory=list)

    def to_json(self) -> dict[str, Any]:
        return {
            "rank": self.rank,
            "device": self.device,
            "source": self.source,
            "n_steps": self.n_steps,
            # integer ns like every *_ns field (the statistics are computed in float)
            "mean_ns": round(self.mean_ns),
            "p50_ns": round(self.p50_ns),
            "p95_ns": round(self.p95_ns),
            "cv": self.cv,
            "outliers": [o.to_json() for o in self.outliers],
        }


@dataclass
class StreamIdle:
    """HTA's per-stream view: idle between a stream's own ops, split by who was late.

    ``host_wait_ns``: gaps whose next op was launched after the gap began (the host was late);
    ``queued_wait_ns``: the rest (work was queued: dependency or GPU-side latency).
    """

    rank: int
    device: int
    stream: int
    window_start_ns: int
    window_ns: int
    busy_ns: int
    idle_ns: int
    n_gaps: int
    host_wait_ns: int
    queued_wait_ns: int

    def to_json(self) -> dict[str, Any]:
        return {
            "rank": self.rank,
            "device": self.device,
            "stream": self.stream,
            "window_start_ns": self.window_start_ns,
            "window_ns": self.window_ns,
            "busy_ns": self.busy_ns,
            "idle_ns": self.idle_ns,
            "n_gaps": self.n_gaps,
            "host_wait_ns": self.host_wait_ns,
            "queued_wait_ns": self.queued_wait_ns,
        }
