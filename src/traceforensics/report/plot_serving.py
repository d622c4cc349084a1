"""The serving figure (issue 48): per device, one stacked bar per engine iteration, in time
order: GPU busy coloured by phase (eager iterations hatched), the GPU idle inside the
iteration's GPU span, then the host gap before it split by class (scheduler, sampling,
detokenisation, other). The legend lists a segment only where some bar shows it at least
``VISIBLE_SHARE`` of its axis's height (a thinner one is drawn but cannot be seen: listing it
would name a colour the reader cannot find). ``figure_serving(analysis)`` -> a matplotlib
Figure."""

from __future__ import annotations

from typing import Any, Final

import numpy as np

from traceforensics.analysis.pipeline import Analysis
from traceforensics.analysis.serving import Iteration
from traceforensics.analysis.serving.engines import GAP_CLASS_IDS
from traceforensics.report.plotkit import (
    device_label,
    legend_below,
    message_figure,
    new_figure,
    time_unit,
)

TITLE: Final = "Serving iterations: GPU busy by phase, idle inside, and the host gap before"
NOT_SERVING: Final = "not recognised as an inference server: no serving view"
NO_ITERATIONS: Final = "a server, but no iteration ranges of its engine in the trace"
#: Busy colour per phase (saturated: busy time), Okabe-Ito blues and greens.
PHASE_COLORS: Final[dict[str, str]] = {
    "prefill": "#0072B2",
    "decode": "#009E73",
    "mixed": "#CC79A7",
    "unknown": "#3F3F3F",
}
#: Idle colours: light, so idle never reads as busy; the gap classes told apart by hue.
IDLE_INSIDE: Final = ("#D9D9D9", "..")
GAP_COLORS: Final[dict[str, str]] = {
    "scheduler": "#E69F00",
    "sampling": "#56B4E9",
    "detokenisation": "#F0E442",
    "other": "#BBBBBB",
}
EAGER_HATCH: Final = "//"
#: A segment is listed in the legend when its largest bar reaches this share of the axis top.
VISIBLE_SHARE: Final = 0.005
#: Up to this many iterations per device, each bar is labelled with its batch size.
LABELLED: Final = 40


def _segments(its: list[Iteration]) -> list[tuple[str, np.ndarray, str, str]]:
    """(label, ns per iteration, colour, hatch) in stacking order."""
    busy = np.asarray([i.busy_ns for i in its], dtype=np.int64)
    span = np.asarray([(i.gpu_end_ns or 0) - (i.gpu_start_ns or 0) for i in its], dtype=np.int64)
    out: list[tuple[str, np.ndarray, str, str]] = []
    for phase, color in PHASE_COLORS.items():
        for graph in (True, False):
            sel = np.asarray([i.phase == phase and i.graph == graph for i in its])
            if sel.any():
                label = f"busy: {phase}" + ("" if graph else " (eager)")
                out.append((label, np.where(sel, busy, 0), color, "" if graph else EAGER_HATCH))
    inside = np.maximum(span - busy, 0)
    if inside.any():
        out.append(("idle inside", inside, *IDLE_INSIDE))
    for c in GAP_CLASS_IDS:
        ns = np.asarray([i.gap.get(c, 0) for i in its], dtype=np.int64)
        if ns.any():
            out.append((f"gap: {c}", ns, GAP_COLORS[c], ""))
    return out


def figure_serving(analysis: Analysis) -> Any:
    """The figure (module docstring), or a text panel when there is nothing to draw."""
    sv = analysis.serving
    if sv is None:
        return message_figure(TITLE, NOT_SERVING)
    if not sv.iterations:
        return message_figure(TITLE, NO_ITERATIONS)
    devices = sorted({(i.rank, i.device) for i in sv.iterations})
    fig, axes = new_figure(len(devices), row_in=2.8)
    handles: dict[str, Any] = {}
    from matplotlib.patches import Patch

    for ax, (rank, device) in zip(axes[:, 0], devices, strict=True):
        its = [i for i in sv.iterations if (i.rank, i.device) == (rank, device)]
        segs = _segments(its)
        top = max(int(np.sum([s[1] for s in segs], axis=0).max()), 1)
        unit_ns, unit = time_unit(top)
        xs = np.arange(len(its))
        bottom = np.zeros(len(its), dtype=np.float64)
        for label, ns, color, hatch in segs:
            vals = ns / unit_ns
            ax.bar(
                xs,
                vals,
                bottom=bottom,
                width=0.85,
                color=color,
                hatch=hatch,
                edgecolor="#555555" if hatch else "none",
                lw=0,
            )
            bottom += vals
            if int(ns.max(initial=0)) < VISIBLE_SHARE * top:
                continue  # thinner than a pixel: not in the legend
            handles.setdefault(
                label,
                Patch(facecolor=color, hatch=hatch, edgecolor="#555555", lw=0.4, label=label),
            )
        rec = analysis.device(rank, device)
        ax.set_title(
            f"{device_label(rank, device, rec.name if rec else '')}: {len(its)} "
            f"iteration{'s' * (len(its) != 1)} "
            f"({sv.engine})",
            loc="left",
            fontsize="medium",
        )
        if len(its) <= LABELLED:  # the batch size over each bar, while they stay readable
            for x, it, h in zip(xs, its, bottom, strict=True):
                if it.batch_size is not None:
                    ax.annotate(
                        f"bs {it.batch_size}",
                        (x, h),
                        ha="center",
                        va="bottom",
                        fontsize="x-small",
                        xytext=(0, 2),
                        textcoords="offset points",
                    )
        from matplotlib.ticker import MaxNLocator

        if len(its) <= LABELLED:
            ax.set_xticks(xs)
        else:
            ax.xaxis.set_major_locator(MaxNLocator(integer=True))
        ax.margins(y=0.12)
        ax.set_ylabel(unit)
        ax.set_xlabel("iteration (time order)")
        ax.set_xlim(-0.6, len(its) - 0.4)
    legend_below(fig, list(handles.values()))
    fig.suptitle(TITLE)
    return fig


__all__ = ["GAP_COLORS", "PHASE_COLORS", "VISIBLE_SHARE", "figure_serving"]
