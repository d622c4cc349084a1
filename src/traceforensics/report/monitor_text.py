"""Terminal lines for a monitoring-log report (``tf monitor``) and for a pattern verdict."""

from __future__ import annotations

from traceforensics.analysis.monitoring.monitor import GpuMonitorReport, MonitorReport
from traceforensics.analysis.utilization.patterns import CauseVerdict, PatternResult


def _f(v: float | None, unit: str = "", nd: int = 1) -> str:
    return "n/a" if v is None else f"{v:.{nd}f}{unit}"


def pattern_lines(p: PatternResult, indent: str = "  ") -> list[str]:
    """The pattern and its evidence (shared by the monitor and the trace-timeline reports)."""
    period = f"{p.period_s:.3g} s" if p.period_s is not None else "none claimed"
    lines = [
        f"{indent}pattern        {p.pattern}",
        f"{indent}period         {period} — {p.period_note}",
    ]
    if p.mean_pct is not None:
        lines.append(
            f"{indent}evidence       duty cycle {100 * (p.duty_cycle or 0):.0f}%, "
            f"{p.drop_count} drops, p10/p50/p90 {_f(p.p10_pct)}/{_f(p.p50_pct)}/{_f(p.p90_pct)}%"
            f", {p.samples} samples at {p.interval_s:.3g} s"
            + (f", {p.missing} missing" if p.missing else "")
        )
    return lines


def verdict_lines(verdicts: list[CauseVerdict], indent: str = "  ") -> list[str]:
    """One line per likely cause: confirmed / refuted / minor / not checkable from a trace."""
    out: list[str] = []
    for v in verdicts:
        share = f" ({100 * v.share:.0f}% of idle)" if v.cause_id is not None and v.idle_ns else ""
        tag = v.cause_id or "-"
        out.append(f"{indent}{v.verdict:<14} {tag:<18} {v.text}{share}")
    return out


def gpu_lines(g: GpuMonitorReport) -> list[str]:
    lines = [
        f"GPU {g.gpu}: {g.samples} samples over {g.span_s:.0f} s (every {g.interval_s:.3g} s)",
        f"  utilization    mean {_f(g.util_mean, '%')}, median {_f(g.util_p50, '%')}"
        + (" (from SM activity)" if g.series_source == "sm_active" else ""),
        *pattern_lines(g.pattern),
    ]
    if g.mem_used_mib_max is not None:
        trend = _f(g.mem_trend_mib_per_h, " MiB/h", 0)
        lines.append(f"  memory         max {g.mem_used_mib_max:.0f} MiB, trend {trend}")
    if g.sm_clock_ref_mhz is not None:
        lines.append(
            f"  clocks         reference {g.sm_clock_ref_mhz:.0f} MHz ({g.clock_ref_source}); "
            f"{len(g.throttle_episodes)} throttle episodes; "
            f"{g.idle_downclock_samples} idle down-clock samples (not throttling)"
        )
    for e in g.throttle_episodes:
        lines.append(
            f"    {e.start:9.1f}-{e.end:9.1f} s  {e.reason:<10} SM {e.sm_clock_mhz:.0f} MHz"
            f"  temp {_f(e.temperature_c, ' C', 0)}  power {_f(e.power_w, ' W', 0)}"
            f"  ({e.samples} samples, {e.reason_source})"
        )
    lines.extend(f"  - {f}" for f in g.findings)
    return lines


def render_monitor_lines(report: MonitorReport) -> list[str]:
    """The whole ``tf monitor`` terminal report as lines (no trailing newlines)."""
    times = {
        "absolute": "wall-clock timestamps",
        "relative": "timestamps without a date",
        "index": "no timestamps (sample index x interval)",
    }[report.time_kind]
    lines = [f"{report.file}: {report.source_format}, {len(report.gpus)} GPUs, {times}"]
    lines.extend(f"warning: {w}" for w in report.warnings)
    for g in report.gpus:
        lines.append("")
        lines.extend(gpu_lines(g))
    return lines


def render_monitor_text(report: MonitorReport) -> str:
    return "\n".join(render_monitor_lines(report)) + "\n"
