"""Terminal report of ``tf diff``: the verdict first, then the tables behind it.

Order: the two runs and how figures are counted, the verdict sentence (then every part that
moved beyond noise, when more than one did), idle time by cause
(largest change first), step time (median, mean, spread), MFU and busy time, the findings that
appeared, disappeared, grew or shrank, the kernels whose time changed most, and the devices
when there are several. Pure formatting: returns the text, prints nothing.
"""

from __future__ import annotations

import textwrap

from traceforensics.compare import Diff
from traceforensics.compare.diff import RunInfo
from traceforensics.report.diff_tables import (
    DEVICE_HEADER,
    FIGURE_HEADER,
    NOISE_LEGEND,
    ChangeRow,
    FigureRow,
    basis_text,
    device_rows,
    figure_tables,
    finding_rows,
    kernel_rows,
    moved_text,
    one_device,
    per_step_unit,
    several_devices,
    steps_text,
)
from traceforensics.report.format import truncate


def run_line(tag: str, run: RunInfo) -> str:
    """``BEFORE: path (kineto, 1 GPU, 6 steps)``."""
    gpus = f"{run.devices} GPU" + ("s" if run.devices != 1 else "")
    return f"{tag}: {run.label} ({run.source_format or '?'}, {gpus}, {steps_text(run)})"


def _columns(rows: list[list[str]], right: set[int]) -> list[str]:
    """Aligned columns, each as wide as its widest cell; ``right``: right-aligned ones."""
    widths = [max(len(r[i]) for r in rows) for i in range(len(rows[0]))]
    out = []
    for r in rows:
        cells = [
            (c.rjust(w) if i in right else c.ljust(w))
            for i, (c, w) in enumerate(zip(r, widths, strict=True))
        ]
        out.append("  " + "  ".join(cells).rstrip())
    return out


def figure_table(rows: list[FigureRow]) -> list[str]:
    """Aligned columns: label, before, after, change, change %, noise."""
    return _columns([FIGURE_HEADER] + [r.cells() for r in rows], right={1, 2, 3, 4})


def finding_lines(rows: list[ChangeRow], where: bool = True) -> list[str]:
    """One line per finding change: device (``where``: several devices), category,
    before → after, change, what happened."""
    return [
        f"  {_where(r, where)}{r.what:<22} {r.before:>10} → {r.after:<10} {r.delta:<24} "
        f"{r.note}".rstrip()
        for r in rows
    ]


def kernel_lines(rows: list[ChangeRow], width: int, where: bool = True) -> list[str]:
    """Two lines per kernel: the figures, then the name (cut to the width)."""
    out = []
    for r in rows:
        out.append(
            f"  {_where(r, where)}{r.before:>10} → {r.after:<10} {r.delta:<24} {r.note}".rstrip()
        )
        out.append("    " + truncate(r.what, max(width - 4, 30)))
    return out


def _where(row: ChangeRow, shown: bool) -> str:
    return f"{row.where:<5} " if shown else ""


def render_diff_text(diff: Diff, width: int = 100) -> str:
    """The whole terminal report (module doc)."""
    job = diff.job
    lines = [
        "traceforensics diff",
        "  " + run_line("BEFORE", diff.before),
        "  " + run_line("AFTER ", diff.after),
        f"  time figures {basis_text(job)}; step time: the steps' durations; MFU: over the "
        "GPU-active span",
    ]
    lines += [f"  warning: {w}" for w in diff.warnings]
    lines += ["", "== Verdict ==", *textwrap.wrap(diff.verdict.text, width)]
    moved = moved_text(diff)
    if moved is not None:
        lines += textwrap.wrap(moved, width, initial_indent="  ", subsequent_indent="    ")
    for t in figure_tables(job):
        scope = f"{t.scope}, {t.order}" if t.order else t.scope
        lines += ["", f"== {t.title} ({scope}) ==", *figure_table(t.rows)]
    lines += ["", f"  {NOISE_LEGEND}"]
    unit, where = per_step_unit(job), not one_device(diff)
    findings = finding_rows(diff)
    lines += ["", f"== Findings (time to give back, {unit}) =="]
    lines += finding_lines(findings, where) if findings else ["  no findings on either side"]
    kernels = kernel_rows(diff)
    if kernels:
        lines += ["", f"== Kernels whose time changed most ({unit}) =="]
        lines += kernel_lines(kernels, width, where)
    if several_devices(diff):
        lines += ["", "== Devices ==", *_columns([DEVICE_HEADER, *device_rows(diff)], {2, 3})]
        lines += [
            f"  only in {u['side'].upper()}: rank {u['rank']} GPU {u['device']}"
            for u in diff.unmatched
        ]
    return "\n".join(lines) + "\n"
