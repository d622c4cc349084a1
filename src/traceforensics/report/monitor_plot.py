"""Monitoring-log plot: utilization, SM clock, temperature, power on one shared time axis,
throttle episodes shaded on every panel. matplotlib with the Agg backend (no display).

The legend (one entry per GPU, and the throttle shading) sits right of the panels, in room the
constrained layout reserves for it: a legend inside a panel covered the curves of a busy log."""

from __future__ import annotations

from pathlib import Path
from typing import Any, Final

import numpy as np
import numpy.typing as npt
import polars as pl

from traceforensics.analysis.monitoring.monitor import MonitorReport
from traceforensics.model.monitor import MonitorLog, first_time_ns, gpu_ids, gpu_rows
from traceforensics.report.plotkit import figure_class

MAX_POINTS_PER_LINE: Final = 20_000
_THROTTLE: Final = "#D55E00"  # Okabe-Ito vermillion: visible under every GPU's line colour
_PANELS: Final = (
    ("util_pct", "utilization %"),
    ("sm_clock_mhz", "SM clock MHz"),
    ("temperature_c", "temperature °C"),
    ("power_w", "power W"),
)


def _decimate(
    x: npt.NDArray[np.float64], y: npt.NDArray[np.float64]
) -> tuple[npt.NDArray[np.float64], npt.NDArray[np.float64]]:
    """Keep at most MAX_POINTS_PER_LINE points: per chunk the min and the max, so drops and
    spikes survive (plain striding would hide a 1-sample fall to 0%)."""
    n = x.size
    if n <= MAX_POINTS_PER_LINE:
        return x, y
    chunk = int(np.ceil(n / (MAX_POINTS_PER_LINE / 2)))
    m = n // chunk * chunk
    yc = y[:m].reshape(-1, chunk)
    xc = x[:m].reshape(-1, chunk)
    lo = np.nanargmin(np.where(np.isnan(yc), np.inf, yc), axis=1)
    hi = np.nanargmax(np.where(np.isnan(yc), -np.inf, yc), axis=1)
    rows = np.arange(yc.shape[0])
    first = np.minimum(lo, hi)
    second = np.maximum(lo, hi)
    xs = np.column_stack((xc[rows, first], xc[rows, second])).ravel()
    ys = np.column_stack((yc[rows, first], yc[rows, second])).ravel()
    return xs, ys


def plot_monitor(log: MonitorLog, report: MonitorReport, out: str | Path) -> Path:
    """Write the four-panel PNG to ``out``; returns the path."""
    path = Path(out)
    figure_monitor(log, report).savefig(path, dpi=110)
    return path


def figure_monitor(log: MonitorLog, report: MonitorReport) -> Any:
    """The four-panel figure of a monitoring log (utilization, memory, power, clocks per GPU
    over time; shaded: clock throttling under load), a matplotlib Figure that a notebook
    shows (``plotkit.figure_class``)."""
    frame = log.frame
    t0 = first_time_ns(frame)
    fig = figure_class()(figsize=(12, 8), layout="constrained")
    axes = fig.subplots(len(_PANELS), 1, sharex=True, squeeze=False)
    for gpu in gpu_ids(frame):
        part = gpu_rows(frame, gpu)
        x = ((part.get_column("time_ns") - t0).cast(pl.Float64) / 1e9).to_numpy()
        for ax, (col, _label) in zip(axes[:, 0], _PANELS, strict=True):
            s = part.get_column(col)
            if s.null_count() == s.len():
                continue
            y = s.cast(pl.Float64).fill_null(float("nan")).to_numpy()
            xs, ys = _decimate(x, y)
            ax.plot(xs, ys, linewidth=0.7, label=f"GPU {gpu}")
    throttled = False
    for g in report.gpus:
        for e in g.throttle_episodes:
            throttled = True
            for ax in axes[:, 0]:
                ax.axvspan(e.start, e.end, color=_THROTTLE, alpha=0.15, linewidth=0)
    for ax, (_col, label) in zip(axes[:, 0], _PANELS, strict=True):
        ax.set_ylabel(label)
        ax.grid(True, alpha=0.3)
    axes[0, 0].set_ylim(-2, 102)
    handles, labels = axes[0, 0].get_legend_handles_labels()
    if throttled:
        from matplotlib.patches import Patch

        handles.append(Patch(color=_THROTTLE, alpha=0.15, label="clock throttling under load"))
        labels.append("clock throttling under load")
    if len(report.gpus) > 1 or throttled:
        # one column per ~25 entries: a 64-GPU node still fits the figure's height
        fig.legend(handles, labels, loc="outside right upper", fontsize="small",
                   ncol=max(1, -(-len(handles) // 25)), frameon=False)  # fmt: skip
    axes[-1, 0].set_xlabel("seconds from first sample (shaded: clock throttling under load)")
    fig.suptitle(f"{Path(report.file).name} ({report.source_format})")
    return fig
