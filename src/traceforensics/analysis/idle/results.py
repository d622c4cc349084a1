"""Result types of the idle pass (``idle.gaps.analyze_idle``). All times in integer ns."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from traceforensics.analysis.phases import PhaseTime


def duration_text(ns: int) -> str:
    """A readable duration for evidence text: ns, µs, ms or s, whichever fits."""
    if abs(ns) < 1_000:
        return f"{ns} ns"
    if abs(ns) < 1_000_000:
        return f"{ns / 1e3:.1f} µs"
    if abs(ns) < 1_000_000_000:
        return f"{ns / 1e6:.2f} ms"
    return f"{ns / 1e9:.3f} s"


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
    """What the idle pass adds to a device's record: its idle split by cause (summing exactly to
    the record's ``idle_ns``), the number of gaps, communication and its exposed part."""

    rank: int
    device: int
    idle_by_cause: dict[str, int]
    comm_ns: int
    exposed_comm_ns: int
    n_gaps: int = 0

    @property
    def idle_ns(self) -> int:
        return sum(self.idle_by_cause.values())


@dataclass
class StepStats:
    """One step on one device: device-side span, busy, idle by cause, exposed communication,
    and its time by phase (``phases``: every ``STEP_PHASES`` key, or empty before the phase
    rule ran; GPU ns sum to ``busy_ns``, host ns to ``dur_ns``)."""

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
    phases: dict[str, PhaseTime] = field(default_factory=dict)

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
            "phases": {p: t.to_json() for p, t in self.phases.items()},
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
