"""Figures of an analysis (matplotlib, Agg backend; install the ``plot`` extra).

Every ``figure_*`` function takes an ``Analysis`` and returns a matplotlib Figure (notebooks
show it; nothing is saved); ``write_figures`` and ``figure_pngs`` save them for the CLI and the
reports. The figures, in report order (``FIGURES``; the file suffix ``tf analyze --plot
out.png`` writes each one to):

=============  ====================  ================================================
suffix         function              what it shows
=============  ====================  ================================================
(main)         ``figure_analysis``   per device: utilization (busy % per aligned bin,
                                     largest gaps shaded by cause) | idle by cause
``timeline``   ``figure_timeline``   busy lanes by kind, idle gaps split by cause,
                                     step boundaries, the largest gaps labelled
``steps``      ``figure_steps``      per step: busy by phase and idle by cause (ms)
``kernels``    ``figure_short_kernels``  short-kernel Pareto: total time, cumulative %
``tflops``     ``figure_tflops``     achieved TFLOPS against the dtype's peak, MFU
``serving``    ``figure_serving``    a server's iterations: busy by phase, idle inside,
                                     the host gap before each by its split
``memory``     ``figure_memory``     allocated and reserved bytes over the window, the
                                     GPU idle while allocator calls ran marked
=============  ====================  ================================================

Colours come from ``palette`` (one per cause, the same in the HTML report). Legends sit
outside the axes. A trace with nothing to draw gives a figure that says so.
"""

from __future__ import annotations

import io
import warnings
from collections.abc import Callable
from pathlib import Path
from typing import Any, Final

import numpy as np

from traceforensics.analysis.idle.causes import ranked_causes
from traceforensics.analysis.pipeline import Analysis
from traceforensics.report.format import fmt_ns, fmt_pct
from traceforensics.report.lanes import device_lanes
from traceforensics.report.palette import cause_color, cause_hatch, cause_patch, causes_in_order
from traceforensics.report.plot_kernels import figure_short_kernels, figure_tflops
from traceforensics.report.plot_memory import figure_memory
from traceforensics.report.plot_serving import figure_serving
from traceforensics.report.plot_timeline import figure_timeline
from traceforensics.report.plot_usage import draw_utilization, figure_steps, figure_utilization
from traceforensics.report.plotkit import (
    DPI,
    NO_GPU,
    legend_below,
    message_figure,
    new_figure,
    time_unit,
)

__all__ = [
    "FIGURES",
    "figure_analysis",
    "figure_pngs",
    "figure_short_kernels",
    "figure_steps",
    "figure_tflops",
    "figure_timeline",
    "figure_utilization",
    "plot_analysis",
    "write_figures",
]

MAIN_TITLE: Final = (
    "GPU utilization (busy % per bin; shaded: the largest idle gaps by top cause) "
    "and idle time by cause"
)
#: Figures beside the main one: file suffix -> (caption, function). Report order.
FIGURES: Final[dict[str, tuple[str, Callable[[Analysis], Any]]]] = {
    "timeline": ("Gap attribution timeline", figure_timeline),
    "steps": ("Per-step breakdown", figure_steps),
    "kernels": ("Short-kernel Pareto chart", figure_short_kernels),
    "tflops": ("Achieved TFLOPS against peak", figure_tflops),
    "serving": ("Serving iterations: busy and idle by phase", figure_serving),
    "memory": ("Memory over time: allocated and reserved", figure_memory),
}


def figure_analysis(analysis: Analysis) -> Any:
    """A matplotlib Figure, one row per device: the utilization curve (busy % per bin, bins
    aligned to the analysis window and sized to it, the largest gaps shaded by their top cause)
    and a bar of idle time by cause (ms, % of idle); a text panel for a CPU-only trace."""
    lanes = device_lanes(analysis)
    if not lanes:
        return message_figure(MAIN_TITLE, NO_GPU)
    fig, axes = new_figure(len(lanes), 2, row_in=2.8, gridspec_kw={"width_ratios": [3, 1]})
    for row, lane in enumerate(lanes):
        draw_utilization(axes[row][0], lane, analysis)
        rec = analysis.device(lane.rank, lane.device)
        _idle_bar(axes[row][1], rec.idle_by_cause if rec else {}, rec.idle_ns if rec else 0)
    used = causes_in_order(*(d.idle_by_cause for d in analysis.devices))
    legend_below(fig, [cause_patch(c) for c in used])
    fig.suptitle(MAIN_TITLE)
    return fig


def _idle_bar(ax: Any, by_cause: dict[str, int], idle_ns: int) -> None:
    """Idle by cause, largest on top, each bar labelled with its time and share of idle."""
    ranked = ranked_causes(by_cause)
    if not ranked:
        ax.set_axis_off()
        ax.text(0.5, 0.5, "no idle time", ha="center", va="center", transform=ax.transAxes)
        return
    scale, unit = time_unit(max(v for _, v in ranked))
    ys = np.arange(len(ranked))[::-1]
    for y, (c, v) in zip(ys, ranked, strict=True):
        hatch = cause_hatch(c)
        ax.barh(y, v / scale, color=cause_color(c), hatch=hatch,
                edgecolor="#333333" if hatch else "none", lw=0)  # fmt: skip
        ax.text(v / scale, y, f" {fmt_ns(v)} ({fmt_pct(v / max(idle_ns, 1))})",
                va="center", fontsize="x-small")  # fmt: skip
    ax.set_yticks(ys, [c for c, _ in ranked], fontsize="small")
    # room on the right for the longest bar's label
    ax.set_xlim(0, ranked[0][1] / scale * 1.9)
    ax.set_xlabel(f"idle ({unit})")
    ax.set_title(f"idle by cause ({fmt_ns(idle_ns)})", fontsize="medium")
    for side in ("top", "right"):
        ax.spines[side].set_visible(False)


def plot_analysis(analysis: Analysis, out: Path) -> Path:
    """Save ``figure_analysis`` at ``out`` (PNG, SVG or PDF from the suffix); returns it."""
    out = Path(out)
    _save(figure_analysis(analysis), out)
    return out


def write_figures(analysis: Analysis, out: Path, only_content: bool = False) -> dict[str, Path]:
    """Save the main figure at ``out`` and each of ``FIGURES`` beside it as
    ``<stem>.<suffix><ext>`` (``out.png`` -> ``out.timeline.png``, ...); returns
    ``{"main": out, "timeline": ..., ...}``. Figures with nothing to draw are written too, as a
    panel that says why, so one ``--plot`` run always writes the same files; ``only_content``
    leaves them out (a report links only figures that show data)."""
    out = Path(out)
    paths: dict[str, Path] = {}
    for name in ("main", *FIGURES):
        if only_content and not has_content(name, analysis):
            continue
        if name == "main":
            paths[name] = plot_analysis(analysis, out)
        else:
            target = out.with_name(f"{out.stem}.{name}{out.suffix}")
            _save(FIGURES[name][1](analysis), target)
            paths[name] = target
    return paths


def caption(name: str) -> str:
    """The caption of figure ``name`` ("main" or a ``FIGURES`` key)."""
    return "Utilization and idle time by cause" if name == "main" else FIGURES[name][0]


def has_content(name: str, analysis: Analysis) -> bool:
    """Whether figure ``name`` ("main" or a ``FIGURES`` key) draws data rather than a panel
    saying there is none (reports leave such figures out)."""
    k = analysis.kernels
    if not analysis.devices:
        return False
    return {
        "steps": bool(analysis.idle.steps),
        "kernels": bool(k.short_kernels) and k.short_kernel_ns > 0,
        "tflops": any(o.tflops is not None and o.flops > 0 and o.peak_tflops for o in k.ops),
        "serving": analysis.serving is not None and bool(analysis.serving.iterations),
        "memory": bool(analysis.memory),
    }.get(name, True)


def figure_pngs(analysis: Analysis, dpi: int = 100) -> list[tuple[str, str, bytes]]:
    """``(name, caption, PNG bytes)`` of each figure with content, main first (the reports);
    for a multi-rank job the timeline first: on the job clock it shows who arrives late."""
    from traceforensics.report.job_verdict import is_job

    makers = {"main": ("Utilization and idle time by cause", figure_analysis), **FIGURES}
    if is_job(analysis):
        makers = {"timeline": makers.pop("timeline"), **makers}
    out: list[tuple[str, str, bytes]] = []
    for name, (text, make) in makers.items():
        if has_content(name, analysis):
            buf = io.BytesIO()
            _save(make(analysis), buf, dpi=dpi)
            out.append((name, text, buf.getvalue()))
    return out


def _save(fig: Any, target: Path | io.BytesIO, dpi: int = DPI) -> None:
    """Save ``fig`` (made without pyplot: nothing holds it once saved)."""
    with warnings.catch_warnings():
        # a name in a script the installed fonts lack (CJK) is drawn as boxes: the HTML and
        # Markdown tables carry the text itself, so one warning per glyph is noise
        warnings.filterwarnings("ignore", message="Glyph .* missing from font")
        if isinstance(target, Path):
            fig.savefig(target, dpi=dpi)
        else:
            fig.savefig(target, format="png", dpi=dpi)
