"""Kernel figures: the short-kernel Pareto chart and achieved TFLOPS against the chip's peak.

Pareto: the short kernels (under ``--short-kernel-us``) grouped as in the report, largest total
run time first; bars are each group's total kernel time, the line the cumulative share of all
short-kernel time, so "the first five groups are 60 % of it" reads off the chart. Bars of
groups whose launches mostly left the GPU waiting (launch-bound) take the ``launch_overhead``
colour. TFLOPS: per op group with known FLOPs and a known peak, achieved TFLOPS (dark) drawn
over the peak of its dtype (light), with MFU at the bar's end.
"""

from __future__ import annotations

from typing import Any, Final

import numpy as np

from traceforensics.analysis.kernels.results import MfuRow, OpRow, ShortKernelRow
from traceforensics.analysis.pipeline import Analysis
from traceforensics.report.format import fmt_ns
from traceforensics.report.palette import BUSY_COLORS, cause_color
from traceforensics.report.plotkit import (
    NO_GPU,
    legend_below,
    message_figure,
    new_figure,
    short,
    time_unit,
)

PARETO_TITLE: Final = "Short kernels: Pareto of total kernel time"
TFLOPS_TITLE: Final = "Achieved TFLOPS against the chip's peak"
#: Bars shown (the rest still count in the cumulative line's denominator).
TOP: Final = 15
_PEAK_COLOR: Final = "#D9D9D9"


def figure_short_kernels(analysis: Analysis) -> Any:
    """A matplotlib Figure: the short-kernel Pareto chart (bars: total time per kernel group
    in µs or ms; line: cumulative % of all short-kernel time); a text panel when the trace has
    no GPU activity or no short kernels."""
    k = analysis.kernels
    if not analysis.devices:
        return message_figure(PARETO_TITLE, NO_GPU)
    if not k.short_kernels or k.short_kernel_ns <= 0:
        return message_figure(
            PARETO_TITLE, f"no kernels shorter than {k.short_kernel_us:g} µs in this trace"
        )
    rows = sorted(k.short_kernels, key=lambda r: -r.total_ns)[:TOP]
    many = len({(r.rank, r.device) for r in k.short_kernels}) > 1
    scale, unit = time_unit(max(r.total_ns for r in rows))
    fig, axes = new_figure(1, row_in=4.2)
    ax = axes[0][0]
    xs = np.arange(len(rows))
    bound = cause_color("launch_overhead")
    colors = [bound if _launch_bound(r) else BUSY_COLORS["kernel"] for r in rows]
    ax.bar(xs, [r.total_ns / scale for r in rows], color=colors, width=0.75)
    ax.set_ylabel(f"total kernel time ({unit})")
    labels = [_kernel_label(r, many) for r in rows]
    ax.set_xticks(xs, labels, rotation=30, ha="right", fontsize="small")
    cum = np.cumsum([r.total_ns for r in rows]) * 100.0 / k.short_kernel_ns
    twin = ax.twinx()
    twin.plot(xs, cum, color="black", marker="o", ms=3, lw=1.2)
    twin.set_ylim(0, 105)
    twin.set_ylabel("cumulative % of short-kernel time")
    ax.set_xlim(-0.6, len(rows) - 0.4)
    ax.set_title(
        f"{k.short_kernel_count:,} of {k.kernel_count:,} kernels are under "
        f"{k.short_kernel_us:g} µs, {fmt_ns(k.short_kernel_ns)} in all; "
        f"top {len(rows)} groups of {len(k.short_kernels)} kept",
        loc="left",
        fontsize="medium",
    )
    from matplotlib.lines import Line2D
    from matplotlib.patches import Patch

    legend_below(
        fig,
        [
            Patch(color=BUSY_COLORS["kernel"], label="short kernel group (total run time)"),
            Patch(color=bound, label="mostly launch-bound: the GPU waited for each launch"),
            Line2D([], [], color="black", marker="o", ms=3, label="cumulative %"),
        ],
    )
    fig.suptitle(PARETO_TITLE)
    return fig


def _launch_bound(r: ShortKernelRow) -> bool:
    return 2 * r.launch_bound_count >= max(r.count, 1)


def _kernel_label(r: ShortKernelRow, many: bool) -> str:
    where = f"r{r.rank}/g{r.device} " if many else ""
    return f"{where}{short(r.name, 38)} ×{r.count:,}"


def figure_tflops(analysis: Analysis) -> Any:
    """A matplotlib Figure: per op group (largest kernel time first), achieved TFLOPS over the
    dtype's dense peak TFLOPS, MFU % at each bar; the device's MFU over its window in the
    title. A text panel when there is no GPU activity, no op with known FLOPs, or no known
    peak (``--peak-tflops`` sets one)."""
    k = analysis.kernels
    if not analysis.devices:
        return message_figure(TFLOPS_TITLE, NO_GPU)
    known = [o for o in k.ops if o.tflops is not None and o.flops > 0]
    if not known:
        return message_figure(
            TFLOPS_TITLE,
            "no FLOPs known: no kernel's op has shapes and a FLOP model\n"
            "(record with record_shapes=True; docs/kernels.md)",
        )
    rows = sorted((o for o in known if o.peak_tflops), key=lambda o: -o.kernel_ns)[:TOP]
    if not rows:
        names = ", ".join(sorted({d.name or "unnamed" for d in analysis.devices}))
        return message_figure(
            TFLOPS_TITLE, f"no known peak TFLOPS for {names}\n(tf analyze --peak-tflops T sets one)"
        )
    many = len({(o.rank, o.device) for o in rows}) > 1
    fig, axes = new_figure(1, row_in=0.32 * len(rows) + 1.2)
    ax = axes[0][0]
    ys = np.arange(len(rows))[::-1]  # largest kernel time on top
    peaks = [float(o.peak_tflops or 0.0) for o in rows]
    got = [float(o.tflops or 0.0) for o in rows]
    ax.barh(ys, peaks, color=_PEAK_COLOR, height=0.8)
    ax.barh(ys, got, color=BUSY_COLORS["kernel"], height=0.5)
    # a suspect figure (above the peak, or against a guessed peak) stays visible but hatched,
    # so it does not read as a measured one
    bad = [i for i, o in enumerate(rows) if o.suspect]
    ax.barh(ys[bad], [got[i] for i in bad], color="white", hatch="///", edgecolor="#1A1A1A",
            height=0.5, lw=0.6)  # fmt: skip
    for y, o, g in zip(ys, rows, got, strict=True):
        mfu = f"{100 * o.mfu:.1f}% MFU" if o.mfu is not None else ""
        note = " (suspect)" if o.suspect else ""
        ax.text(g, y, f" {mfu}{note}", va="center", fontsize="small")
    ax.set_yticks(ys, [_op_label(o, many) for o in rows], fontsize="small")
    ax.set_xlim(0, max(*peaks, *got) * 1.12)
    ax.set_xlabel("TFLOPS (10¹² floating-point operations per second)")
    ax.set_title(_mfu_title(k.mfu_by_device), loc="left", fontsize="medium")
    from matplotlib.patches import Patch

    handles = [
        Patch(color=BUSY_COLORS["kernel"], label="achieved (FLOPs / kernel time)"),
        Patch(color=_PEAK_COLOR, label="dense peak of the op's dtype"),
    ]
    if bad:
        handles.append(
            Patch(facecolor="white", hatch="///", edgecolor="#1A1A1A", label="suspect figure")
        )
    legend_below(fig, handles)
    fig.suptitle(TFLOPS_TITLE)
    return fig


def _op_label(o: OpRow, many: bool) -> str:
    where = f"r{o.rank}/g{o.device} " if many else ""
    return f"{where}{short(o.op, 36)} {short(o.shapes, 30)} {o.dtype or ''}".rstrip()


def _mfu_title(rows: list[MfuRow]) -> str:
    parts = [
        f"rank {r.rank} GPU {r.device}: {r.tflops:.2f} TFLOPS over its window = "
        f"{100 * r.mfu:.2f}% MFU of a {r.peak_tflops:.4g} TFLOPS peak"
        for r in rows
        if r.tflops is not None and r.mfu is not None and r.peak_tflops
    ][:3]
    return "; ".join(parts) or "device MFU unknown (no FLOPs-known kernel time)"
