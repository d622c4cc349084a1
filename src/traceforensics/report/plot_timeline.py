"""The gap-attribution timeline: per device, what the GPU did and why it waited.

One row per device over its analysis window (x: time from the window start)::

    labels      12.3 ms data_loading ─┐          4.1 ms host_sync ─┐
    kernels     ████ ██████ ███      │ ████████ ███ ███           │ ████
    memcpy         ▌                 │     ▌                      │
    idle        ░░░░░░░░░░░░░░░░░░░░░▓▓▓▓░░░░░░░░░░░░░░░░░░░░░░░░░▓▓░░░░
                |step 1             |step 2              |step 3

Busy lanes are the busy union per kind (kernels, communication, memcpy, memset). The idle lane
shows every gap; the gaps the idle pass kept with their causes (``analysis.idle.gaps``, the
``--gaps`` largest) are split over their causes, each cause's share of the gap as its share of
the lane's height (the split says how much, not in which order). The largest gaps are labelled
with their length and top cause; dotted lines are step boundaries.

A multi-rank job is drawn on the job clock (``row_origins``): one row per rank (device), all on
one shared x axis, each rank's times moved by its clock offset (``RankRow.clock_offset_ns``,
found from the collectives' ends: ``analysis.ranks``), so a rank that reaches a collective late
is seen late, against the others' earlier starts. A single rank keeps one axis per device, each
from its own window start.
"""

from __future__ import annotations

from typing import Any, Final, NamedTuple

import numpy as np
import polars as pl

from traceforensics.analysis.idle.causes import CAUSES, ranked_causes
from traceforensics.analysis.idle.results import Gap
from traceforensics.analysis.intervals import clip
from traceforensics.analysis.pipeline import Analysis
from traceforensics.model.units import I64
from traceforensics.report.format import fmt_ns
from traceforensics.report.lanes import DeviceLanes, coalesce, device_lanes
from traceforensics.report.palette import (
    BUSY_COLORS,
    BUSY_LABELS,
    OTHER_IDLE_COLOR,
    cause_color,
    cause_hatch,
    cause_patch,
    causes_in_order,
)
from traceforensics.report.plotkit import (
    NO_GPU,
    device_label,
    legend_below,
    message_figure,
    new_figure,
    time_unit,
)

TITLE: Final = "Gap attribution: busy lanes by kind, idle gaps split by cause"
#: Gaps labelled per device (more labels would collide on a busy trace).
LABELLED_GAPS: Final = 3
#: Horizontal drawing resolution: holes narrower than window / this are not drawn apart.
PIXELS: Final = 3000
_LANE_H: Final = 0.7


def figure_timeline(analysis: Analysis) -> Any:
    """A matplotlib Figure: one gap-attribution timeline per device (see the module
    docstring); a text panel for a trace with no GPU activity. Times on the x axis are in µs,
    ms or s from each device's analysis-window start, whichever fits the window; for a
    multi-rank job, from the job's first window start on the job clock, one axis for all."""
    lanes = device_lanes(analysis)
    if not lanes:
        return message_figure(TITLE, NO_GPU)
    origins, shared = row_origins(analysis, lanes)
    job = shared is not None
    # a job's rows are lower: eight or more ranks must still read on one page
    fig, axes = new_figure(len(lanes), row_in=2.0 if job else 2.6, sharex=job)
    gaps = [g for g in analysis.idle.gaps if g.dur_ns > 0]
    kinds: set[str] = set()
    any_idle = False
    roles = _roles(analysis) if job else {}
    waits = wait_heads(analysis) if job else {}
    waited = False
    for row, (ax, lane) in enumerate(zip(axes[:, 0], lanes, strict=True)):
        own = [g for g in gaps if (g.rank, g.device) == (lane.rank, lane.device)]
        kinds |= set(lane.kinds)
        axis = Axis(origins[row], shared or lane.span_ns, roles.get((lane.rank, lane.device), ""))
        any_idle |= _draw_device(ax, lane, own, _step_edges(analysis, lane), axis)
        if job:
            waited |= _draw_waits(ax, lane, axis, waits.get((lane.rank, lane.device)))
        if job and row < len(lanes) - 1:
            ax.set_xlabel("")  # one x label, under the last row of the shared axis
    if job:
        unit = time_unit(shared or 1)[1]
        aligned = any(offset_of(analysis).values())
        axes[-1][0].set_xlabel(
            f"job clock: time from the first rank's window start ({unit})"
            + ("; rank clocks aligned on the collectives' ends" if aligned else "")
        )
    # busy kinds first, then the causes: "memcpy" and "communication" are both a busy kind
    # and a cause, so the busy entries say "busy:"
    handles = [_patch(BUSY_COLORS[k], f"busy: {BUSY_LABELS[k]}") for k in BUSY_COLORS if k in kinds]
    if waited:
        handles.append(_wait_patch())
    handles += [cause_patch(c) for c in causes_in_order(*(g.causes for g in gaps))]
    if any_idle:
        handles.append(_patch(OTHER_IDLE_COLOR, "idle in smaller gaps (thin: not split here)"))
    if analysis.idle.steps:
        from matplotlib.lines import Line2D

        handles.append(Line2D([], [], color="#555555", ls=":", lw=1, label="step boundary"))
    legend_below(fig, handles, ncol=5)
    fig.suptitle(TITLE)
    return fig


def _patch(color: str, label: str) -> Any:
    from matplotlib.patches import Patch

    return Patch(facecolor=color, edgecolor="#333333", linewidth=0.4, label=label)


def _step_edges(analysis: Analysis, lane: DeviceLanes) -> list[int]:
    """Step starts and the last step's end on this device (ns), inside the window."""
    steps = [s for s in analysis.idle.steps if (s.rank, s.device) == (lane.rank, lane.device)]
    edges = {s.start_ns for s in steps} | {s.start_ns + s.dur_ns for s in steps[-1:]}
    return sorted(t for t in edges if lane.lo <= t <= lane.hi)


class Axis(NamedTuple):
    """Where a row puts the device's trace-clock ns: x = (t - ``origin_ns``) / unit, over
    ``span_ns`` from x = 0; ``role``: the row's part in the job (title), or empty."""

    origin_ns: int
    span_ns: int
    role: str = ""


def offset_of(analysis: Analysis) -> dict[tuple[int, int], int]:
    """Each (rank, device)'s clock offset (ns its clock reads ahead of the job clock; 0 when
    unknown): ``analysis.ranks``' per-rank rows."""
    if analysis.ranks is None:
        return {}
    return {(r.rank, r.device): int(r.clock_offset_ns) for r in analysis.ranks.per_rank}


def row_origins(analysis: Analysis, lanes: list[DeviceLanes]) -> tuple[list[int], int | None]:
    """``(origins, shared span)``: the trace-clock ns plotted at x = 0 on each lane's row, and
    the one span all rows share (ns), or None when each row spans its own window.

    Rule: a job (two ranks or more) is drawn on the job clock: a time t on a device whose clock
    reads ``offset`` ahead is ``t - offset``; x = 0 is the earliest window start on that clock,
    the span ends at the latest window end. Otherwise each row starts at its window start."""
    if len({lane.rank for lane in lanes}) < 2:
        return [lane.lo for lane in lanes], None
    off = offset_of(analysis)
    shift = [off.get((lane.rank, lane.device), 0) for lane in lanes]
    start = min(lane.lo - o for lane, o in zip(lanes, shift, strict=True))
    end = max(lane.hi - o for lane, o in zip(lanes, shift, strict=True))
    return [start + o for o in shift], max(end - start, 1)


#: The waiting head of a collective: the communication colour, hatched over a pale fill.
WAIT_FILL: Final = "#E9E3DA"


def wait_heads(analysis: Analysis) -> dict[tuple[int, int], tuple[I64, I64]]:
    """Per (rank, device): the waiting heads ``[start, start + wait_ns)`` of its matched
    collectives (trace-clock ns of that device, sorted): the time it sat in a collective
    before the last rank arrived (``analysis.ranks.collectives``; estimated splits left out)."""
    if analysis.ranks is None or analysis.ranks.collectives.height == 0:
        return {}
    rows = analysis.ranks.collectives
    if not {"matched", "wait_ns", "start_ns", "rank", "device"} <= set(rows.columns):
        return {}
    heads = rows.filter(pl.col("matched") & (pl.col("wait_ns") > 0)).sort("start_ns")
    out: dict[tuple[int, int], tuple[I64, I64]] = {}
    for (rank, device), part in heads.group_by("rank", "device"):
        start = part["start_ns"].to_numpy().astype(np.int64)
        out[(int(str(rank)), int(str(device)))] = (start, start + part["wait_ns"].to_numpy())
    return out


def _draw_waits(ax: Any, lane: DeviceLanes, axis: Axis, heads: tuple[I64, I64] | None) -> bool:
    """The waiting heads of the row's collectives, hatched over its communication lane;
    returns whether any was drawn."""
    if heads is None or "communication" not in lane.kinds:
        return False
    s, e = clip(*heads, lane.lo, lane.hi)
    if not s.size:
        return False
    scale = time_unit(axis.span_ns)[0]
    s, e = coalesce(s, e, max(axis.span_ns / PIXELS, 1.0))
    names = [BUSY_LABELS[k] for k in BUSY_COLORS if k in lane.kinds] + ["idle"]
    y = len(names) - 1 - names.index(BUSY_LABELS["communication"])
    bars = [((a - axis.origin_ns) / scale, (b - a) / scale) for a, b in zip(s, e, strict=True)]
    color = BUSY_COLORS["communication"]
    ax.broken_barh(bars, (y, _LANE_H), facecolor=WAIT_FILL, edgecolor=color, hatch="////", lw=0)
    return True


def _wait_patch() -> Any:
    from matplotlib.patches import Patch

    return Patch(
        facecolor=WAIT_FILL,
        edgecolor=BUSY_COLORS["communication"],
        hatch="////",
        linewidth=0.4,
        label="communication: waiting for the last rank",
    )


def _roles(analysis: Analysis) -> dict[tuple[int, int], str]:
    """Each row's part in the job: the straggler (and its cause), waiting for it, and any
    clock offset the row was moved by."""
    ranks = analysis.ranks
    if ranks is None:
        return {}
    lead = ranks.straggler
    out = {}
    for r in ranks.per_rank:
        role = ""
        if lead is not None and (r.rank, r.device) == (lead.rank, lead.device):
            role = f"straggler ({lead.cause})"
        elif r.waiting_for is not None:
            role = f"waits for rank {r.waiting_for}"
        if r.clock_offset_ns:
            sign = "+" if r.clock_offset_ns > 0 else "-"
            role += f"{', ' if role else ''}clock {sign}{fmt_ns(abs(r.clock_offset_ns))}"
        out[(r.rank, r.device)] = role
    return out


def _draw_device(
    ax: Any, lane: DeviceLanes, gaps: list[Gap], steps: list[int], axis: Axis | None = None
) -> bool:
    """Draw one device's lanes on ``ax`` (x from ``axis``; default: the device's own window);
    returns whether it has any idle gap."""
    axis = axis or Axis(lane.lo, lane.span_ns)
    scale, unit = time_unit(axis.span_ns)
    res = max(axis.span_ns / PIXELS, 1.0)

    def x(ns: float) -> float:
        return (ns - axis.origin_ns) / scale

    names = [BUSY_LABELS[k] for k in BUSY_COLORS if k in lane.kinds] + ["idle"]
    ys = {name: len(names) - 1 - i for i, name in enumerate(names)}  # first lane on top
    for kind in BUSY_COLORS:
        if kind not in lane.kinds:
            continue
        s, e = coalesce(*lane.kinds[kind], res)
        bars = [(x(a), (b - a) / scale) for a, b in zip(s.tolist(), e.tolist(), strict=True)]
        ax.broken_barh(bars, (ys[BUSY_LABELS[kind]], _LANE_H), color=BUSY_COLORS[kind], lw=0)
    idle_y = ys["idle"]
    hs, he = lane.idle()
    wide = (he - hs) >= res  # a hole under a pixel wide cannot be seen
    ws, we = hs[wide].tolist(), he[wide].tolist()
    holes = [(x(a), (b - a) / scale) for a, b in zip(ws, we, strict=True)]
    # a thin strip, so idle not split by cause reads apart from the split gaps (and from the
    # grey of ``untraced``) by its shape as well as its colour
    thin = _LANE_H * 0.3
    ax.broken_barh(holes, (idle_y + (_LANE_H - thin) / 2, thin), color=OTHER_IDLE_COLOR, lw=0)
    for g in gaps:
        _draw_gap(ax, g, x(g.start_ns), g.dur_ns / scale, idle_y)
    top = len(names) - 1 + _LANE_H
    biggest = sorted(gaps, key=lambda g: -g.dur_ns)[:LABELLED_GAPS]
    for level, g in enumerate(biggest):
        _label_gap(
            ax, g, x(g.start_ns + g.dur_ns / 2), x(axis.origin_ns + axis.span_ns), top, level
        )
    for t in steps:
        ax.axvline(x(t), color="#555555", ls=":", lw=1, zorder=0)
    ax.set_yticks([ys[n] + _LANE_H / 2 for n in names], names)
    ax.set_ylim(-0.2, top + 0.5 + 0.55 * LABELLED_GAPS)
    ax.set_xlim(0, max(x(axis.origin_ns + axis.span_ns), 1e-9))
    ax.set_xlabel(f"time from window start ({unit})")
    busy = float((lane.busy[1] - lane.busy[0]).sum())
    share = busy / lane.span_ns if lane.span_ns else 0.0
    role = f" · {axis.role}" if axis.role else ""
    ax.set_title(
        f"{device_label(lane.rank, lane.device, lane.name)}{role}: window "
        f"{fmt_ns(lane.span_ns)}, busy {100 * share:.1f}%",
        loc="left",
        fontsize="medium",
    )
    for side in ("top", "right"):
        ax.spines[side].set_visible(False)
    return bool(hs.size)


def _draw_gap(ax: Any, g: Gap, x0: float, width: float, y: float) -> None:
    """The gap's causes stacked in the idle lane, each as its share of the lane's height."""
    total = sum(g.causes.values()) or 1
    bottom = y
    for cause in [c for c in CAUSES if g.causes.get(c)] + sorted(set(g.causes) - set(CAUSES)):
        h = _LANE_H * g.causes[cause] / total
        ax.broken_barh(
            [(x0, width)],
            (bottom, h),
            facecolor=cause_color(cause),
            hatch=cause_hatch(cause),
            edgecolor="#333333" if cause_hatch(cause) else "none",
            lw=0,
        )
        bottom += h


def _label_gap(ax: Any, g: Gap, xc: float, x_end: float, top: float, level: int) -> None:
    """``12.3 ms data_loading`` above the lanes, one height per label so none collide; the
    text leans away from the window's edges so it stays inside the axes."""
    cause = ranked_causes(g.causes)[0][0] if g.causes else "idle"
    y = top + 0.35 + 0.55 * (LABELLED_GAPS - 1 - level)
    ha = "left" if xc < 0.2 * x_end else "right" if xc > 0.8 * x_end else "center"
    ax.plot([xc, xc], [top, y], color="#333333", lw=0.6)
    ax.text(xc, y, f" {fmt_ns(g.dur_ns)} {cause} ", ha=ha, va="bottom", fontsize="small")
