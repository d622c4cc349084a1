"""The report's "Memory" section (issue 48): text lines, Markdown lines and an HTML fragment,
from ``analysis.memory`` (one record per device with memory events; empty: no section).

Per device (bytes in binary units, ``fmt_bin``): the peak allocated and reserved bytes (nsys:
the driver's segments, so "reserved"), when (from the device's first memory event) and in
which op, the bytes allocated before the capture (``allocated_before_bytes``), fragmentation
at the peak, the two memory facts (reserved far above allocated; near the device's memory),
the churn per step (mean mallocs/frees and bytes), and the allocator calls with the GPU idle
the idle pass attributed to them.
"""

from __future__ import annotations

from html import escape

from traceforensics.analysis.memory import DeviceMemory
from traceforensics.analysis.memory.results import (
    NEAR_CAPACITY_SHARE,
    RESERVED_UNUSED_MIN_BYTES,
    RESERVED_UNUSED_RATIO,
    fmt_bin,
)
from traceforensics.analysis.pipeline import Analysis
from traceforensics.report.format import fmt_ns

TITLE = "Memory"


def _who(m: DeviceMemory) -> str:
    return f"rank {m.rank} CPU" if m.device < 0 else f"rank {m.rank} GPU {m.device}"


def device_lines(m: DeviceMemory) -> list[str]:
    """The plain sentences of one record (shared by the three forms)."""
    op = f" in {m.peak_op}" if m.peak_op else ""
    res = (
        f", reserved {fmt_bin(m.reserved_at_peak_bytes)} (fragmentation "
        f"{fmt_bin(m.fragmentation_bytes)}); peak reserved {fmt_bin(m.peak_reserved_bytes)}"
        if m.reserved_known
        else " (reserved not recorded: allocated shown)"
    )
    if m.segments:
        res = " (the driver's cudaMalloc'd segments: what a caching allocator reserves)"
    if m.allocated_before_bytes:
        res += f"; at least {fmt_bin(m.allocated_before_bytes)} allocated before the capture"
    if not m.totals_recorded:
        res += "; no allocator totals in the trace: a running sum from its first event"
    what = "reserved" if m.segments else "allocated"
    lines = [
        f"{_who(m)}: peak {fmt_bin(m.peak_allocated_bytes)} {what} at "
        f"+{fmt_ns(m.peak_at_ns - m.first_ns)}{op}{res}"
    ]
    if m.memory_bytes and m.peak_reserved_share is not None:
        lines.append(
            f"  peak {'reserved' if m.reserved_known or m.segments else 'allocated'} is "
            f"{m.peak_reserved_share:.0%} of the device's "
            f"{fmt_bin(m.memory_bytes)}"
            + (f" (>= {NEAR_CAPACITY_SHARE:.0%}: near capacity)" if m.near_capacity else "")
        )
    if m.reserved_unused:
        lines.append(
            f"  reserved far above allocated at the peak (>= {RESERVED_UNUSED_RATIO}x and "
            f">= {fmt_bin(RESERVED_UNUSED_MIN_BYTES)} more): the allocator holds memory it "
            "does not use"
        )
    if m.churn:
        n = len(m.churn)
        mallocs = sum(c.mallocs for c in m.churn) / n
        frees = sum(c.frees for c in m.churn) / n
        nbytes = sum(c.malloc_bytes for c in m.churn) // n
        lines.append(
            f"  churn: {mallocs:.1f} mallocs ({fmt_bin(nbytes)}) and {frees:.1f} frees "
            f"per step over {n} steps"
        )
    if m.allocator_calls:
        cache = f", {m.empty_cache_calls} empty_cache" if m.empty_cache_calls else ""
        lines.append(
            f"  allocator: {m.allocator_calls} calls{cache} ({fmt_ns(m.allocator_call_ns)}); "
            f"GPU idle from them {fmt_ns(m.allocator_idle_ns)}, "
            f"{fmt_ns(m.loop_allocator_idle_ns)} in the steady state"
        )
    return lines


def memory_text_lines(analysis: Analysis) -> list[str]:
    """The terminal section ([] without memory events)."""
    if not analysis.memory:
        return []
    out = [f"{TITLE}:"]
    for m in analysis.memory:
        out += ["  " + line for line in device_lines(m)]
    return out


def memory_markdown_lines(analysis: Analysis) -> list[str]:
    """The Markdown section ([] without memory events)."""
    if not analysis.memory:
        return []
    out = [f"## {TITLE}", ""]
    for m in analysis.memory:
        first, *rest = device_lines(m)
        out.append(f"- **{first}**")
        out += [f"  - {line.strip()}" for line in rest]
    return [*out, ""]


def memory_html(analysis: Analysis) -> str:
    """The HTML fragment ("" without memory events)."""
    if not analysis.memory:
        return ""
    parts = [f"<section class='memory'><h2>{TITLE}</h2>"]
    for m in analysis.memory:
        first, *rest = device_lines(m)
        items = "".join(f"<li>{escape(line.strip())}</li>" for line in rest)
        parts.append(f"<p><b>{escape(first)}</b></p><ul>{items}</ul>")
    parts.append("</section>")
    return "".join(parts)
