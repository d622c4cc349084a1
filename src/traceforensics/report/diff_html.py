"""One self-contained HTML page of ``tf diff`` (``--report FILE.html``).

The verdict first, then the same tables as the terminal (``diff_tables``). Styles and tables
are the analysis report's (``report.html``): nothing is fetched to view it, and every string
from the documents (paths, kernel names, titles) goes through ``html.escape``.
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
from traceforensics.report.html import escape, page, table

_DIFF_STYLE = (
    ".worked{border-color:#2a9d3a;background:#eefaf0}"
    ".worse{border-color:#c0392b;background:#fdeeee}"
)


def _run(tag: str, run: RunInfo) -> str:
    what = f"{escape(run.source_format or '?')}, {steps_text(run)}"
    return f"<li>{tag}: <code>{escape(run.label)}</code> ({what})</li>"


def render_diff_html(diff: Diff, command: str | None = None) -> str:
    """The diff as one HTML document (module doc)."""
    job = diff.job
    unit = per_step_unit(job)
    parts = [f"<h1>traceforensics diff</h1><div class='meta'><p>traceforensics {__version__}"]
    if command:
        parts.append(f" · <code>{escape(command)}</code>")
    parts += ["</p><ul>", _run("before", diff.before), _run("after", diff.after)]
    parts.append(f"<li>time figures {escape(basis_text(job))}; MFU over the GPU-active span</li>")
    parts += [f"<li>warning: {escape(w)}</li>" for w in diff.warnings]
    parts.append("</ul></div><h2>Verdict</h2>")
    outcome = escape(diff.verdict.outcome)
    parts.append(f"<div class='verdict {outcome}'><p><b>{escape(diff.verdict.text)}</b></p></div>")
    for t in figure_tables(job):
        parts.append(f"<h2>{t.title} ({t.scope})</h2>")
        parts.append(table(FIGURE_HEADER, [r.cells() for r in t.rows], nowrap=6))
    parts.append(f"<p class='meta'>noise: {escape(NOISE_LEGEND)}.</p>")
    parts.append(f"<h2>Findings (time to give back, {unit})</h2>")
    cut = 1 if one_device(diff) else 0  # one device: no rank/GPU column
    parts.append(
        table(
            CHANGE_HEADER[cut:],
            [r.cells()[cut:] for r in finding_rows(diff)],
            nowrap=2 - cut,
            empty="No findings on either side.",
        )
    )
    kernels = kernel_rows(diff)
    if kernels:
        parts.append(f"<h2>Kernels whose time changed most ({unit})</h2>")
        # figures first (they never wrap), the long kernel name last
        header = [*CHANGE_HEADER[:1], "before", "after", "change", "note", "kernel"][cut:]
        rows = [[r.where, r.before, r.after, r.delta, r.note, r.what][cut:] for r in kernels]
        parts.append(table(header, rows, nowrap=4 - cut))
    if several_devices(diff):
        parts.append("<h2>Devices</h2>" + table(DEVICE_HEADER, device_rows(diff), nowrap=1))
        parts += [
            f"<p>only in {u['side'].upper()}: rank {u['rank']} GPU {u['device']}</p>"
            for u in diff.unmatched
        ]
    return page(parts, "traceforensics diff", _DIFF_STYLE)
