"""Build the ranked findings of one analysis from the device records and the pass results.

One finding per (device, category) with time to give back: each idle cause with idle time,
exposed communication, transfer-bound copies and inefficient kernels. The estimate of each is
in ``estimates`` (and docs/findings.md); remedies come in the program's own terms
(``remedies.remedy``). The list is sorted by ``recoverable_ns`` (``results.ranked``).
"""

from __future__ import annotations

from dataclasses import replace
from typing import Any

from traceforensics.analysis.context import AnalysisContext
from traceforensics.analysis.devices import DeviceRecord
from traceforensics.analysis.findings import estimates as est
from traceforensics.analysis.findings.busy_losses import (
    EVIDENCE_KEPT,
    attention_scores,
    comm_finding,
    efficiency_finding,
    transfer_finding,
    window_share,
    within_window,
)
from traceforensics.analysis.findings.program import Program
from traceforensics.analysis.findings.remedies import remedy
from traceforensics.analysis.findings.results import ONE_OFF, Finding, ranked
from traceforensics.analysis.findings.steady import SteadySplit, steady_split
from traceforensics.analysis.idle.gaps import IdleAnalysis
from traceforensics.analysis.kernels.results import KernelAnalysis
from traceforensics.model.units import fmt_ns, fmt_pct


def build_findings(
    ctx: AnalysisContext,
    records: list[DeviceRecord],
    idle: IdleAnalysis,
    kernels: KernelAnalysis,
    program: Program,
) -> list[Finding]:
    """Every finding of every device, largest ``recoverable_ns`` first."""
    info = {(d.rank, d.device): d for d in ctx.session.meta.devices}
    bw = {(p["rank"], p["device"]): p.get("mem_bw_bytes_per_s") for p in kernels.peaks}
    scores = attention_scores(ctx)
    out: list[Finding] = []
    for rec in records:
        key = (rec.rank, rec.device)
        split = steady_split(rec, idle)
        where = f" in {split.steps} step{'s' * (split.steps != 1)}" if split.steps else ""
        out += _idle_findings(rec, split.steady, where, idle, program)
        out += _one_off_finding(rec, split, idle, program)
        if rec.exposed_comm_ns > 0:
            out.append(comm_finding(ctx, rec, program))
        if rec.exposed_copy_ns > 0:
            dev = info.get(key)
            gen = est.pcie_generation(dev.compute_capability if dev else None, _vendor(dev))
            out += transfer_finding(rec, gen, bw.get(key), program)
        ops = [o for o in kernels.ops if (o.rank, o.device) == key]
        out += efficiency_finding(rec, ops, program, scores.get(rec.rank))
    by_key = {(r.rank, r.device): r for r in records}
    capped = [_within_window(f, by_key[(f.rank, f.device)]) for f in out]
    return ranked([f for f in capped if f.recoverable_ns > 0])


def _within_window(finding: Finding, rec: DeviceRecord) -> Finding:
    """The rule for every finding: it never gives back more than its device's window
    (``busy_losses.within_window``), and its share of the window is at most 1."""
    ns = within_window(finding.recoverable_ns, rec)
    if ns == finding.recoverable_ns and finding.share_of_window <= 1.0:
        return finding
    return replace(finding, recoverable_ns=ns, share_of_window=min(finding.share_of_window, 1.0))


def _vendor(dev: Any) -> str | None:
    return None if dev is None else dev.vendor


def _idle_findings(
    rec: DeviceRecord, by_cause: dict[str, int], where: str, idle: IdleAnalysis, program: Program
) -> list[Finding]:
    """One finding per idle cause of the device's steady state (``steady.steady_split``)."""
    out: list[Finding] = []
    gaps = [g for g in idle.gaps if (g.rank, g.device) == (rec.rank, rec.device)]
    for cause, ns in by_cause.items():
        if ns <= 0:
            continue
        proof = [e for g in gaps for e in g.evidence if e.cause == cause][:EVIDENCE_KEPT]
        share = window_share(ns, rec)
        title = f"GPU idle {fmt_ns(ns)}{where} ({fmt_pct(share)} of the window): {cause}"
        out.append(
            Finding(
                cause,
                rec.rank,
                rec.device,
                ns,
                share,
                title,
                remedy(cause, program),
                est.IDLE_CONFIDENCE.get(cause, "medium"),
                proof,
                {"idle_ns": ns},
            )
        )
    return out


def _one_off_finding(
    rec: DeviceRecord, split: SteadySplit, idle: IdleAnalysis, program: Program
) -> list[Finding]:
    """Idle outside the steps (start-up, wind-down): happens once, not per step."""
    ns = sum(split.one_off.values())
    if ns <= 0 or split.first_step_ns is None:
        return []
    lo, hi = split.first_step_ns, split.last_step_end_ns or split.first_step_ns
    proof = [
        e
        for g in idle.gaps
        if (g.rank, g.device) == (rec.rank, rec.device) and not lo <= g.start_ns < hi
        for e in g.evidence
        if e.cause
    ][:EVIDENCE_KEPT]
    top = sorted(((c, v) for c, v in split.one_off.items() if v), key=lambda t: -t[1])[:3]
    causes = ", ".join(f"{c} {fmt_ns(v)}" for c, v in top)
    share = window_share(ns, rec)
    title = (
        f"{fmt_ns(ns)} of idle ({fmt_pct(share)} of the window) outside the "
        f"{split.steps} step{'s' * (split.steps != 1)}, once per run (start-up, wind-down): "
        f"{causes}"
    )
    figures = {"one_off_by_cause": dict(split.one_off), "steps": split.steps}
    return [
        Finding(
            ONE_OFF,
            rec.rank,
            rec.device,
            ns,
            share,
            title,
            remedy(ONE_OFF, program),
            "medium",
            proof,
            figures,
        )
    ]
