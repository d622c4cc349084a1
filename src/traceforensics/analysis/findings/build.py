"""Build the ranked findings of one analysis from the device records and the pass results.

One finding per (device, category) with time to give back: each idle cause with idle time,
exposed communication, transfer-bound copies and inefficient kernels. The estimate of each is
in ``estimates`` (and docs/findings.md); remedies come in the program's own terms
(``remedies.remedy``). The list is sorted by ``recoverable_ns`` (``results.ranked``).
"""

from __future__ import annotations

from typing import Any

import polars as pl

from traceforensics.analysis.context import AnalysisContext
from traceforensics.analysis.devices import DeviceRecord
from traceforensics.analysis.findings import estimates as est
from traceforensics.analysis.findings.program import Program
from traceforensics.analysis.findings.remedies import attention_remedy, remedy
from traceforensics.analysis.findings.results import (
    EXPOSED_COMMUNICATION,
    KERNEL_EFFICIENCY,
    ONE_OFF,
    TRANSFER_BOUND,
    Finding,
    ranked,
)
from traceforensics.analysis.findings.steady import SteadySplit, steady_split
from traceforensics.analysis.idle.gaps import IdleAnalysis
from traceforensics.analysis.idle.results import Evidence
from traceforensics.analysis.kernels.flops import parse_json_list
from traceforensics.analysis.kernels.results import KernelAnalysis, OpRow
from traceforensics.model.schema import ARG_INPUT_DIMS
from traceforensics.model.units import fmt_ns, fmt_pct

#: Evidence items kept per finding.
EVIDENCE_KEPT = 3
#: Smallest sequence length whose S x S softmax counts as materialised attention.
MATERIALISED_MIN_SEQ = 512


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
            out.append(_comm_finding(ctx, rec, program))
        if rec.exposed_copy_ns > 0:
            dev = info.get(key)
            gen = est.pcie_generation(dev.compute_capability if dev else None, _vendor(dev))
            out += _transfer_finding(rec, gen, bw.get(key), program)
        ops = [o for o in kernels.ops if (o.rank, o.device) == key]
        out += _efficiency_finding(rec, ops, program, scores.get(rec.rank))
    return ranked([f for f in out if f.recoverable_ns > 0])


def _vendor(dev: Any) -> str | None:
    return None if dev is None else dev.vendor


def _share(ns: int, rec: DeviceRecord) -> float:
    return ns / rec.window_ns if rec.window_ns else 0.0


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
        share = _share(ns, rec)
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
    share = _share(ns, rec)
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


def _comm_finding(ctx: AnalysisContext, rec: DeviceRecord, program: Program) -> Finding:
    lo, hi = rec.window_start_ns, rec.window_start_ns + rec.window_ns
    top = (
        ctx.work.filter(
            (pl.col("rank") == rec.rank)
            & (pl.col("device") == rec.device)
            & pl.col("is_comm").fill_null(False)
            & (pl.col("start_ns") >= lo)
            & (pl.col("end_ns") <= hi)
        )
        .sort("dur_ns", descending=True)
        .head(EVIDENCE_KEPT)
    )
    proof = [
        Evidence(EXPOSED_COMMUNICATION, "kernel", str(n), int(s), int(d), None, "collective")
        for n, s, d in top.select("name", "start_ns", "dur_ns").iter_rows()
    ]
    ns, share = rec.exposed_comm_ns, _share(rec.exposed_comm_ns, rec)
    title = (
        f"{fmt_ns(ns)} of communication ({fmt_pct(share)} of the window) not overlapped by "
        f"compute, of {fmt_ns(rec.comm_ns)} in all"
    )
    figures = {"comm_ns": rec.comm_ns, "exposed_comm_ns": ns}
    return Finding(
        EXPOSED_COMMUNICATION,
        rec.rank,
        rec.device,
        ns,
        share,
        title,
        remedy(EXPOSED_COMMUNICATION, program),
        "medium",
        proof,
        figures,
    )


def _transfer_finding(
    rec: DeviceRecord, gen: int, mem_bw: float | None, program: Program
) -> list[Finding]:
    """One finding: the exposed copy time split over directions by their copy time."""
    total_time = sum(r.time_ns for r in rec.transfers)
    if total_time <= 0:
        return []
    recoverable, confidence, parts = 0.0, "medium", []
    for r in rec.transfers:
        attainable = est.attainable_gbps(r.direction, gen, mem_bw)
        missing, conf = est.shortfall(r.count, r.bytes, r.time_ns, attainable)
        recoverable += rec.exposed_copy_ns * r.time_ns / total_time * missing
        confidence = "low" if conf == "low" and r.time_ns * 2 > total_time else confidence
        parts.append(_direction_text(r, attainable))
    ns = int(recoverable)
    share = _share(rec.exposed_copy_ns, rec)
    title = (
        f"{fmt_ns(rec.exposed_copy_ns)} of copies ({fmt_pct(share)} of the window) not "
        f"overlapped by compute: " + "; ".join(parts[:3])
    )
    figures: dict[str, Any] = {
        "copy_ns": rec.copy_ns,
        "exposed_copy_ns": rec.exposed_copy_ns,
        "pcie_generation_assumed": gen,
        "by_direction": [r.to_json() for r in rec.transfers],
    }
    return [
        Finding(
            TRANSFER_BOUND,
            rec.rank,
            rec.device,
            ns,
            _share(ns, rec),
            title,
            remedy(TRANSFER_BOUND, program),
            confidence,
            [],
            figures,
        )
    ]


def _direction_text(r: Any, attainable: float | None) -> str:
    size = f"{r.bytes / 1e9:.2f} GB" if r.bytes >= 10**7 else f"{r.bytes / 1e6:.2f} MB"
    speed = f" at {r.gbps:.1f} GB/s" if r.gbps is not None else ""
    goal = f" (attainable ~{attainable:.0f} GB/s)" if attainable is not None and r.gbps else ""
    paged = f", {r.pageable_count} of {r.count} pageable" if r.pageable_count else ""
    return f"{r.direction.upper()} {size} in {fmt_ns(r.time_ns)}{speed}{goal}{paged}"


def attention_scores(ctx: AnalysisContext) -> dict[int, tuple[int, Evidence]]:
    """Per rank, the largest materialised attention: a softmax whose input's last two dims are
    equal and at least ``MATERIALISED_MIN_SEQ`` (an S x S score matrix written to memory; a
    fused attention kernel never stores it). ``(S, the softmax op as evidence)``."""
    soft = ctx.cpu_ops.filter(pl.col("name").cast(pl.String).str.contains(r"softmax"))
    if soft.height == 0:
        return {}
    dims = ctx.args.filter(pl.col("key").cast(pl.String) == ARG_INPUT_DIMS).select(
        "event_id", "value"
    )
    rows = soft.join(dims, on="event_id", how="inner").select("rank", "event_id", "value")
    ev = ctx.session.events.select("event_id", "start_ns", "dur_ns", pl.col("name").cast(pl.String))
    out: dict[int, tuple[int, Evidence]] = {}
    for rank, eid, value in rows.iter_rows():
        first = (parse_json_list(value) or [[]])[0]
        shape = [x for x in first if type(x) is int] if isinstance(first, list) else []
        if len(shape) < 2 or shape[-1] != shape[-2] or shape[-1] < MATERIALISED_MIN_SEQ:
            continue
        if rank in out and out[rank][0] >= shape[-1]:
            continue
        _, start, dur, name = ev.row(by_predicate=pl.col("event_id") == eid)
        detail = f"softmax over {shape[-1]} x {shape[-1]} scores (input {shape})"
        out[int(rank)] = (
            shape[-1],
            Evidence(KERNEL_EFFICIENCY, "cpu_op", name, start, dur, None, detail),
        )
    return out


def _efficiency_finding(
    rec: DeviceRecord, ops: list[OpRow], program: Program, scores: tuple[int, Evidence] | None
) -> list[Finding]:
    """Roofline shortfall summed over the device's modelled ops (suspect figures skipped);
    a materialised attention on the rank is named in the title and the evidence."""
    scored: list[tuple[float, OpRow, str]] = []
    for o in ops:
        if o.suspect:  # above peak or against a guessed peak (kernels.suspect): no shortfall
            continue
        # without a byte count (no dtype sizes recorded) an op is judged on its FLOPs
        if o.bound in ("compute", None) and o.mfu is not None:
            missing = max(0.0, 1.0 - o.mfu / est.ATTAINABLE_MFU)
            how = f"{fmt_pct(o.mfu)} MFU"
        elif o.bound == "memory" and o.membw_share is not None:
            missing = max(0.0, 1.0 - o.membw_share / est.ATTAINABLE_MEMBW)
            how = f"{fmt_pct(o.membw_share)} of memory bandwidth"
        else:
            continue
        scored.append((o.kernel_ns * missing, o, how))
    ns = int(sum(s for s, _, _ in scored))
    if ns <= 0:
        return []
    scored.sort(key=lambda t: -t[0])
    proof = [
        Evidence(
            KERNEL_EFFICIENCY,
            "cpu_op",
            o.op,
            rec.window_start_ns,
            o.kernel_ns,
            None,
            f"{o.shapes} {o.dtype or ''}: {how} ({o.bound or 'FLOP'}-bound); kernel time over "
            f"x{o.count} calls in the window",
        )
        for _, o, how in scored[:EVIDENCE_KEPT]
    ]
    share = _share(ns, rec)
    top = scored[0][1]
    title = (
        f"kernels below what the chip can do: about {fmt_ns(ns)} ({fmt_pct(share)} of the "
        f"window) recoverable; largest {top.op} ({scored[0][2]})"
    )
    fix = remedy(KERNEL_EFFICIENCY, program)
    if scores is not None:
        title = f"materialised attention ({scores[0]} x {scores[0]} scores): " + title
        proof = [scores[1], *proof][:EVIDENCE_KEPT]
        fix = f"{attention_remedy(program)}; then {fix}"
    figures = {
        "attainable_mfu": est.ATTAINABLE_MFU,
        "attainable_membw": est.ATTAINABLE_MEMBW,
        "ops_scored": len(scored),
    }
    return [
        Finding(
            KERNEL_EFFICIENCY,
            rec.rank,
            rec.device,
            ns,
            share,
            title,
            fix,
            "low",
            proof,
            figures,
        )
    ]
