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
    busy_rows,
    cause_rows,
    device_rows,
    finding_rows,
    kernel_rows,
    one_device,
    per_step_unit,
    step_rows,
)
from traceforensics.report.html import _STYLE, _e, _table

_DIFF_STYLE = (
    ".worked{border-color:#2a9d3a;background:#eefaf0}"
    ".worse{border-color:#c0392b;background:#fdeeee}"
)


def _run(tag: str, run: RunInfo) -> str:
    steps = f"{run.steps} step{'s' if run.steps != 1 else ''}" if run.steps else "no steps"
    return f"<li>{tag}: <code>{_e(run.label)}</code> ({_e(run.source_format or '?')}, {steps})</li>"


def render_diff_html(diff: Diff, command: str | None = None) -> str:
    """The diff as one HTML document (module doc)."""
    job = diff.job
    unit = per_step_unit(job)
    parts = [f"<h1>traceforensics diff</h1><div class='meta'><p>traceforensics {__version__}"]
    if command:
        parts.append(f" · <code>{_e(command)}</code>")
    parts += ["</p><ul>", _run("before", diff.before), _run("after", diff.after)]
    parts.append(f"<li>time figures {_e(basis_text(job))}; MFU over the GPU-active span</li>")
    parts += [f"<li>warning: {_e(w)}</li>" for w in diff.warnings]
    parts.append("</ul></div><h2>Verdict</h2>")
    outcome = _e(diff.verdict.outcome)
    parts.append(f"<div class='verdict {outcome}'><p><b>{_e(diff.verdict.text)}</b></p></div>")
    parts.append(f"<h2>Idle time by cause ({unit})</h2>")
    parts.append(_table(FIGURE_HEADER, [r.cells() for r in cause_rows(job)], nowrap=6))
    if job.steps_before and job.steps_after:
        parts.append(f"<h2>Step time ({job.steps_before} → {job.steps_after} steps)</h2>")
        parts.append(_table(FIGURE_HEADER, [r.cells() for r in step_rows(job)], nowrap=6))
    busy = busy_rows(job)
    if busy:
        parts.append(f"<h2>MFU and busy time ({unit})</h2>")
        parts.append(_table(FIGURE_HEADER, [r.cells() for r in busy], nowrap=6))
    parts.append(f"<p class='meta'>noise: {_e(NOISE_LEGEND)}.</p>")
    parts.append(f"<h2>Findings (time to give back, {unit})</h2>")
    cut = 1 if one_device(diff) else 0  # one device: no rank/GPU column
    parts.append(
        _table(
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
        parts.append(_table(header, rows, nowrap=4 - cut))
    if len(diff.devices) > 1 or diff.unmatched:
        parts.append("<h2>Devices</h2>" + _table(DEVICE_HEADER, device_rows(diff), nowrap=1))
        parts += [
            f"<p>only in {u['side'].upper()}: rank {u['rank']} GPU {u['device']}</p>"
            for u in diff.unmatched
        ]
    return _page(parts)


def _page(parts: list[str]) -> str:
    body = "".join(parts)
    return (
        "<!DOCTYPE html><html lang='en'><head><meta charset='utf-8'>"
        "<meta name='viewport' content='width=device-width, initial-scale=1'>"
        f"<title>traceforensics diff</title><style>{_STYLE}{_DIFF_STYLE}</style></head>"
        f"<body>{body}</body></html>\n"
    )
