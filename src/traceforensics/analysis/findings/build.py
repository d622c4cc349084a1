"""Build the ranked findings of one analysis from the device records and the pass results.

One finding per (device, category) with time to give back: each idle cause with idle time,
exposed communication, transfer-bound copies, inefficient kernels, FP32 GEMMs and layout
conversions read from kernel names (``kernel_names``), zero_grad fill kernels
(``zero_grad``) and the optimizer's share of the window (``optimizer_step``). The estimate of
each is in ``estimates`` (and docs/findings.md); remedies come in the program's own terms
(``remedies.remedy``); a ``cpu_compute`` finding that is the framework's op dispatch gets the
launch remedy (``dispatch``). Once built, every finding's
remedy is checked against what the trace already shows and what its chip can do
(``preconditions.apply``). The list is sorted by ``recoverable_ns`` (``results.ranked``).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import replace
from typing import Any

from traceforensics.analysis.cause_table import MEMORY_MANAGEMENT
from traceforensics.analysis.context import AnalysisContext
from traceforensics.analysis.devices import DeviceRecord
from traceforensics.analysis.findings import estimates as est
from traceforensics.analysis.findings.busy_losses import (
    EVIDENCE_KEPT,
    attention_scores,
    comm_finding,
    efficiency_finding,
    window_share,
    within_window,
)
from traceforensics.analysis.findings.copies import transfer_finding
from traceforensics.analysis.findings.dispatch import dispatch_finding, median_kernel_ns
from traceforensics.analysis.findings.kernel_names import kernel_name_findings
from traceforensics.analysis.findings.memory import MEMORY_FACTS, memory_findings
from traceforensics.analysis.findings.optimizer_step import optimizer_step_finding
from traceforensics.analysis.findings.preconditions import apply
from traceforensics.analysis.findings.remedies import remedy
from traceforensics.analysis.findings.results import ALLOCATOR_CHURN, Finding, ranked
from traceforensics.analysis.findings.serving import (
    serving_findings,
    serving_idle_by_cause,
    without_serving,
)
from traceforensics.analysis.findings.steady import one_off_finding, steady_split
from traceforensics.analysis.findings.zero_grad import zero_grad_finding
from traceforensics.analysis.idle.gaps import Gap, IdleAnalysis
from traceforensics.analysis.idle.results import Evidence
from traceforensics.analysis.kernels.results import KernelAnalysis
from traceforensics.analysis.memory import DeviceMemory
from traceforensics.analysis.program import Program
from traceforensics.analysis.serving import ServingAnalysis
from traceforensics.model.units import fmt_ns, fmt_pct


def build_findings(
    ctx: AnalysisContext,
    records: list[DeviceRecord],
    idle: IdleAnalysis,
    kernels: KernelAnalysis,
    program: Program,
    serving: ServingAnalysis | None = None,
    memory: Sequence[DeviceMemory] = (),
) -> list[Finding]:
    """Every finding of every device, largest ``recoverable_ns`` first; a server's iterations
    (``serving``) and the memory timelines (``memory``) add theirs."""
    info = {(d.rank, d.device): d for d in ctx.session.meta.devices}
    bw = {(p["rank"], p["device"]): p.get("mem_bw_bytes_per_s") for p in kernels.peaks}
    scores = attention_scores(ctx)
    out: list[Finding] = []
    # a server's gaps between iterations are the serving findings' time: the idle causes in
    # them are left out of the idle-cause findings (counted once)
    taken = serving_idle_by_cause(ctx, records, serving)
    for rec in records:
        key = (rec.rank, rec.device)
        split = steady_split(ctx, rec, idle)
        if key in taken:
            split = replace(split, steady=without_serving(split.steady, taken[key]))
        where = f" in {split.steps} step{'s' * (split.steps != 1)}" if split.steps else ""
        idle_found = _idle_findings(rec, split.steady, where, idle, program)
        if any(f.category == "cpu_compute" for f in idle_found):
            gaps = [g for g in idle.gaps if (g.rank, g.device) == key]
            median = median_kernel_ns(ctx, rec)
            idle_found = [dispatch_finding(f, gaps, median, program) for f in idle_found]
        out += idle_found
        out += one_off_finding(rec, split, idle, program)
        if rec.exposed_comm_ns > 0:
            out.append(comm_finding(ctx, rec, program))
        if rec.exposed_copy_ns > 0:
            dev = info.get(key)
            gen = est.pcie_generation(dev.compute_capability if dev else None, _vendor(dev))
            out += transfer_finding(ctx, rec, gen, bw.get(key), program)
        ops = [o for o in kernels.ops if (o.rank, o.device) == key]
        out += efficiency_finding(rec, ops, program, scores.get(rec.rank))
        out += kernel_name_findings(ctx, rec, program)
        out += zero_grad_finding(ctx, rec, program)
        out += optimizer_step_finding(ctx, rec, program)
    if serving is not None:
        out += serving_findings(ctx, records, serving, program)
    out += memory_findings(ctx, records, memory, program)
    # the allocator's idle in the loop is allocator_churn's: its memory_management finding
    # (the same time, by cause) goes
    churned = {(f.rank, f.device) for f in out if f.category == ALLOCATOR_CHURN}
    out = [
        f for f in out if not (f.category == MEMORY_MANAGEMENT and (f.rank, f.device) in churned)
    ]
    by_key = {(r.rank, r.device): r for r in records}
    capped = [apply(_within_window(f, by_key[(f.rank, f.device)]), program) for f in out]
    return ranked([f for f in capped if f.recoverable_ns > 0 or f.category in MEMORY_FACTS])


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
    key = (rec.rank, rec.device)
    listed = [g for g in idle.gaps if (g.rank, g.device) == key]
    examples = [g for g in idle.examples if (g.rank, g.device) == key]
    for cause, ns in by_cause.items():
        if ns <= 0:
            continue
        proof = _idle_evidence(cause, listed, examples)
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


def _idle_evidence(cause: str, listed: list[Gap], examples: list[Gap]) -> list[Evidence]:
    """Evidence of an idle-cause finding: first the device's gap with the most of ``cause``
    (``IdleAnalysis.examples``: tiny pick-up gaps never make the listed top-N), then the listed
    gaps' items for the cause, that gap left out. The example comes first so the list does
    not depend on the job-wide ``top_gaps`` cut beyond its listed tail (``fanout.merge``)."""
    best = max(examples, key=lambda g: g.causes.get(cause, 0), default=None)
    head = [] if best is None or not best.causes.get(cause) else [best]
    rest = [g for g in listed if not head or g.start_ns != head[0].start_ns]
    return [e for g in head + rest for e in g.evidence if e.cause == cause][:EVIDENCE_KEPT]
