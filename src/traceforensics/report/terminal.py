"""Terminal report: the answer first, the evidence one step below.

Order: a verdict per device (idle share, dominant cause, what to change first: its top
finding; for a multi-rank job, the job's verdict first and the per-rank ones grouped:
``job_verdict``), the ranked findings (a job's same change on several ranks in a row: one):
with the verdict they fill the first screen; then the investigation in the method's order
(``method_text``: six checks, the walk stopping at the top finding), the device summary (busy
by kind, copies by direction), idle by cause, the largest gaps with their evidence, the step
table, the utilization pattern, kernel forensics and, when given, the monitoring log.
"""

from __future__ import annotations

import textwrap
from collections.abc import Callable
from typing import Final

import polars as pl

from traceforensics.analysis.devices import DeviceRecord
from traceforensics.analysis.pipeline import Analysis
from traceforensics.report.format import fmt_bytes, fmt_ns, fmt_pct, fmt_rate, truncate

# The sections' renderers are imported by the functions that use them: ``tf analyze --json``
# imports this module for ``SECTIONS`` (its --sections option) and never renders text.


def headline_lines(analysis: Analysis) -> list[str]:
    """One verdict per device: how idle it was and the causes that dominate. A multi-rank
    job's verdict comes first (``job_verdict``), then the per-rank verdicts, grouped."""
    from traceforensics.report.job_verdict import is_job, job_verdict, rank_groups
    from traceforensics.report.verdict import device_verdict, verdict_text

    out: list[str] = []
    if is_job(analysis):
        job = job_verdict(analysis)
        out += [job.head] + [f"  {t}" for t in (job.change, job.steps) if t]
        out.append("per rank:")
        for g in rank_groups(analysis):
            out += [g.head] + ([f"  {g.change}"] if g.change else [])
            out += _window_notes(analysis, g.members, len(g.members) > 1)
        return out
    for d in analysis.devices:
        head, change = verdict_text(device_verdict(d, analysis.findings_of(d.rank, d.device)))
        out += [head] + ([f"  {change}"] if change else [])
        out += _window_notes(analysis, [(d.rank, d.device)], False)
    return out


def _window_notes(
    analysis: Analysis, members: list[tuple[int, int]] | tuple[tuple[int, int], ...], named: bool
) -> list[str]:
    """The note under a verdict when much of the trace lies before a GPU's first work (the
    device window leaves it out); ``named``: say which rank (a grouped verdict)."""
    if analysis.options.idle.window != "device":
        return []
    lead = _leading_time(analysis)
    out = []
    for rank, device in members:
        d = analysis.device(rank, device)
        if d is None:
            continue
        before = d.window_start_ns - lead.get(d.rank, d.window_start_ns)
        if before > max(d.window_ns // 10, 10**6):
            who = f"rank {d.rank} GPU {d.device}: " if named else ""
            out.append(
                f"  note: {who}the {fmt_ns(before)} of the trace before this GPU's first work "
                "are outside the window; --window trace counts them"
            )
    return out


def _leading_time(analysis: Analysis) -> dict[int, int]:
    """First recorded instant of each rank (ns), markers and step ranges included."""
    # (two columns: a cached session reads them alone, ``TraceSession.event_columns``)
    ev = analysis.session.event_columns(["rank", "start_ns"])
    if ev.height == 0:
        return {}
    firsts = ev.group_by("rank").agg(pl.col("start_ns").min().alias("t"))
    return {int(r): int(t) for r, t in firsts.iter_rows()}


def findings_lines(analysis: Analysis, width: int, limit: int = 8) -> list[str]:
    """The ranked findings: what each change would give back, why, and what to do."""
    from traceforensics.report.job_findings import finding_groups, group_back, group_where
    from traceforensics.report.tables import evidence_name

    p = analysis.program
    out = [f"program: {p.framework} on {p.vendor} ({p.evidence})"]
    if not analysis.findings:
        out.append("no findings: nothing to give back")
    groups = finding_groups(analysis)
    for i, run in enumerate(groups[:limit], 1):
        f = run[0]
        if len(run) == 1:
            out.append(
                f"#{i} {f.category:<22} ~{fmt_ns(f.recoverable_ns):>10} back "
                f"({fmt_pct(f.share_of_window)}, {f.confidence})  rank {f.rank} GPU {f.device}"
            )
            title = f.title
        else:  # the same change on several ranks of a job: each rank's time, a range
            back, share = group_back(run)
            out.append(
                f"#{i} {f.category:<22} {back} back each ({share}, {f.confidence})  "
                f"{group_where(run)}"
            )
            title = f"largest, rank {f.rank} GPU {f.device}: {f.title}"
        out += textwrap.wrap(title, width, initial_indent="    ", subsequent_indent="      ")
        out += textwrap.wrap(
            f.remedy, width, initial_indent="    do: ", subsequent_indent="        "
        )
        for e in f.evidence[:1]:  # one line of proof each; the JSON has them all
            head = f"    [{e.kind}] {truncate(evidence_name(e), 48)} ({fmt_ns(e.dur_ns)}): "
            out.append(head + truncate(e.detail, max(width - len(head), 20)))
    if len(groups) > limit:
        more = sum(len(run) for run in groups[limit:])
        out.append(f"... {more} more: tf analyze --json (findings)")
    return out


def summary_lines(analysis: Analysis, width: int) -> list[str]:
    """Window, busy, idle, counts and top kernels per device."""
    out: list[str] = []
    for dev in analysis.devices:
        title = f"rank {dev.rank} · GPU {dev.device} · {dev.name}"
        out.append(title)
        out.append(
            f"  window {fmt_ns(dev.window_ns)}   busy {fmt_ns(dev.busy_ns)} "
            f"({fmt_pct(dev.busy_fraction)})   idle {fmt_ns(dev.idle_ns)} "
            f"({fmt_pct(1 - dev.busy_fraction)})"
        )
        out += _busy_lines(dev)
        out.append(
            f"  {dev.kernel_count} kernels, {dev.memcpy_count} memcpy, "
            f"{dev.memset_count} memset"
            + (f", {dev.graph_count} graph replays" if dev.graph_count else "")
            + f" on {dev.stream_count} stream(s)"
        )
        if dev.top_kernels:
            out.append("  top kernels by total time (share of the device's kernel time):")
            for k in dev.top_kernels:
                out.append(
                    f"    {fmt_ns(k.total_ns):>10}  {fmt_pct(k.share_of_kernel_time):>6}  "
                    f"x{k.count:<6} {truncate(k.name, width - 34)}"
                )
    return out


def _busy_lines(dev: DeviceRecord) -> list[str]:
    """Busy time by kind, and copies by direction with bytes and achieved bandwidth."""
    kinds = ", ".join(f"{k} {fmt_ns(ns)}" for k, ns in dev.busy_by_kind.items() if ns)
    out = [f"  busy by kind: {kinds or 'none'}"]
    for t in dev.transfers:
        speed = f" at {fmt_rate(t.gbps)}" if t.gbps is not None else ""
        paged = f", {t.pageable_count} pageable" if t.pageable_count else ""
        out.append(
            f"    {t.direction:<7} x{t.count:<6} {fmt_bytes(t.bytes):>10} in "
            f"{fmt_ns(t.time_ns)}{speed}{paged}"
        )
    if dev.copy_ns:
        out.append(f"    copies not overlapped by compute: {fmt_ns(dev.exposed_copy_ns)}")
    return out


#: Section ids of the terminal report, in order (``--sections``); the verdict always comes first.
SECTIONS: Final[tuple[str, ...]] = (
    "verdict", "findings", "method", "serving", "ranks", "devices", "idle", "gaps", "steps",
    "pattern", "kernels", "memory", "monitor",
)  # fmt: skip
#: Findings shown in the terminal: with the verdict they fit on one screen; JSON has them all.
TERMINAL_FINDINGS: Final = 3


def render_text(analysis: Analysis, width: int = 100, sections: tuple[str, ...] = SECTIONS) -> str:
    """The terminal report as one string: the header, then the chosen ``sections`` (ids of
    ``SECTIONS``; the verdict is always shown)."""
    from traceforensics.report.gaps_text import gap_lines, idle_lines, step_lines
    from traceforensics.report.kernels_text import kernel_report_lines
    from traceforensics.report.memory_text import memory_text_lines
    from traceforensics.report.method_text import method_lines, method_title, no_gpu_method
    from traceforensics.report.monitor_text import render_monitor_lines
    from traceforensics.report.ranks_text import rank_lines
    from traceforensics.report.serving_text import serving_lines

    meta = analysis.session.meta
    srcs = ", ".join(f"{i.path} (rank {i.rank})" for i in meta.inputs) or "?"
    lines = [f"traceforensics · {meta.source_format} · {srcs}"]
    lines.append(f"  {analysis.event_count} events")
    r = analysis.options.range
    if r.steps is not None or r.start_ns is not None or r.end_ns is not None:
        part = [f"steps {r.steps}"] if r.steps else []
        if r.start_ns is not None or r.end_ns is not None:
            end = "end" if r.end_ns is None else fmt_ns(r.end_ns)
            part.append(f"{fmt_ns(r.start_ns or 0)} to {end} after the first event")
        lines.append(f"  analysed part: {' and '.join(part)}")
    lines += [f"  warning: {w}" for w in analysis.warnings]
    if not analysis.devices:
        # (whatever ``sections`` says: a report without GPU sections has this one answer)
        lines += ["", *no_gpu_lines(analysis, width)]
        # the investigation's one line (no heading: a report without GPU work has no sections)
        lines += ["", *textwrap.wrap(no_gpu_method(), width, subsequent_indent="  ")]
        if analysis.monitor is not None:
            lines += ["", "== Monitoring log ==", *render_monitor_lines(analysis.monitor)]
        return "\n".join(lines) + "\n"
    builders: dict[str, tuple[str, Callable[[], list[str]]]] = {
        "verdict": ("Verdict", lambda: headline_lines(analysis)),
        "method": (method_title(analysis), lambda: method_lines(analysis, width)),
        "findings": (
            "Findings (largest time to give back first)",
            lambda: findings_lines(analysis, width, TERMINAL_FINDINGS),
        ),
        "serving": ("Serving", lambda: serving_lines(analysis)[1:]),
        "ranks": ("Ranks", lambda: rank_lines(analysis.ranks)),
        "devices": ("Devices", lambda: summary_lines(analysis, width)),
        "idle": ("Idle time by cause", lambda: idle_lines(analysis.devices)),
        "gaps": ("Largest idle gaps", lambda: gap_lines(analysis, analysis.options.idle.top_gaps)),
        "steps": ("Steps", lambda: step_lines(analysis.idle)),
        "pattern": ("Utilization pattern", lambda: _pattern_section(analysis)),
        "kernels": (
            "Kernels",
            lambda: kernel_report_lines(analysis.kernels, analysis.options.kernels.top),
        ),
        "memory": ("Memory", lambda: [ln[2:] for ln in memory_text_lines(analysis)[1:]]),
        "monitor": (
            "Monitoring log",
            lambda: render_monitor_lines(analysis.monitor) if analysis.monitor else [],
        ),
    }
    for sid in SECTIONS:
        if sid != "verdict" and sid not in sections:
            continue
        title, build = builders[sid]
        body = build()
        if sid in ("monitor", "ranks", "serving", "memory") and not body:
            continue
        lines += ["", f"== {title} ==", *body]
    return "\n".join(lines) + "\n"


def no_gpu_lines(analysis: Analysis, width: int = 100) -> list[str]:
    """A trace without GPU activity: the verdict that says why (``verdict.no_gpu_verdict``),
    then the host time of its steps by phase (no ``==`` heading: the report has no sections
    to separate)."""
    from traceforensics.analysis.host_steps import PHASES
    from traceforensics.report.verdict import (
        host_heading,
        host_phase_rows,
        host_step_rows,
        no_gpu_verdict,
    )

    out = textwrap.wrap(no_gpu_verdict(analysis.diagnostics), width, subsequent_indent="  ")
    if analysis.host is None:
        return out
    head = f"Host time per step: {host_heading(analysis.host)}"
    out += ["", *textwrap.wrap(head, width, subsequent_indent="  ")]
    out += [f"  {p:<13} {t:>10}  {share:>6}" for p, t, share in host_phase_rows(analysis.host)]
    rows = host_step_rows(analysis.host)
    if rows:
        heads = ("rank", "step", "duration", *(p.replace("_", " ") for p in PHASES))
        out += ["", "  " + _columns(heads, (4, 22) + (12,) * (len(heads) - 2))]
        out += ["  " + _columns(r, (4, 22) + (12,) * (len(r) - 2)) for r in rows]
    if len(analysis.host.steps) > len(rows):
        out.append(f"  ... {len(analysis.host.steps) - len(rows)} more: tf analyze --json (host)")
    return out


def _columns(cells: tuple[str, ...], widths: tuple[int, ...]) -> str:
    """Cells left-aligned (the first two) or right-aligned (figures) in fixed widths."""
    return " ".join(
        truncate(c, w).ljust(w) if i < 2 else c.rjust(w)
        for i, (c, w) in enumerate(zip(cells, widths, strict=True))
    ).rstrip()


def _pattern_section(analysis: Analysis) -> list[str]:
    from traceforensics.report.monitor_text import pattern_lines, verdict_lines

    out: list[str] = []
    for d in analysis.devices:
        if d.pattern is None:
            continue
        out.append(f"rank {d.rank} GPU {d.device}:")
        out += pattern_lines(d.pattern.pattern, indent="  ")
        out += verdict_lines(d.pattern_causes, indent="  ")
    return out
