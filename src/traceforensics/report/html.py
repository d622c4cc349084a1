"""One self-contained HTML report for a ticket or a browser (``tf analyze --report r.html``).

The verdict, the investigation in the method's order (``method_text``) and the ranked findings
first, then the figures and the evidence tables. A multi-rank job's verdict is the job's
(``job_verdict``: the straggler, its cause, the others' wait), then the per-rank verdicts
grouped, each GPU's own collapsed; its figures open with the timeline, drawn on the job clock.
Nothing is fetched to view it: styles are inline and the figures (``plots.figure_pngs``: those
with something to draw) are embedded PNG data URIs (when matplotlib is installed). Each cause in
the idle table carries the colour square it has in every figure (``palette``). Every string that
comes from the trace (kernel, op and range names, paths, evidence) goes through ``html.escape``,
so a name like ``<script>`` is shown, never run.
"""

from __future__ import annotations

import base64
import html
from collections.abc import Iterable, Sequence

from traceforensics._version import __version__
from traceforensics.analysis.host_steps import PHASES, HostBreakdown
from traceforensics.analysis.pipeline import Analysis
from traceforensics.report.job_verdict import is_job, job_verdict, rank_groups
from traceforensics.report.memory_text import memory_html
from traceforensics.report.method_text import METHOD_STYLE, method_html, no_gpu_method
from traceforensics.report.palette import swatch_html
from traceforensics.report.serving_text import serving_html
from traceforensics.report.tables import (
    EMPTY,
    RANK_HEADER,
    cause_rows,
    device_rows,
    finding_rows,
    gap_rows,
    rank_cells,
    rank_table,
    short_kernel_rows,
)
from traceforensics.report.verdict import (
    PHASE_LABELS,
    device_verdict,
    host_heading,
    host_phase_rows,
    host_step_rows,
    no_gpu_verdict,
    verdict_text,
)

STYLE = (
    """
body{font:14px/1.45 system-ui,sans-serif;margin:2em auto;max-width:1200px;color:#222}
h1{font-size:1.5em}h2{font-size:1.2em;margin-top:1.6em;border-bottom:1px solid #ddd}
table{border-collapse:collapse;margin:.5em 0;width:100%}
td,th{border:1px solid #ddd;padding:3px 6px;text-align:left;vertical-align:top}
td{overflow-wrap:anywhere}
th{background:#f3f3f3}code{background:#f5f5f5;padding:0 3px}.n{white-space:nowrap}
.verdict{background:#fff8e1;border-left:4px solid #f0a000;padding:.6em 1em}
.meta{color:#555}img{max-width:100%}
ul.ranks{background:#fafafa;border-left:4px solid #bbb;padding:.5em 1em .5em 2em}
ul.ranks li{margin:.3em 0}summary{cursor:pointer;color:#555;margin:.4em 0}
.sw{display:inline-block;width:.9em;height:.9em;margin-right:.4em;vertical-align:-.1em;
border:1px solid #555}
"""
    + METHOD_STYLE
)


def escape(text: object) -> str:
    return html.escape(str(text), quote=True)


class _Markup(str):
    """A table cell that is already HTML, built here from escaped parts (never a string from
    the trace as it is)."""


def table(
    header: Iterable[str],
    rows: Sequence[Iterable[object]],
    nowrap: int = 0,
    empty: str | None = None,
) -> str:
    """A table; the first ``nowrap`` columns (ids, figures) never wrap, the rest may break
    long names anywhere so the table fits the page. ``empty`` (a ``tables.EMPTY`` sentence)
    is written instead of a table with no rows."""
    if not rows and empty is not None:
        return f"<p>{escape(empty)}</p>"

    def cell(tag: str, i: int, c: object) -> str:
        cls = " class='n'" if i < nowrap else ""
        body = c if isinstance(c, _Markup) else escape(c)
        return f"<{tag}{cls}>{body}</{tag}>"

    head = "".join(cell("th", i, h) for i, h in enumerate(header))
    body = "".join(
        "<tr>" + "".join(cell("td", i, c) for i, c in enumerate(r)) + "</tr>" for r in rows
    )
    return f"<table><tr>{head}</tr>{body}</table>"


def render_html(analysis: Analysis, command: str | None = None, top: int = 10) -> str:
    """The whole report as one HTML document (see the module docstring)."""
    meta = analysis.session.meta
    parts = [f"<h1>traceforensics report</h1><div class='meta'><p>traceforensics {__version__}"]
    if command:
        parts.append(f" · <code>{escape(command)}</code>")
    parts.append("</p><ul>")
    parts += [
        f"<li>input: <code>{escape(i.path)}</code> ({escape(i.format)})</li>" for i in meta.inputs
    ]
    parts.append(f"<li>window: <code>{escape(analysis.options.idle.window)}</code></li>")
    parts += [f"<li>warning: {escape(w)}</li>" for w in analysis.warnings]
    parts.append("</ul></div>")
    if not analysis.devices:
        parts.append(f"<h2>Verdict</h2><p>{escape(no_gpu_verdict(analysis.diagnostics))}</p>")
        if analysis.host is not None:
            parts += _host(analysis.host)
        parts.append(f"<p>{escape(no_gpu_method())}</p>")  # the investigation's one line
        return page(parts)
    parts.append("<h2>Verdict</h2>")
    parts += _job_verdict(analysis) if is_job(analysis) else _device_verdicts(analysis)
    parts += method_html(analysis)
    p = analysis.program
    parts.append(
        f"<h2>Findings (top {top})</h2><p>Program: {escape(p.framework)} on {escape(p.vendor)}"
    )
    parts.append(f" ({escape(p.evidence)}).</p>")
    parts.append(_findings(analysis, top))
    parts.append(serving_html(analysis))  # "" when the trace is no server
    parts.append(memory_html(analysis))  # "" without memory events
    parts += _figure(analysis)
    parts += _evidence_tables(analysis, top)
    return page(parts)


def notebook_html(analysis: Analysis, top: int = 10) -> str:
    """What a notebook shows for an ``Analysis`` (its HTML display): the verdict and the
    ranked findings, as a fragment (no page styles: the notebook's own apply). The figures
    are the ``report.plots`` functions, each shown by itself."""
    if not analysis.devices:
        parts = [f"<p><b>Verdict:</b> {escape(no_gpu_verdict(analysis.diagnostics))}</p>"]
        return "".join(parts + (_host(analysis.host) if analysis.host is not None else []))
    parts = ["<h3>Verdict</h3>"]
    parts += _job_verdict(analysis) if is_job(analysis) else _device_verdicts(analysis)
    parts += [f"<h3>Findings (top {top})</h3>", _findings(analysis, top)]
    parts += [f"<p>warning: {escape(w)}</p>" for w in analysis.warnings]
    return "".join(parts)


def _device_verdicts(analysis: Analysis) -> list[str]:
    """One verdict box per device."""
    out = []
    for d in analysis.devices:
        head, change = verdict_text(device_verdict(d, analysis.findings_of(d.rank, d.device)))
        out.append(f"<div class='verdict'><p><b>{escape(head)}</b></p>")
        out.append(f"<p>{escape(change)}</p></div>" if change else "</div>")
    return out


def _job_verdict(analysis: Analysis) -> list[str]:
    """A multi-rank job: the job's verdict box (straggler, cause, the others' wait, the change,
    per step), the per-rank verdicts grouped, and each device's own verdict collapsed."""
    job = job_verdict(analysis)
    out = [f"<div class='verdict'><p><b>{escape(_cap(job.head))}.</b></p>"]
    out += [f"<p>{escape(_cap(t))}.</p>" for t in (job.change, job.steps) if t]
    out.append("</div><h3>Per rank</h3><ul class='ranks'>")
    for g in rank_groups(analysis):
        change = f"<br>{escape(g.change)}" if g.change else ""
        out.append(f"<li><b>{escape(g.head)}</b>{change}</li>")
    out.append(f"</ul><details><summary>Each GPU's own verdict ({len(analysis.devices)})</summary>")
    out += _device_verdicts(analysis)
    out.append("</details>")
    return out


def _cap(text: str) -> str:
    return text[:1].upper() + text[1:].rstrip(".")


def _host(host: HostBreakdown) -> list[str]:
    """The host time per step of a trace without GPU activity: phases, then the first steps."""
    out = ["<h2>Host time per step</h2>", f"<p>{escape(host_heading(host))}</p>"]
    rows = host_phase_rows(host)
    if rows:
        out.append(table(["phase", "per step", "share"], [list(r) for r in rows], nowrap=3))
    steps = host_step_rows(host)
    if steps:
        labels = [PHASE_LABELS[p] for p in PHASES]
        out.append(table(["rank", "step", "duration", *labels], [list(r) for r in steps], nowrap=1))
    if len(host.steps) > len(steps):
        more = len(host.steps) - len(steps)
        out.append(f"<p>{more} more steps: <code>tf analyze --json</code> (host).</p>")
    return out


def _findings(analysis: Analysis, top: int) -> str:
    return table(
        ["#", "category", "rank/GPU", "gives back", "confidence", "what", "change", "evidence"],
        [
            [r.number, r.category, r.where(), r.gives_back, r.confidence, r.title, r.remedy,
             r.evidence]
            for r in finding_rows(analysis, top)
        ],
        nowrap=5,
        empty=EMPTY["findings"],
    )  # fmt: skip


def _figure(analysis: Analysis) -> list[str]:
    """The figures as embedded PNGs; when they cannot be drawn (matplotlib missing, a
    drawing error), the section says why instead of silently leaving them out (the tables
    still tell it all)."""
    try:
        from traceforensics.report.plots import figure_pngs

        pngs = figure_pngs(analysis)
    except Exception as exc:
        reason = " ".join(f"{type(exc).__name__}: {exc}".split())[:300]
        return ["<h2>Figures</h2>", f"<p>The figures could not be drawn ({escape(reason)}).</p>"]
    out = ["<h2>Figures</h2>"]
    for name, caption, png in pngs:
        data = base64.b64encode(png).decode("ascii")
        out.append(f"<h3 id='fig-{escape(name)}'>{escape(caption)}</h3>")
        out.append(f"<img alt='{escape(caption)}' src='data:image/png;base64,{data}'>")
    return out


def _evidence_tables(analysis: Analysis, top: int) -> list[str]:
    devices = device_rows(analysis)
    out = []
    text, rank_rows = rank_table(analysis.ranks)
    if rank_rows:
        out.append("<h2>Ranks</h2>" + "".join(f"<p>{escape(t)}</p>" for t in text))
        out.append(table(RANK_HEADER, [rank_cells(r) for r in rank_rows]))
    out.append("<h2>Devices</h2>")
    out.append(
        table(
            ["rank/GPU", "name", "window", "busy", "idle", "busy by kind", "exposed comm"],
            [
                [d.where(), d.name, d.window, d.busy, d.idle, d.busy_by_kind, d.exposed_comm]
                for d in devices
            ],
        )
    )
    copies = [
        [t.where(), t.direction, t.count, t.bytes, t.time, t.bandwidth, t.pageable_count]
        for d in devices
        for t in d.transfers
    ]
    if copies:
        out.append(
            table(["rank/GPU", "copies", "count", "bytes", "time", "bandwidth", "pageable"], copies)
        )
    out.append("<h2>Idle time by cause</h2>")
    out.append(
        table(
            ["rank/GPU", "cause", "time", "of idle", "of window"],
            [
                [c.where(), _Markup(swatch_html(c.cause) + escape(c.cause)), c.time, c.of_idle,
                 c.of_window]
                for c in cause_rows(analysis)
            ],
            empty=EMPTY["causes"],
        )
    )  # fmt: skip
    out.append(f"<h2>Largest idle gaps (top {top})</h2>")
    out.append(
        table(
            ["rank/GPU", "length", "causes", "evidence"],
            [
                [g.where(), g.length,
                 _Markup(", ".join(f"<span class='n'>{swatch_html(c)}{escape(c)} {v}</span>"
                                   for c, v in g.causes)),
                 "; ".join(f"{e.label}: {e.detail}" for e in g.evidence)]
                for g in gap_rows(analysis, top)
            ],
            empty=EMPTY["gaps"],
        )
    )  # fmt: skip
    if analysis.kernels.short_kernels:
        out.append(f"<h2>Short kernels worth fusing (top {top})</h2>")
        out.append(
            table(
                ["rank/GPU", "kernel", "launching op", "count", "total", "recoverable", "remedy"],
                [
                    [r.where(), r.name, r.launching_op, r.count, r.total, r.recoverable, r.remedy]
                    for r in short_kernel_rows(analysis, top)
                ],
            )
        )
    return out


def page(parts: list[str], title: str = "traceforensics report", style: str = "") -> str:
    """One self-contained HTML page of ``parts`` with the reports' style (plus ``style``)."""
    body = "".join(parts)
    return (
        "<!DOCTYPE html><html lang='en'><head><meta charset='utf-8'>"
        "<meta name='viewport' content='width=device-width, initial-scale=1'>"
        f"<title>{title}</title><style>{STYLE}{style}</style></head>"
        f"<body>{body}</body></html>\n"
    )
