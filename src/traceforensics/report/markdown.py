"""Markdown summary for performance tickets: verdict first, then evidence tables."""

from __future__ import annotations

from traceforensics.analysis.pipeline import Analysis
from traceforensics.report.advice import CAUSE_ADVICE, ranked_causes
from traceforensics.report.format import fmt_ns, fmt_pct, truncate


def _table(header: list[str], rows: list[list[str]]) -> list[str]:
    out = ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
    out += ["| " + " | ".join(c.replace("|", "\\|") for c in r) + " |" for r in rows]
    return out


def render_markdown(analysis: Analysis, top: int = 5) -> str:
    """The ticket-ready summary of one analysis."""
    meta = analysis.session.meta
    lines = ["# traceforensics report", ""]
    lines += [f"- input: `{i.path}` ({i.format}, rank {i.rank})" for i in meta.inputs]
    lines += [f"- warning: {w}" for w in analysis.warnings]
    if not analysis.summary.devices:
        lines += ["", "No GPU activity in this trace (CPU-only)."]
        return "\n".join(lines) + "\n"
    lines += ["", "## Verdict", ""]
    for d in analysis.gaps.devices:
        ranked = [(v, c) for c, v in ranked_causes(d.idle_by_cause)]
        idle_share = d.idle_ns / max(d.window_ns, 1)
        if not ranked:
            lines.append(f"- **rank {d.rank} GPU {d.device}**: no idle time.")
            continue
        ns, cause = ranked[0]
        lines.append(
            f"- **rank {d.rank} GPU {d.device}**: idle {fmt_pct(idle_share)} of "
            f"{fmt_ns(d.window_ns)}; mostly `{cause}` ({fmt_pct(ns / max(d.idle_ns, 1))} of "
            f"idle). First change: {CAUSE_ADVICE.get(cause, cause)}."
        )
    lines += ["", "## Devices", ""]
    lines += _table(
        ["rank", "GPU", "name", "window", "busy", "idle", "kernels", "memcpy", "memset"],
        [
            [
                str(d.rank),
                str(d.device),
                d.name or "-",
                fmt_ns(d.window_ns),
                f"{fmt_ns(d.busy_ns)} ({fmt_pct(d.utilization)})",
                fmt_ns(d.idle_ns),
                str(d.kernel_count),
                str(d.memcpy_count),
                str(d.memset_count),
            ]
            for d in analysis.summary.devices
        ],
    )
    lines += ["", "## Idle time by cause", ""]
    rows = []
    for d in analysis.gaps.devices:
        for cause, ns in sorted(d.idle_by_cause.items(), key=lambda kv: -kv[1]):
            if ns > 0:
                rows.append(
                    [
                        f"{d.rank}:{d.device}",
                        f"`{cause}`",
                        fmt_ns(ns),
                        fmt_pct(ns / max(d.idle_ns, 1)),
                        fmt_pct(ns / max(d.window_ns, 1)),
                    ]
                )
    lines += _table(["rank:GPU", "cause", "time", "of idle", "of window"], rows)
    lines += ["", f"## Largest gaps (top {top})", ""]
    lines += _table(
        ["rank:GPU", "length", "causes", "evidence"],
        [
            [
                f"{g.rank}:{g.device}",
                fmt_ns(g.dur_ns),
                ", ".join(
                    f"{c} {fmt_ns(v)}" for c, v in sorted(g.causes.items(), key=lambda kv: -kv[1])
                ),
                "; ".join(
                    truncate(f"{e.kind} {e.name} ({fmt_ns(e.dur_ns)})", 60) for e in g.evidence[:3]
                ),
            ]
            for g in analysis.gaps.gaps[:top]
        ],
    )
    if analysis.gaps.steps:
        lines += ["", "## Steps", ""]
        lines += _table(
            ["rank:GPU", "step", "span", "busy", "idle", "exposed comm"],
            [
                [
                    f"{s.rank}:{s.device}",
                    s.name,
                    fmt_ns(s.dur_ns),
                    fmt_ns(s.busy_ns),
                    fmt_ns(s.idle_ns),
                    fmt_ns(s.exposed_comm_ns),
                ]
                for s in analysis.gaps.steps
            ],
        )
    if analysis.kernels.short_kernels:
        lines += ["", f"## Short kernels worth fusing (top {top})", ""]
        lines += _table(
            ["kernel", "launching op", "count", "total", "recoverable", "remedy"],
            [
                [
                    truncate(r.name, 50),
                    r.launching_op or "-",
                    str(r.count),
                    fmt_ns(r.total_ns),
                    fmt_ns(r.recoverable_ns),
                    r.remedy,
                ]
                for r in analysis.kernels.short_kernels[:top]
            ],
        )
    if analysis.kernels.mfu_by_device:
        lines += ["", "## Model FLOPs utilization", ""]
        lines += _table(
            ["rank:GPU", "TFLOPS", "peak", "MFU"],
            [
                [
                    f"{m.rank}:{m.device}",
                    f"{m.tflops:.2f}" if m.tflops is not None else "-",
                    f"{m.peak_tflops:.1f}" if m.peak_tflops is not None else "-",
                    fmt_pct(m.mfu) if m.mfu is not None else "-",
                ]
                for m in analysis.kernels.mfu_by_device
            ],
        )
    return "\n".join(lines) + "\n"
