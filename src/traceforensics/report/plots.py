"""Plots of an analysis (matplotlib, Agg backend; install the ``plot`` extra).

``plot_analysis`` draws, per device, the utilization timeline (busy fraction per bin) with the
largest idle gaps shaded by their dominant cause, and a bar of idle time by cause. The same
figure works in notebooks: ``figure_analysis`` returns the Figure without saving it.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from traceforensics.analysis.idle.causes import CAUSES, ranked_causes
from traceforensics.analysis.pipeline import Analysis
from traceforensics.model.errors import InputError
from traceforensics.model.units import NS_PER_MS, NS_PER_S

_COLORS = dict(
    zip(
        CAUSES,
        [
            "#1f77b4",
            "#d62728",
            "#ff7f0e",
            "#9467bd",
            "#8c564b",
            "#e377c2",
            "#2ca02c",
            "#17becf",
            "#bcbd22",
            "#7f7f7f",
            "#aec7e8",
            "#c7c7c7",
        ],
        strict=False,
    )
)


def _pyplot() -> Any:
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError as exc:  # pragma: no cover - depends on the environment
        raise InputError(
            "plots need matplotlib; install it with: pip install 'traceforensics[plot]'"
        ) from exc
    return plt


def figure_analysis(analysis: Analysis) -> Any:
    """A matplotlib Figure: one row per device (timeline | idle by cause)."""
    plt = _pyplot()
    pats = analysis.patterns
    n = max(len(pats), 1)
    fig, axes = plt.subplots(
        n, 2, figsize=(13, 3.2 * n), squeeze=False, gridspec_kw={"width_ratios": [3, 1]}
    )
    idle = {(d.rank, d.device): d for d in analysis.devices}
    for row, p in enumerate(pats):
        ax, bar = axes[row][0], axes[row][1]
        tl = p.timeline
        xs = [(tl.start_ns + i * tl.bin_ns) / NS_PER_S for i in range(len(tl.values))]
        t0 = xs[0] if xs else 0.0
        ax.step(
            [x - t0 for x in xs],
            [100 * float(v) for v in tl.values],
            where="post",
            color="black",
            lw=1,
        )
        for g in analysis.idle.gaps:
            if (g.rank, g.device) != (p.rank, p.device) or not g.causes:
                continue
            cause = ranked_causes(g.causes)[0][0]
            ax.axvspan(
                g.start_ns / NS_PER_S - t0,
                (g.start_ns + g.dur_ns) / NS_PER_S - t0,
                color=_COLORS.get(cause, "#999999"),
                alpha=0.35,
                lw=0,
            )
        ax.set_ylim(0, 105)
        ax.set_ylabel("GPU busy %")
        ax.set_xlabel("time (s)")
        ax.set_title(
            f"rank {p.rank} GPU {p.device}: {p.pattern.pattern} "
            f"({tl.bin_ns / NS_PER_MS:g} ms bins; shaded = largest gaps)"
        )
        d = idle.get((p.rank, p.device))
        causes = [(v, c) for c, v in ranked_causes(d.idle_by_cause if d else {})]
        bar.barh(
            [c for _, c in causes][::-1],
            [v / 1e6 for v, _ in causes][::-1],
            color=[_COLORS.get(c, "#999999") for _, c in causes][::-1],
        )
        bar.set_xlabel("idle ms")
        bar.set_title("idle by cause")
    fig.tight_layout()
    return fig


def plot_analysis(analysis: Analysis, out: Path) -> Path:
    """Save ``figure_analysis`` as a PNG at ``out``."""
    plt = _pyplot()
    fig = figure_analysis(analysis)
    fig.savefig(out, dpi=110)
    plt.close(fig)
    return out
