"""Terminal report: the answer first, the evidence one step below."""

from __future__ import annotations

from traceforensics.analysis.pipeline import Analysis
from traceforensics.report.format import fmt_ns, fmt_pct, truncate


def render_text(analysis: Analysis, width: int = 100) -> str:
    """The full terminal report as one string."""
    lines: list[str] = []
    meta = analysis.session.meta
    srcs = ", ".join(f"{i.path} (rank {i.rank})" for i in meta.inputs) or "?"
    lines.append(f"traceforensics: {meta.source_format} trace — {srcs}")
    lines.append(f"  {analysis.summary.event_count} events")
    for w in analysis.warnings:
        lines.append(f"  warning: {w}")
    if not analysis.summary.devices:
        lines.append("")
        lines.append("No GPU activity in this trace (CPU-only): nothing to attribute.")
        return "\n".join(lines) + "\n"
    for dev in analysis.summary.devices:
        lines.append("")
        title = f"rank {dev.rank} · GPU {dev.device}"
        if dev.name:
            title += f" · {dev.name}"
        lines.append(title)
        lines.append(
            f"  window {fmt_ns(dev.window_ns)}   busy {fmt_ns(dev.busy_ns)} "
            f"({fmt_pct(dev.utilization)})   idle {fmt_ns(dev.idle_ns)} "
            f"({fmt_pct(1 - dev.utilization)})"
        )
        lines.append(
            f"  {dev.kernel_count} kernels, {dev.memcpy_count} memcpy, "
            f"{dev.memset_count} memset on {dev.stream_count} stream(s)"
        )
        if dev.top_kernels:
            lines.append("  top kernels by total time:")
            for k in dev.top_kernels:
                lines.append(
                    f"    {fmt_ns(k.total_ns):>10}  {fmt_pct(k.share_of_busy):>6}  "
                    f"x{k.count:<6} {truncate(k.name, width - 34)}"
                )
    return "\n".join(lines) + "\n"
