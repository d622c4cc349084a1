"""Terminal lines for the idle analysis: idle by cause per device, largest gaps with their
evidence, and the step table. Pure formatting; returns lines, prints nothing."""

from __future__ import annotations

from typing import Final

from traceforensics.analysis.devices import DeviceRecord
from traceforensics.analysis.idle.causes import ranked_causes
from traceforensics.analysis.idle.gaps import IdleAnalysis
from traceforensics.analysis.idle.results import StepStats
from traceforensics.analysis.pipeline import Analysis
from traceforensics.report.format import fmt_ns, fmt_pct, truncate

_NAME_WIDTH = 60


def idle_lines(devices: list[DeviceRecord]) -> list[str]:
    """Per device: busy/idle of the window, then each cause with time, share of the window and
    share of the idle time (largest first)."""
    out: list[str] = []
    for d in devices:
        window = max(d.window_ns, 1)
        out.append(
            f"rank {d.rank} GPU {d.device}: window {fmt_ns(d.window_ns)}, busy {fmt_ns(d.busy_ns)}"
            f" ({fmt_pct(d.busy_ns / window)}), idle {fmt_ns(d.idle_ns)}"
            f" ({fmt_pct(d.idle_ns / window)}) in {d.n_gaps} gaps"
        )
        for cause, ns in ranked_causes(d.idle_by_cause):
            out.append(
                f"  {cause:<18} {fmt_ns(ns):>11}  {fmt_pct(ns / window):>6} of window"
                f"  {fmt_pct(ns / max(d.idle_ns, 1)):>6} of idle"
            )
        if d.comm_ns:
            out.append(
                f"  communication kernels {fmt_ns(d.comm_ns)}, exposed (not overlapped by "
                f"compute) {fmt_ns(d.exposed_comm_ns)}"
            )
    return out


def gap_lines(analysis: Analysis, limit: int | None = None) -> list[str]:
    """The largest gaps: start (relative to the device window), length, causes, evidence."""
    starts = {(d.rank, d.device): d.window_start_ns for d in analysis.devices}
    gaps = analysis.idle.gaps
    if limit == 0:
        return ["none kept (--gaps 0)"]
    if not gaps:
        return ["no idle gaps"]
    out: list[str] = []
    for k, g in enumerate(gaps[:limit] if limit is not None else gaps, start=1):
        rel = g.start_ns - starts.get((g.rank, g.device), g.start_ns)
        causes = ", ".join(f"{c} {fmt_ns(v)}" for c, v in ranked_causes(g.causes))
        out.append(
            f"#{k} rank {g.rank} GPU {g.device} at +{fmt_ns(rel)}: {fmt_ns(g.dur_ns)} idle"
            f" — {causes}"
        )
        for e in g.evidence:
            where = f"tid {e.tid}" if e.tid is not None else "GPU"
            tag = e.cause or "-"
            if e.kind == "none":  # no recorded event: the claim is the absence itself
                out.append(f"    [{tag}] nothing recorded ({where}): {e.detail}")
                continue
            name = truncate(e.name, _NAME_WIDTH) if e.name else "(none)"
            out.append(
                f"    [{tag}] {e.kind} {name} @{_signed(e.start_ns - g.start_ns)}"
                f" dur {fmt_ns(e.dur_ns)} ({where}): {e.detail}"
            )
    return out


def step_lines(res: IdleAnalysis) -> list[str]:
    """Step table (span, busy, idle, exposed comm, busy by phase, top idle causes) and step
    statistics."""
    if not res.steps:
        return ["no steps detected (ProfilerStep#N, step/iteration ranges or --step-pattern)"]
    # several devices: each row says whose step it is (the same step number on every rank)
    many = len({(s.rank, s.device) for s in res.steps}) > 1
    who = f"{'rank':>4} {'GPU':>3} " if many else ""
    out = [
        f"{who}{'step':<24} {'span':>10} {'busy':>10} {'idle':>10} {'exp.comm':>10}"
        f"  {'busy by phase':<26}  top idle causes"
    ]
    for s in res.steps:
        causes = ", ".join(f"{c} {fmt_ns(v)}" for c, v in ranked_causes(s.idle_by_cause)[:2])
        mine = f"{s.rank:>4} {s.device:>3} " if many else ""
        out.append(
            f"{mine}{truncate(s.name, 24):<24} {fmt_ns(s.dur_ns):>10} {fmt_ns(s.busy_ns):>10}"
            f" {fmt_ns(s.idle_ns):>10} {fmt_ns(s.exposed_comm_ns):>10}"
            f"  {phase_cell(s):<26}  {causes}"
        )
    for m in res.step_summary:
        out.append(
            f"rank {m.rank} GPU {m.device}: {m.n_steps} steps ({m.source}), mean "
            f"{fmt_ns(m.mean_ns)}, p50 {fmt_ns(m.p50_ns)}, p95 {fmt_ns(m.p95_ns)}, "
            f"CV {m.cv:.2f}"
        )
        for o in m.outliers:
            out.append(f"  slow: {o.name} {fmt_ns(o.dur_ns)} (+{fmt_ns(o.excess_ns)}): {o.reason}")
    return out


#: Short names of the phases in the step table.
PHASE_SHORT: Final = {
    "data_loading": "data",
    "h2d": "h2d",
    "forward": "fwd",
    "backward": "bwd",
    "optimizer": "opt",
    "communication": "comm",
    "other": "other",
}


def phase_cell(step: StepStats, most: int = 3) -> str:
    """The step's GPU busy time by phase, the ``most`` largest as % of its busy time
    (``fwd 36% bwd 61% opt 2%``); ``-`` without busy time or phases."""
    if step.busy_ns <= 0 or not step.phases:
        return "-"
    top = sorted(step.phases.items(), key=lambda kv: -kv[1].gpu_ns)[:most]
    shares = [(PHASE_SHORT[p], 100 * t.gpu_ns / step.busy_ns) for p, t in top]
    return " ".join(f"{p} {pct:.0f}%" for p, pct in shares if pct >= 0.5) or "-"


def _signed(ns: int) -> str:
    return ("+" if ns >= 0 else "-") + fmt_ns(abs(ns))
