"""Markdown report of ``tf diff`` (``--report FILE.md``): the verdict first, then the tables.

The same rows as the terminal (``diff_tables``); tables and cell escaping are the analysis
report's (``report.markdown``), so a kernel name holding ``|`` never breaks a table.
"""

from __future__ import annotations

from traceforensics._version import __version__
from traceforensics.compare import Diff
from traceforensics.compare.diff import RunInfo
from traceforensics.report.diff_tables import (
    CHANGE_HEADER,
    DEVICE_HEADER,
    FIGURE_HEADER,
    NOISE_LEGEND,
    basis_text,
    device_rows,
    figure_tables,
    finding_rows,
    kernel_rows,
    one_device,
    per_step_unit,
    several_devices,
    steps_text,
)
from traceforensics.report.format import truncate
from traceforensics.report.markdown import cell, table


def _run(tag: str, run: RunInfo) -> str:
    inputs = ", ".join(f"`{cell(str(i.get('path')))}`" for i in run.inputs)
    label = cell(run.label)
    return f"- {tag}: `{label}` ({run.source_format or '?'}, {steps_text(run)})" + (
        f"; inputs {inputs}" if inputs and run.label not in inputs else ""
    )


def render_diff_markdown(diff: Diff, command: str | None = None) -> str:
    """The diff as a Markdown document for a ticket or a pull request."""
    job = diff.job
    unit = per_step_unit(job)
    lines = ["# traceforensics diff", "", f"- tool: traceforensics {__version__}"]
    if command:
        lines.append(f"- command: `{cell(command)}`")
    lines += [_run("before", diff.before), _run("after", diff.after)]
    lines.append(f"- time figures {basis_text(job)}; MFU over the GPU-active span")
    lines += [f"- warning: {cell(w)}" for w in diff.warnings]
    lines += ["", "## Verdict", "", f"**{cell(diff.verdict.text)}**"]
    for t in figure_tables(job):
        lines += ["", f"## {t.title} ({t.scope})", ""]
        lines += table(FIGURE_HEADER, [r.cells() for r in t.rows])
    lines += ["", f"*noise*: {NOISE_LEGEND}."]
    lines += ["", f"## Findings (time to give back, {unit})", ""]
    cut = 1 if one_device(diff) else 0  # one device: no rank/GPU column
    lines += table(
        CHANGE_HEADER[cut:],
        [[r.where, f"`{r.what}`", *r.cells()[2:]][cut:] for r in finding_rows(diff)],
        "No findings on either side.",
    )
    kernels = kernel_rows(diff)
    if kernels:
        lines += ["", f"## Kernels whose time changed most ({unit})", ""]
        lines += table(
            CHANGE_HEADER[cut:],
            [[r.where, truncate(r.what, 90), *r.cells()[2:]][cut:] for r in kernels],
        )
    if several_devices(diff):
        lines += ["", "## Devices", "", *table(DEVICE_HEADER, device_rows(diff))]
        lines += [
            f"- only in {u['side'].upper()}: rank {u['rank']} GPU {u['device']}"
            for u in diff.unmatched
        ]
    return "\n".join(lines) + "\n"
