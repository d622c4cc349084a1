"""The transfer-bound finding: steady-state copies that no compute overlaps.

The estimate is in ``estimates`` (``transfer_recoverable``, ``shortfall``, ``attainable_gbps``)
and docs/findings.md; one-off copies (``analysis.one_off``) go to the ``one_off`` finding.
"""

from __future__ import annotations

from typing import Any

from traceforensics.analysis.context import AnalysisContext
from traceforensics.analysis.devices import DeviceRecord
from traceforensics.analysis.findings import estimates as est
from traceforensics.analysis.findings.busy_losses import window_share
from traceforensics.analysis.findings.remedies import remedy
from traceforensics.analysis.findings.results import TRANSFER_BOUND, Finding
from traceforensics.analysis.one_off import one_off_windows
from traceforensics.analysis.program import Program
from traceforensics.analysis.transfers import copy_split
from traceforensics.model.units import fmt_bytes, fmt_ns, fmt_pct, fmt_rate


def transfer_finding(
    ctx: AnalysisContext, rec: DeviceRecord, gen: int, mem_bw: float | None, program: Program
) -> list[Finding]:
    """One finding for the device's steady-state copies (``estimates``: the transfer rule).

    Copies starting inside a one-off window (``analysis.one_off``: set-up ranges, a long
    lead-in, before the first step) are left out: they belong to the ``one_off`` finding.
    """
    g = ctx.devices.index((rec.rank, rec.device)) if (rec.rank, rec.device) in ctx.devices else -1
    if g < 0:
        return []
    win = one_off_windows(ctx, g)
    split = copy_split(ctx, g, win.lo, win.hi)
    rows, exposed_ns = split.steady, split.exposed_copy_ns
    total_time = sum(r.time_ns for r in rows)
    if total_time <= 0 or exposed_ns <= 0:
        return []
    bandwidth, confidence, parts = 0.0, "medium", []
    for r in rows:
        attainable = est.attainable_gbps(r.direction, gen, mem_bw)
        missing, conf = est.shortfall(r.count, r.bytes, r.time_ns, attainable)
        bandwidth += exposed_ns * r.time_ns / total_time * missing
        confidence = "low" if conf == "low" and r.time_ns * 2 > total_time else confidence
        parts.append(_direction_text(r, attainable))
    free = max(split.steady_compute_ns - split.hidden_copy_ns, 0)
    bw_ns, overlap_ns = est.transfer_recoverable(exposed_ns, bandwidth, free)
    ns = bw_ns + overlap_ns
    share = window_share(exposed_ns, rec)
    title = (
        f"{fmt_ns(exposed_ns)} of copies ({fmt_pct(share)} of the window) not overlapped by "
        f"compute: " + "; ".join(parts[:3]) + f"; gives back {fmt_ns(overlap_ns)} by "
        f"overlapping them with compute and {fmt_ns(bw_ns)} by reaching the link's bandwidth"
    )
    figures: dict[str, Any] = {
        "copy_ns": split.copy_ns,
        "exposed_copy_ns": exposed_ns,
        "overlap_recoverable_ns": overlap_ns,
        "bandwidth_recoverable_ns": bw_ns,
        "compute_free_ns": free,
        "one_off_copy_ns": split.one_off_exposed_ns,
        "pcie_generation_assumed": gen,
        "by_direction": [r.to_json() for r in rows],
    }
    return [
        Finding(
            TRANSFER_BOUND,
            rec.rank,
            rec.device,
            ns,
            window_share(ns, rec),
            title,
            remedy(TRANSFER_BOUND, program),
            confidence,
            [],
            figures,
        )
    ]


def _direction_text(r: Any, attainable: float | None) -> str:
    size = fmt_bytes(r.bytes)
    speed = f" at {fmt_rate(r.gbps)}" if r.gbps is not None else ""
    goal = f" (attainable ~{attainable:.0f} GB/s)" if attainable is not None and r.gbps else ""
    paged = f", {r.pageable_count} of {r.count} pageable" if r.pageable_count else ""
    return f"{r.direction.upper()} {size} in {fmt_ns(r.time_ns)}{speed}{goal}{paged}"
