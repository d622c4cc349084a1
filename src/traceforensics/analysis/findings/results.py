"""The typed result of the findings step: one ``Finding`` per way a device loses time.

``category`` is a contract (docs/findings.md, docs/json-output.md): the idle cause ids of
docs/causes.md, plus ``exposed_communication``, ``transfer_bound``, ``kernel_efficiency``,
``one_off``, ``straggler_wait``, ``fp32_matmul``, ``layout_conversion``, ``zero_grad``,
``optimizer_step``, the serving ones (``serving_scheduler_gap``, ``serving_eager_decode``) and
the memory ones (``allocator_churn``, ``reserved_unused``, ``memory_near_capacity``).
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
#: GEMM/convolution kernels whose names say FP32 without tensor cores on a tensor-core GPU.
FP32_MATMUL: Final = "fp32_matmul"
#: Memory-layout conversion kernels (cuDNN nchwToNhwc/nhwcToNchw, MIOpen transposes).
LAYOUT_CONVERSION: Final = "layout_conversion"
#: Gradient-zeroing fill kernels launched by optimizer.zero_grad (no set_to_none).
ZERO_GRAD: Final = "zero_grad"
#: The optimizer's update (``Optimizer.step`` ranges) a large share of the window.
OPTIMIZER_STEP: Final = "optimizer_step"
#: Serving (issue 48): the engine's host work between iterations (scheduling, sampling,
#: detokenisation) leaves the GPU idle.
SERVING_SCHEDULER_GAP: Final = "serving_scheduler_gap"
#: Serving: decode iterations run eagerly for batch sizes without a captured graph.
SERVING_EAGER_DECODE: Final = "serving_eager_decode"
#: Memory (issue 48): allocator calls (cudaMalloc/cudaFree, empty_cache) that leave the GPU idle.
ALLOCATOR_CHURN: Final = "allocator_churn"
#: Memory: the caching allocator holds far more than is allocated at the peak.
RESERVED_UNUSED: Final = "reserved_unused"
#: Memory: the peak is near the device's capacity.
MEMORY_NEAR_CAPACITY: Final = "memory_near_capacity"
#: Every category id, in tie-break order (idle causes first, as in docs/causes.md).
CATEGORIES: Final[tuple[str, ...]] = (
    *CAUSES,
    EXPOSED_COMMUNICATION,
    TRANSFER_BOUND,
    KERNEL_EFFICIENCY,
    ONE_OFF,
    STRAGGLER_WAIT,
    FP32_MATMUL,
    LAYOUT_CONVERSION,
    ZERO_GRAD,
    OPTIMIZER_STEP,
    SERVING_SCHEDULER_GAP,
    SERVING_EAGER_DECODE,
    ALLOCATOR_CHURN,
    RESERVED_UNUSED,
    MEMORY_NEAR_CAPACITY,
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
    """Largest ``recoverable_ns`` first; ties in ``CATEGORIES`` order, then rank and device.

    One-off work (``one_off``: set-up, warm-up, the lead-in before the first kernel) is never
    the first change for the steady state: while any steady finding is not minor, every
    ``one_off`` finding ranks after the steady ones (issue 44). When all steady findings are
    minor, the one-off time leads: the run is mostly warm-up, and the advice is to profile
    steady steps."""
    order = {c: i for i, c in enumerate(CATEGORIES)}
    major = any(f.category != ONE_OFF and not f.minor for f in findings)
    return sorted(
        findings,
        key=lambda f: (
            major and f.category == ONE_OFF,
            -f.recoverable_ns,
            order.get(f.category, len(order)),
            f.rank,
            f.device,
        ),
    )
