"""Memory over time: allocated and reserved bytes per device over the window.

One row per memory record (``analysis.memory``; the CPU is ``device -1``): allocated (solid)
and reserved (dashed, where known) as steps after each ``[memory]`` event, in GiB, MiB, KiB
or B by the peak (titles: ``fmt_bin``, the memory section's binary units); the peak marked,
and the GPU's idle while an allocator call ran shaded in the ``memory_management`` colour. One
time origin for every panel (the earliest analysis-window start or memory event), so CPU and GPU
panels line up. An nsys record (``segments``) is labelled "reserved (cudaMalloc segments)". One
legend with every kind of line drawn (each once).
"""

from __future__ import annotations

from typing import Any, Final

from traceforensics.analysis.cause_table import MEMORY_MANAGEMENT
from traceforensics.analysis.memory import DeviceMemory
from traceforensics.analysis.memory.results import fmt_bin
from traceforensics.analysis.pipeline import Analysis
from traceforensics.report.format import fmt_ns
from traceforensics.report.palette import SHADE_ALPHA, cause_color, cause_patch
from traceforensics.report.plotkit import (
    device_label,
    legend_below,
    message_figure,
    new_figure,
    time_unit,
)

MEMORY_TITLE: Final = (
    "Memory over time: allocated and reserved per device; shaded: GPU idle during allocator calls"
)
NO_MEMORY: Final = (
    "no memory events in this trace\n(record with profile_memory=True, or nsys "
    "--cuda-memory-usage=true)"
)
_UNITS: Final = (("GiB", 1 << 30), ("MiB", 1 << 20), ("KiB", 1 << 10), ("B", 1))


def byte_unit(peak: int) -> tuple[float, str]:
    """The largest binary unit the peak is at least 1 of (GiB ... B): divisor and name."""
    for name, size in _UNITS:
        if peak >= size:
            return float(size), name
    return 1.0, "B"


def _origin(analysis: Analysis, records: list[DeviceMemory]) -> int:
    """One time origin for every panel: the earliest analysis-window start or memory event."""
    starts = [d.window_start_ns for d in analysis.devices] + [m.first_ns for m in records]
    return min(starts)


def figure_memory(analysis: Analysis) -> Any:
    """A matplotlib Figure (module docstring), or a text panel without memory events."""
    records = [m for m in analysis.memory if m.series is not None and m.series.height]
    if not records:
        return message_figure(MEMORY_TITLE, NO_MEMORY)
    fig, axes = new_figure(len(records), row_in=2.6)
    lo = _origin(analysis, records)
    hi = max([m.last_ns for m in records] + [e for m in records for _s, e in m.idle_calls])
    scale, unit = time_unit(max(hi - lo, 1))
    handles: dict[str, Any] = {}
    for ax, mem in zip(axes[:, 0], records, strict=True):
        series = mem.series
        assert series is not None
        div, bunit = byte_unit(max(mem.peak_allocated_bytes, mem.peak_reserved_bytes))
        t = [(v - lo) / scale for v in series.get_column("start_ns").to_list()]
        alloc = [v / div for v in series.get_column("total_allocated").to_list()]
        res = [v / div for v in series.get_column("total_reserved").to_list()]
        # the level after the last event holds to the axis end (one event still draws a line)
        t, alloc, res = [*t, (hi - lo) / scale], [*alloc, alloc[-1]], [*res, res[-1]]
        # nsys records the driver's segments: what the caching allocator reserves
        label = "reserved (cudaMalloc segments)" if mem.segments else "allocated"
        (a_line,) = ax.step(t, alloc, where="post", color="black", lw=1.2, label=label)
        handles.setdefault(label, a_line)
        if mem.reserved_known:
            (r_line,) = ax.step(t, res, where="post", color="#0072B2", lw=1, ls="--")
            r_line.set_label("reserved")
            handles.setdefault("reserved", r_line)
        for s, e in mem.idle_calls:
            ax.axvspan(
                (s - lo) / scale,
                (e - lo) / scale,
                facecolor=cause_color(MEMORY_MANAGEMENT),
                alpha=SHADE_ALPHA,
                lw=0,
                zorder=0,
            )
        peak_t = (mem.peak_at_ns - lo) / scale
        (mark,) = ax.plot(
            [peak_t], [mem.peak_allocated_bytes / div], "v", color="#D55E00", label="peak"
        )
        handles.setdefault("peak", mark)
        if min(alloc + res) >= 0:  # totals are never negative; if one were, show it
            ax.set_ylim(bottom=0)
        ax.set_xlim(0, max((hi - lo) / scale, 1e-9))
        ax.set_ylabel(bunit)
        ax.set_xlabel(f"time from the window start ({unit})")
        what = f"rank {mem.rank} CPU" if mem.device < 0 else device_label(mem.rank, mem.device)
        calls = f", {mem.allocator_calls} allocator calls" if mem.device >= 0 else ""
        ax.set_title(
            f"{what}: peak {fmt_bin(mem.peak_allocated_bytes)} "
            f"{'reserved' if mem.segments else 'allocated'} at "
            f"+{fmt_ns(mem.peak_at_ns - lo)}{calls}",
            loc="left",
            fontsize="medium",
        )
    out = list(handles.values())
    if any(m.idle_calls for m in records):
        out.append(cause_patch(MEMORY_MANAGEMENT, SHADE_ALPHA))
    legend_below(fig, out)
    fig.suptitle(MEMORY_TITLE)
    return fig
