"""Join the parts of ranks analysed apart into one ``Analysis``, as analysing them together
gives it.

Rules (every list as the joint analysis orders it):

- per-device lists (device records, idle per device, steps, step summaries, stream gaps,
  patterns, MFU per device and per step) are concatenated in (rank, device) order: each part
  holds one rank, already in device order;
- top-K lists are re-sorted with the keys their pass sorts by and cut again: the ``top_gaps``
  longest gaps (longest first, then earliest start, then (rank, device): the gap list's
  order), short kernels and ops (cut at ``rows_kept``); op families are re-sorted whole. Each
  group of these lists belongs to one rank, so every rank's own top K hold the job's;
- counts and sums are added (short kernels, kernels, kernels without a FLOPs model: every
  rank's (launching op, name) groups summed, then the job's top 10 cut);
- peaks: the described devices in input order, then the others by (rank, device);
- the program: detected from every rank's name counts summed (``findings.program``);
- diagnostics: every warning of the job's metadata and of each rank's analysis with its code
  (``analysis.diagnostics``; a rank's ``analysis_failed``/``cpu_only`` text says its rank); the
  host steps of every rank when no rank has GPU activity;
- findings quote the evidence of the gaps the job keeps (a rank kept more of its own), the
  kernel-efficiency ones are made again from the ops the job keeps, and all are re-ranked
  (``findings.results.ranked``); then the multi-rank view
  (``analysis.ranks.rank_analysis``) on the joined parts, ``dev`` renumbered into the job's
  sorted (rank, device) list, and the straggler findings (``findings.stragglers``).
"""

from __future__ import annotations

from collections import Counter
from dataclasses import replace
from typing import Any

import polars as pl

from traceforensics.analysis.diagnostics import (
    ANALYSIS_FAILED,
    CPU_ONLY,
    GPU_ACTIVITY_MISSING,
    MONITOR_UNALIGNED,
    Diagnostic,
    coded,
    meta_codes,
)
from traceforensics.analysis.findings.busy_losses import efficiency_finding
from traceforensics.analysis.findings.results import KERNEL_EFFICIENCY, Finding, ranked
from traceforensics.analysis.findings.stragglers import straggler_findings
from traceforensics.analysis.host_steps import HostBreakdown
from traceforensics.analysis.idle.gaps import IdleAnalysis
from traceforensics.analysis.kernels.forensics import UNKNOWN_TOP
from traceforensics.analysis.kernels.results import (
    FamilyRow,
    KernelAnalysis,
    OpRow,
    ShortKernelRow,
    UnknownFlops,
)
from traceforensics.analysis.monitoring.align import aligned_monitor
from traceforensics.analysis.options import AnalysisOptions
from traceforensics.analysis.peaks import resolve_peaks
from traceforensics.analysis.pipeline import Analysis
from traceforensics.analysis.program import Program, program_from
from traceforensics.analysis.ranks import rank_analysis
from traceforensics.analysis.ranks.throttle import with_monitor
from traceforensics.analysis.serving import ServingAnalysis
from traceforensics.fanout.parts import RankPart, RankResults
from traceforensics.model.monitor import MonitorLog
from traceforensics.model.schema import empty_args, empty_events
from traceforensics.model.session import TraceMeta, TraceSession


def merge_parts(
    parts: list[RankPart],
    meta: TraceMeta,
    options: AnalysisOptions,
    monitor_log: MonitorLog | None = None,
) -> Analysis:
    """One ``Analysis`` of the job from its parts (``parts``: every rank file that is a trace,
    in input order; ``meta``: the job's metadata, as the joint loader builds it)."""
    live = sorted((p for p in parts if p.results is not None), key=lambda p: p.rank)
    if not live:  # the selected steps are on no rank: the joint cut says so
        dropped = [p.dropped for p in sorted(parts, key=lambda p: p.rank) if p.dropped]
        dropped[0].raise_()
    res = [p.results for p in live if p.results is not None]
    devs = [d for r in res for d in r.devices]
    records = [d for r in res for d in r.records]
    idle = IdleAnalysis(
        devices=[d for r in res for d in r.idle.devices],
        gaps=sorted(
            (g for r in res for g in r.idle.gaps),
            key=lambda g: (-g.dur_ns, g.start_ns, g.rank, g.device),
        )[: max(options.idle.top_gaps, 0)],
        steps=[s for r in res for s in r.idle.steps],
        step_summary=[s for r in res for s in r.idle.step_summary],
        stream_gaps=[s for r in res for s in r.idle.stream_gaps],
        examples=[g for r in res for g in r.idle.examples],
    )
    # the job's program from every rank's name counts summed: what one table of all gives
    names = pl.concat([r.names for r in res]).group_by("kind", "name").agg(pl.col("len").sum())
    program = program_from(names, meta)
    kernels = merge_kernels(res, options, job_peaks(parts, options))
    ranks = rank_analysis(
        _global_dev([r.collectives for r in res], res),
        _global_dev([r.steps for r in res], res),
        devs,
        records,
        idle,
        meta.distributed,
    )
    kept = Counter(g.rank for g in idle.gaps)
    findings = ranked(
        [f for p in live for f in _job_evidence(p, kept[p.rank]) if f.category != KERNEL_EFFICIENCY]
        + [f for p in live for f in _efficiency(p, kernels, program) if f.recoverable_ns > 0]
    )
    warnings = list(meta.warnings)
    codes = {k: v for p in parts for k, v in meta_codes(p.meta).items()} | meta_codes(meta)
    monitor = None
    events = sum(r.event_count for r in res)
    if monitor_log is not None:
        span = (min(r.trace_span[0] for r in res), max(r.trace_span[1] for r in res))
        monitor, note = aligned_monitor(meta, span, events > 0, monitor_log)
        if note:
            warnings.append(note)
            codes[note] = MONITOR_UNALIGNED
    made = _rank_diagnostics(live, warnings, codes)
    ranks = with_monitor(ranks, monitor)
    return Analysis(
        session=TraceSession(empty_events(), meta, empty_args()),
        options=options,
        devices=records,
        idle=idle,
        kernels=kernels,
        patterns=[d for r in res for d in r.patterns],
        program=program,
        findings=straggler_findings(findings, ranks, records, program),
        monitor=monitor,
        warnings=warnings,
        ranks=ranks,
        event_total=events,
        diagnostics=coded(warnings, codes, made),
        host=_job_host(res) if not records else None,
        work_size=[w for r in res for w in r.work_size],
        memory=[m for r in res for m in r.memory],
        serving=ServingAnalysis.merge([r.serving for r in res if r.serving is not None]),
    )


#: The codes a rank's own analysis gives (the others come from the files' metadata).
_RANK_BORN = (GPU_ACTIVITY_MISSING, ANALYSIS_FAILED, CPU_ONLY)


def _rank_diagnostics(
    live: list[RankPart], warnings: list[str], codes: dict[str, str]
) -> list[Diagnostic]:
    """The diagnostics every rank's analysis made (``_RANK_BORN``), each rank's, returned; a
    warning's text is added to ``warnings`` and its code to ``codes`` (``cpu_only`` is no
    warning). The texts of a job of several ranks start with its rank."""
    made: list[Diagnostic] = []
    for p in live:
        for d in p.results.diagnostics if p.results is not None else []:
            if d.code not in _RANK_BORN:
                continue
            # (as the joint analysis of several ranks words them)
            text = f"rank {p.rank}: {d.message}" if len(live) > 1 else d.message
            made.append(Diagnostic(d.code, text, d.count))
            if d.code != CPU_ONLY and text not in codes:
                warnings.append(text)
                codes[text] = d.code
    return made


def _job_host(res: list[RankResults]) -> HostBreakdown:
    """The host steps of every rank, in (rank, start) order (a job without GPU activity)."""
    hosts = [r.host for r in res if r.host is not None]
    steps = sorted((s for h in hosts for s in h.steps), key=lambda s: (s.rank, s.start_ns))
    return HostBreakdown(steps, tuple(sorted({src for h in hosts for src in h.sources})))


def _job_evidence(part: RankPart, kept: int) -> list[Finding]:
    """The part's findings quoting only the gaps the job keeps (its ``kept`` longest): the
    first evidence items of a device's kept gaps are the items of the rank's own first
    ``kept`` gaps among the rank's first items, in order."""
    assert part.results is not None
    res = part.results
    out = []
    for f, gaps in zip(res.findings, res.evidence_gaps, strict=True):
        evidence = [e for e, g in zip(f.evidence, gaps, strict=True) if g is None or g < kept]
        out.append(f if len(evidence) == len(f.evidence) else replace(f, evidence=evidence))
    return out


def _efficiency(part: RankPart, kernels: KernelAnalysis, program: Program) -> list[Finding]:
    """The kernel-efficiency findings of the part's devices, made from the ops the job keeps
    (``findings.busy_losses.efficiency_finding``, as ``findings.build`` makes them)."""
    assert part.results is not None
    out = []
    for rec in part.results.records:
        ops = [o for o in kernels.ops if (o.rank, o.device) == (rec.rank, rec.device)]
        out += efficiency_finding(rec, ops, program, part.results.attention)
    return out


def _global_dev(frames: list[pl.DataFrame], res: list[RankResults]) -> pl.DataFrame:
    """The parts' frames as one, ``dev`` renumbered into the job's (rank, device) list: a
    part's devices are one block of it, in rank order."""
    out, offset = [], 0
    for frame, r in zip(frames, res, strict=True):
        out.append(frame.with_columns(pl.col("dev") + offset))
        offset += len(r.devices)
    return pl.concat(out, how="vertical_relaxed")


def _nulls_first(value: Any) -> tuple[bool, Any]:
    # polars sorts nulls first by default, ascending or descending
    return (value is not None, value)


def _short_key(r: ShortKernelRow) -> tuple[Any, ...]:
    # ``kernels.short.short_kernel_rows``: recoverable, total (descending), then the group
    return (
        -r.recoverable_ns,
        -r.total_ns,
        r.rank,
        r.device,
        *map(_nulls_first, (r.name, r.launching_op)),
    )


def _op_key(r: OpRow) -> tuple[Any, ...]:
    # ``kernels.rows.op_rows``: kernel time (descending), then the group
    text = (r.op, r.shapes, r.dtype, r.peak_dtype)
    return (-r.kernel_ns, *map(_nulls_first, text), r.rank, r.device)


def _family_key(r: FamilyRow) -> tuple[Any, ...]:
    # ``kernels.rows.family_rows``
    return (-r.kernel_ns, r.family, r.rank, r.device)


def merge_kernels(
    res: list[RankResults], options: AnalysisOptions, peaks: list[dict[str, Any]]
) -> KernelAnalysis:
    """The kernel pass's result of the job from the ranks' (module docstring)."""
    keep = options.kernels.rows_kept
    ka = [r.kernels for r in res]
    return KernelAnalysis(
        short_kernels=sorted((s for k in ka for s in k.short_kernels), key=_short_key)[:keep],
        ops=sorted((o for k in ka for o in k.ops), key=_op_key)[:keep],
        families=sorted((f for k in ka for f in k.families), key=_family_key),
        mfu_by_device=[m for k in ka for m in k.mfu_by_device],
        mfu_by_step=[m for k in ka for m in k.mfu_by_step],
        # every kernel is in its device's MFU row: their kernel time is all kernel time
        unknown_flops_kernels=_unknown(ka, sum(m.kernel_ns for k in ka for m in k.mfu_by_device)),
        short_kernel_us=options.kernels.short_kernel_us,
        short_kernel_count=sum(k.short_kernel_count for k in ka),
        short_kernel_ns=sum(k.short_kernel_ns for k in ka),
        kernel_count=sum(k.kernel_count for k in ka),
        peaks=peaks,
    )


def _unknown(ka: list[KernelAnalysis], total: int) -> UnknownFlops:
    """Kernels no FLOPs model covers, over the job: counts and time added, every rank's
    (launching op, name) groups summed, then the job's top 10 cut (what one table gives)."""
    ns = sum(k.unknown_flops_kernels.kernel_ns for k in ka)
    count: Counter[tuple[Any, Any]] = Counter()
    time: Counter[tuple[Any, Any]] = Counter()
    for k in ka:
        for row in k.unknown_flops_kernels.groups:
            key = (row["launching_op"], row["name"])
            count[key] += int(row["count"])
            time[key] += int(row["kernel_ns"])
    order = sorted(time, key=lambda g: (-time[g], *map(_nulls_first, g)))
    top = [
        {
            "launching_op": op,
            "name": name,
            "count": count[(op, name)],
            "kernel_ns": time[(op, name)],
        }
        for op, name in order[:UNKNOWN_TOP]
    ]
    return UnknownFlops(
        count=sum(k.unknown_flops_kernels.count for k in ka),
        kernel_ns=ns,
        share_of_kernel_ns=ns / total if total else None,
        top=top,
    )


def job_peaks(parts: list[RankPart], options: AnalysisOptions) -> list[dict[str, Any]]:
    """The peak of every device, as the joint kernel pass lists them: the devices the inputs
    describe, in input order (``parts``), then the others by (rank, device). A rank the
    selected steps leave out still has its described devices."""
    described: list[dict[str, Any]] = []
    others: list[dict[str, Any]] = []
    for part in parts:
        meta = part.meta
        keys = {(d.rank, d.device) for d in meta.devices} if meta else set()
        if part.results is not None:
            peaks = part.results.kernels.peaks
        elif meta is not None:
            peaks = [
                p.to_json()
                for p in resolve_peaks(meta.devices, options.kernels.peak_tflops).values()
            ]
        else:
            peaks = []
        for p in peaks:
            (described if (p["rank"], p["device"]) in keys else others).append(p)
    return described + sorted(others, key=lambda p: (p["rank"], p["device"]))
