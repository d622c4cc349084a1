"""The typed result of the findings step: one ``Finding`` per way a device loses time.

``category`` is a contract (docs/findings.md, docs/json-output.md): the 12 idle cause ids of
docs/causes.md, plus ``exposed_communication``, ``transfer_bound``, ``kernel_efficiency``,
``one_off`` and ``straggler_wait``.
``recoverable_ns`` is an estimate of the time the change would give back (integer ns; the rule
per category is in docs/findings.md); findings are sorted by it, largest first.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Final

from traceforensics.analysis.idle.causes import CAUSES
from traceforensics.analysis.idle.results import Evidence

EXPOSED_COMMUNICATION: Final = "exposed_communication"
TRANSFER_BOUND: Final = "transfer_bound"
KERNEL_EFFICIENCY: Final = "kernel_efficiency"
#: Start-up time before the first complete step (reserved: remedies exist, no finding yet).
ONE_OFF: Final = "one_off"
#: A rank's collective wait for the job's straggler (``findings.stragglers``).
STRAGGLER_WAIT: Final = "straggler_wait"
#: Every category id, in tie-break order (idle causes first, as in docs/causes.md).
CATEGORIES: Final[tuple[str, ...]] = (
    *CAUSES,
    EXPOSED_COMMUNICATION,
    TRANSFER_BOUND,
    KERNEL_EFFICIENCY,
    ONE_OFF,
    STRAGGLER_WAIT,
)
#: Below this share of the window a finding is minor: the verdict says nothing large was lost.
MINOR_SHARE: Final = 0.02


@dataclass(frozen=True)
class Finding:
    """One way one device loses time, with what changing it would give back."""

    category: str
    rank: int
    device: int
    recoverable_ns: int
    share_of_window: float
    title: str
    remedy: str
    confidence: str
    evidence: list[Evidence] = field(default_factory=list)
    figures: dict[str, Any] = field(default_factory=dict)

    @property
    def minor(self) -> bool:
        return self.share_of_window < MINOR_SHARE

    def to_json(self) -> dict[str, Any]:
        return {
            "category": self.category,
            "rank": self.rank,
            "device": self.device,
            "recoverable_ns": self.recoverable_ns,
            "share_of_window": round(self.share_of_window, 6),
            "title": self.title,
            "remedy": self.remedy,
            "confidence": self.confidence,
            "minor": self.minor,
            "evidence": [e.to_json() for e in self.evidence],
            "figures": dict(self.figures),
        }


def ranked(findings: list[Finding]) -> list[Finding]:
    """Largest ``recoverable_ns`` first; ties in ``CATEGORIES`` order, then rank and device."""
    order = {c: i for i, c in enumerate(CATEGORIES)}
    return sorted(
        findings,
        key=lambda f: (-f.recoverable_ns, order.get(f.category, len(order)), f.rank, f.device),
    )
