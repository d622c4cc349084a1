"""The serving view's typed results: one ``Iteration`` per engine iteration, and the
``ServingAnalysis`` of a trace (or of a job: ranks merged). Times are integer ns; the JSON
fields are documented in docs/serving.md."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from traceforensics.analysis.serving.engines import GAP_CLASS_IDS

#: The phases an iteration can have ("unknown": neither its name nor its shapes say).
PHASES = ("prefill", "decode", "mixed", "unknown")


@dataclass(frozen=True)
class Iteration:
    """One engine iteration on one device.

    ``start_ns``/``dur_ns``: its host range; ``busy_ns``: GPU busy (the device's busy union)
    from its first to its last GPU op; ``host_gap_ns``: GPU idle from the previous iteration's
    last GPU op to its first one (0 for a rank's first iteration), split in ``gap`` by class
    (``GAP_CLASS_IDS``; the parts sum to ``host_gap_ns``); ``gap_start_ns``/``gap_end_ns``:
    the gap's window (the previous iteration's last GPU end, its own first GPU start; equal
    when no gap: its idle is ``host_gap_ns``, GPU work outside the iterations may run in it);
    ``graph``: a graph launch inside it; ``queued_ahead``: its GPU work was queued before the
    previous iteration's ended (the engine overlaps scheduling); ``pid``: its process (-1:
    unknown). ``batch_size``/``tokens``: None when the trace does not show them.
    """

    rank: int
    device: int
    start_ns: int
    dur_ns: int
    phase: str
    batch_size: int | None
    tokens: int | None
    busy_ns: int
    host_gap_ns: int
    gap: dict[str, int]
    graph: bool
    gpu_start_ns: int | None = None
    gpu_end_ns: int | None = None
    pid: int = -1
    gap_start_ns: int | None = None
    gap_end_ns: int | None = None
    queued_ahead: bool = False

    def to_json(self) -> dict[str, Any]:
        return {
            "rank": self.rank,
            "pid": self.pid,
            "device": self.device,
            "start_ns": self.start_ns,
            "dur_ns": self.dur_ns,
            "phase": self.phase,
            "batch_size": self.batch_size,
            "tokens": self.tokens,
            "busy_ns": self.busy_ns,
            "host_gap_ns": self.host_gap_ns,
            "gap": {k: int(self.gap.get(k, 0)) for k in GAP_CLASS_IDS},
            "graph": self.graph,
            "gpu_start_ns": self.gpu_start_ns,
            "gpu_end_ns": self.gpu_end_ns,
            "gap_start_ns": self.gap_start_ns,
            "gap_end_ns": self.gap_end_ns,
            "queued_ahead": self.queued_ahead,
        }


@dataclass
class ServingAnalysis:
    """An inference server's iterations: ``engine`` (``engines.SIGNS`` id, or ``"unknown"``
    when forced by ``--workload serving`` without a sign), ``evidence`` (the matched names),
    ``forced`` (chosen by the option, not the signs), ``async_scheduling``: the engine already
    overlaps scheduling with the GPU (an iteration queued ahead, or the engine's batch-queue
    loop in the trace: ``engines.ASYNC_RE``), with its evidence in ``async_evidence``."""

    engine: str
    iterations: list[Iteration] = field(default_factory=list)
    evidence: list[str] = field(default_factory=list)
    forced: bool = False
    async_scheduling: bool = False
    async_evidence: list[str] = field(default_factory=list)

    def summary(self) -> dict[str, Any]:
        """Totals over the iterations: counts per phase, graph and eager decode counts, and the
        summed busy, host gap and gap split (ns)."""
        its = self.iterations
        gap = {k: sum(int(i.gap.get(k, 0)) for i in its) for k in GAP_CLASS_IDS}
        return {
            "iterations": len(its),
            "by_phase": {p: sum(i.phase == p for i in its) for p in PHASES},
            "graph_iterations": sum(i.graph for i in its),
            "eager_decode_iterations": sum(i.phase == "decode" and not i.graph for i in its),
            "queued_ahead_iterations": sum(i.queued_ahead for i in its),
            "busy_ns": sum(i.busy_ns for i in its),
            "host_gap_ns": sum(i.host_gap_ns for i in its),
            "gap": gap,
        }

    def to_json(self) -> dict[str, Any]:
        return {
            "engine": self.engine,
            "evidence": list(self.evidence),
            "forced": self.forced,
            "async_scheduling": self.async_scheduling,
            "async_evidence": list(self.async_evidence),
            "summary": self.summary(),
            "iterations": [i.to_json() for i in self.iterations],
        }

    @staticmethod
    def merge(parts: list[ServingAnalysis]) -> ServingAnalysis | None:
        """One job's view from its ranks' (iterations concatenated, sorted by rank, device,
        start); None when no rank is a server. The engine is the most common one."""
        if not parts:
            return None
        engines = [p.engine for p in parts]
        engine = max(set(engines), key=lambda e: (engines.count(e), e))
        its = sorted(
            (i for p in parts for i in p.iterations),
            key=lambda i: (i.rank, i.device, i.start_ns),
        )
        evidence = list(dict.fromkeys(e for p in parts for e in p.evidence))
        asy = list(dict.fromkeys(e for p in parts for e in p.async_evidence))
        on = any(p.async_scheduling for p in parts)
        return ServingAnalysis(engine, its, evidence, all(p.forced for p in parts), on, asy)


__all__ = ["PHASES", "Iteration", "ServingAnalysis"]
