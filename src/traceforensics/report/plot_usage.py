"""Utilization over time and the per-step breakdown.

``draw_utilization`` plots a device's busy % per bin with the analysis' one binning rule
(``analysis/utilization/bins.py``: bins from the analysis-window start, ``--bin-ms`` — 100 ms —
on windows of at least 100 such bins, else a 1-2-5 width giving at least 100 bins: 500 µs for
an 84 ms window, 100 ms for a 40 s one), so the curve is the JSON timeline and the one behind
the terminal's p10/p50/p90; the largest idle gaps are shaded by their top cause. The
per-step figure stacks each step's busy time and its idle time by cause (ms).
"""

from __future__ import annotations

from typing import Any, Final

import numpy as np

from traceforensics.analysis.idle.causes import ranked_causes
from traceforensics.analysis.idle.results import StepStats
from traceforensics.analysis.phases import STEP_PHASES
from traceforensics.analysis.pipeline import Analysis
from traceforensics.model.units import NS_PER_MS
from traceforensics.report.format import fmt_ns
from traceforensics.report.lanes import DeviceLanes, device_lanes
from traceforensics.report.palette import (
    BUSY_COLORS,
    PHASE_STYLE,
    SHADE_ALPHA,
    cause_color,
    cause_hatch,
    cause_patch,
    causes_in_order,
)
from traceforensics.report.plotkit import (
    NO_GPU,
    device_label,
    fmt_bin,
    legend_below,
    message_figure,
    new_figure,
    time_unit,
)

UTIL_TITLE: Final = (
    "GPU utilization: busy % per bin from the analysis-window start; "
    "shaded: the largest idle gaps by top cause"
)
STEPS_TITLE: Final = "Per-step breakdown: busy time by phase and idle time by cause"
NO_STEPS: Final = (
    "no steps detected: no ProfilerStep#N or step/iteration ranges in this trace\n"
    "(tf analyze --step-pattern REGEX names other ranges as steps)"
)


def figure_utilization(analysis: Analysis) -> Any:
    """A matplotlib Figure: per device, busy % per bin over the analysis window (bin size in
    each row's title), the largest idle gaps shaded by their top cause; a text panel for a
    trace with no GPU activity."""
    lanes = device_lanes(analysis)
    if not lanes:
        return message_figure(UTIL_TITLE, NO_GPU)
    fig, axes = new_figure(len(lanes), row_in=2.4)
    shaded: list[dict[str, int]] = []
    for ax, lane in zip(axes[:, 0], lanes, strict=True):
        shaded += draw_utilization(ax, lane, analysis)
    legend_below(fig, [cause_patch(c, SHADE_ALPHA) for c in causes_in_order(*shaded)])
    fig.suptitle(UTIL_TITLE)
    return fig


def draw_utilization(ax: Any, lane: DeviceLanes, analysis: Analysis) -> list[dict[str, int]]:
    """Draw one device's curve on ``ax``; returns the causes of the gaps it shaded."""
    scale, unit = time_unit(lane.span_ns)
    start_ns, bin_ns, values = lane.utilization()
    edges = (np.append(np.arange(values.size) * bin_ns, lane.span_ns) + start_ns - lane.lo) / scale
    pct = np.append(values, values[-1:]) * 100.0 if values.size else np.zeros(0)
    if values.size:  # an empty window (only zero-length work) has no bin to draw
        ax.step(edges, pct, where="post", color="black", lw=1)
    causes: list[dict[str, int]] = []
    for g in analysis.idle.gaps:
        if (g.rank, g.device) != (lane.rank, lane.device) or not g.causes or g.dur_ns <= 0:
            continue
        top = ranked_causes(g.causes)[0][0]
        ax.axvspan(
            (g.start_ns - lane.lo) / scale,
            (g.start_ns + g.dur_ns - lane.lo) / scale,
            facecolor=cause_color(top),
            hatch=cause_hatch(top),
            edgecolor="none",
            alpha=SHADE_ALPHA,
            lw=0,
            zorder=0,
        )
        causes.append({top: g.dur_ns})
    ax.set_ylim(0, 105)
    ax.set_xlim(0, max(lane.span_ns / scale, 1e-9))
    ax.set_ylabel("GPU busy %")
    ax.set_xlabel(f"time from window start ({unit})")
    mean = 100.0 * float((lane.busy[1] - lane.busy[0]).sum()) / max(lane.span_ns, 1)
    ax.set_title(
        f"{device_label(lane.rank, lane.device, lane.name)}: {fmt_bin(bin_ns)} bins "
        f"({values.size} over {fmt_ns(lane.span_ns)}), mean {mean:.1f}% busy",
        loc="left",
        fontsize="medium",
    )
    return causes


def figure_steps(analysis: Analysis) -> Any:
    """A matplotlib Figure: per device, one stacked bar per step — busy ms by phase
    (``analysis.phases``), then idle ms by cause — or a text panel when the trace has no GPU
    activity or no steps."""
    if not analysis.devices:
        return message_figure(STEPS_TITLE, NO_GPU)
    if not analysis.idle.steps:
        return message_figure(STEPS_TITLE, NO_STEPS)
    devices = sorted({(s.rank, s.device) for s in analysis.idle.steps})
    fig, axes = new_figure(len(devices), row_in=2.8)
    used = causes_in_order(*(s.idle_by_cause for s in analysis.idle.steps))
    for ax, (rank, device) in zip(axes[:, 0], devices, strict=True):
        steps = [s for s in analysis.idle.steps if (s.rank, s.device) == (rank, device)]
        _draw_steps(ax, steps, used)
        rec = analysis.device(rank, device)
        ax.set_title(
            f"{device_label(rank, device, rec.name if rec else '')}: {len(steps)} steps",
            loc="left",
            fontsize="medium",
        )
    from matplotlib.patches import Patch

    phases = _phases_used(analysis.idle.steps)
    busy = [
        Patch(
            facecolor=PHASE_STYLE[p][0],
            hatch=PHASE_STYLE[p][1],
            edgecolor="#DDDDDD" if PHASE_STYLE[p][1] else "none",
            label=f"busy: {p.replace('_', ' ')}",
        )
        for p in phases
    ] or [Patch(facecolor=BUSY_COLORS["kernel"], label="busy (GPU work)")]
    legend_below(fig, [*busy, *(cause_patch(c) for c in used)])
    fig.suptitle(STEPS_TITLE)
    return fig


def _phases_used(steps: list[StepStats]) -> list[str]:
    """The phases with GPU time in any of ``steps``, in ``STEP_PHASES`` order."""
    return [p for p in STEP_PHASES if any(s.phases[p].gpu_ns for s in steps if s.phases)]


def _draw_steps(ax: Any, steps: list[StepStats], causes: list[str]) -> None:
    xs = np.arange(len(steps))
    bottom = np.zeros(len(steps), dtype=np.float64)
    phases = _phases_used(steps)
    for p in phases:  # the busy bar split by phase (their GPU ns sum to the busy ns)
        ms = np.array([s.phases[p].gpu_ns if s.phases else 0 for s in steps], np.float64)
        color, hatch = PHASE_STYLE[p]
        ax.bar(
            xs,
            ms / NS_PER_MS,
            bottom=bottom,
            width=0.8,
            color=color,
            hatch=hatch,
            edgecolor="#DDDDDD" if hatch else "none",
            lw=0,
        )
        bottom = bottom + ms / NS_PER_MS
    rest = np.array([s.busy_ns for s in steps], dtype=np.float64) / NS_PER_MS - bottom
    if not phases or rest.max(initial=0) > 0:  # steps without phases: one busy bar
        ax.bar(xs, rest, bottom=bottom, color=BUSY_COLORS["kernel"], width=0.8)
        bottom = bottom + rest
    for c in causes:
        ms = np.array([s.idle_by_cause.get(c, 0) for s in steps], dtype=np.float64) / NS_PER_MS
        if not ms.any():
            continue
        ax.bar(
            xs,
            ms,
            bottom=bottom,
            width=0.8,
            color=cause_color(c),
            hatch=cause_hatch(c),
            edgecolor="#333333" if cause_hatch(c) else "none",
            lw=0,
        )
        bottom = bottom + ms
    # step names are long (``ProfilerStep#12``): the number or the name's tail says enough
    every = max(1, len(steps) // 30)
    ax.set_xticks(xs[::every], [_step_label(s.name) for s in steps][::every])
    ax.set_xlim(-0.6, len(steps) - 0.4)
    ax.set_ylabel("ms")
    ax.set_xlabel("step")
    for side in ("top", "right"):
        ax.spines[side].set_visible(False)


def _step_label(name: str) -> str:
    tail = name.rsplit("#", 1)[-1]
    return tail if len(tail) <= 8 else tail[:7] + "…"
