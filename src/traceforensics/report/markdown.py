"""Markdown summary for performance tickets: verdict first (a multi-rank job's: the job's, then
the per-rank verdicts grouped, ``job_verdict``), the investigation in the method's order
(``method_text``), the findings, then the figures (when the run wrote them) and the evidence
tables."""

from __future__ import annotations

from collections.abc import Sequence

from traceforensics._version import __version__
from traceforensics.analysis.host_steps import HostBreakdown
from traceforensics.analysis.pipeline import Analysis
from traceforensics.report.format import fmt_ns, fmt_pct, truncate
from traceforensics.report.gaps_text import phase_cell
from traceforensics.report.job_verdict import is_job, job_verdict, rank_groups
from traceforensics.report.memory_text import memory_markdown_lines
from traceforensics.report.method_text import method_markdown, no_gpu_method
from traceforensics.report.serving_text import serving_markdown
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
    device_verdict,
    host_heading,
    host_phase_rows,
    host_step_rows,
    no_gpu_verdict,
    verdict_text,
)


def table(header: list[str], rows: list[list[str]], empty: str | None = None) -> list[str]:
    """A table; ``empty`` (a ``tables.EMPTY`` sentence) instead when there are no rows."""
    if not rows and empty is not None:
        return [empty]
    out = ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
    out += ["| " + " | ".join(cell(c) for c in r) + " |" for r in rows]
    return out


def cell(text: str) -> str:
    """A table cell: pipes escaped and line breaks flattened, so a trace's names (which can
    hold ``|`` or newlines) never break the table."""
    return " ".join(text.split("\n")).replace("\r", " ").replace("|", "\\|")


def render_markdown(
    analysis: Analysis,
    top: int = 5,
    command: str | None = None,
    figures: Sequence[tuple[str, str]] = (),
) -> str:
    """The ticket-ready summary of one analysis (``command``: the command line that made it;
    ``figures``: ``(caption, link)`` of images written beside the file, linked by relative
    path so GitHub and GitLab show them)."""
    meta = analysis.session.meta
    lines = ["# traceforensics report", ""]
    lines.append(f"- tool: traceforensics {__version__}")
    if command:
        lines.append(f"- command: `{command}`")
    lines += [f"- input: `{i.path}` ({i.format}, rank {i.rank})" for i in meta.inputs]
    opts = analysis.options
    part = ", ".join(
        f"{k} {v}" for k, v in vars(opts.range).items() if v is not None
    )  # the part of the trace analysed, when not all of it
    span = "the whole trace per rank" if opts.idle.window == "trace" else "first to last GPU work"
    lines.append(
        f"- window: `{opts.idle.window}` ({span})" + (f"; analysed part: {part}" if part else "")
    )
    lines += [f"- warning: {w}" for w in analysis.warnings]
    if not analysis.devices:
        lines += ["", "## Verdict", "", no_gpu_verdict(analysis.diagnostics, _code)]
        if analysis.host is not None:
            lines += ["", "## Host time per step", "", *_host_lines(analysis.host)]
        lines += ["", no_gpu_method()]  # the investigation's one line
        return "\n".join(lines) + "\n"
    lines += ["", "## Verdict", "", *_verdict_lines(analysis)]
    lines += ["", *method_markdown(analysis)]
    lines += ["", f"## Findings (top {top}, largest time to give back first)", ""]
    lines += _findings_table(analysis, top)
    if figures:
        lines += ["", "## Figures"]
        for caption, path in figures:
            lines += ["", f"![{_alt(caption)}]({_link(path)})"]
    serving = serving_markdown(analysis)
    lines += ["", *serving[:-1]] if serving else []  # (its own trailing blank line left out)
    text, rank_rows = rank_table(analysis.ranks)
    if rank_rows:
        header = [h.replace("rank/GPU", "rank:GPU") for h in RANK_HEADER]
        cells = [[cell(str(c)) for c in rank_cells(r, ":")] for r in rank_rows]
        lines += ["", "## Ranks", "", *(f"- {cell(t)}" for t in text), "", *table(header, cells)]
    lines += ["", "## Devices", "", *_device_table(analysis)]
    lines += ["", "### Busy time by kind and copies by direction", "", *_busy_table(analysis)]
    lines += ["", "## Idle time by cause", "", *_cause_table(analysis)]
    lines += ["", f"## Largest gaps (top {top})", "", *_gap_table(analysis, top)]
    if analysis.idle.steps:
        lines += ["", "## Steps", "", *_step_table(analysis)]
    memory = memory_markdown_lines(analysis)
    lines += ["", *memory[:-1]] if memory else []  # (its own trailing blank line left out)
    if analysis.kernels.short_kernels:
        lines += ["", f"## Short kernels worth fusing (top {top})", ""]
        lines += _short_kernel_table(analysis, top)
        lines += [
            "",
            "*recoverable*: the idle time around these launches that fusing or a graph would "
            "remove (launch-bound gaps plus per-launch overhead), not the kernels' own run time, "
            "so it can exceed their total (docs/kernels.md).",
        ]
    if analysis.kernels.mfu_by_device:
        lines += ["", "## Model FLOPs utilization", "", *_mfu_table(analysis)]
    return "\n".join(lines) + "\n"


def _alt(text: str) -> str:
    """Image alt text without the brackets that would end it."""
    return text.replace("[", "(").replace("]", ")")


def _link(path: str) -> str:
    """A relative link with the characters Markdown link syntax reserves percent-encoded."""
    from urllib.parse import quote

    return quote(path.replace("\\", "/"), safe="/._-~")


def _sentence(text: str) -> str:
    """``text`` capitalised and ended with a full stop."""
    return f"{text[:1].upper()}{text[1:].rstrip('.')}."


def _job_lines(analysis: Analysis) -> list[str]:
    """A multi-rank job: its verdict (one paragraph), then the per-rank verdicts grouped."""
    job = job_verdict(analysis, code=_code, label=lambda t: f"**{_sentence(t)[:-1]}**")
    out = [" ".join(_sentence(t) for t in (job.head, job.change) if t)]
    out += ["", _sentence(job.steps)] if job.steps else []
    out += ["", "Per rank:", ""]
    for g in rank_groups(analysis, code=_code, label=lambda t: f"**{t}**"):
        out.append(f"- {_sentence(g.head)}" + (f" {_sentence(g.change)}" if g.change else ""))
    return out


def _verdict_lines(analysis: Analysis) -> list[str]:
    if is_job(analysis):
        return _job_lines(analysis)
    out: list[str] = []
    for d in analysis.devices:
        head, change = verdict_text(
            device_verdict(d, analysis.findings_of(d.rank, d.device)),
            code=lambda c: f"`{c}`",
            label=lambda t: f"**{t}**",
        )
        # a sentence each: the headline, then the change (capitalised)
        out.append(
            f"- {head.rstrip('.')}." + (f" {change[:1].upper()}{change[1:]}." if change else "")
        )
    return out


def _findings_table(analysis: Analysis, top: int) -> list[str]:
    p = analysis.program
    head = [f"Program: {p.framework} on {p.vendor} ({p.evidence}).", ""]
    return head + table(
        ["#", "category", "rank/GPU", "gives back", "confidence", "what", "change"],
        [
            [str(r.number), f"`{r.category}`", r.where(), r.gives_back, r.confidence,
             truncate(r.title, 160), r.remedy]
            for r in finding_rows(analysis, top)
        ],
        EMPTY["findings"],
    )  # fmt: skip


def _busy_table(analysis: Analysis) -> list[str]:
    rows: list[list[str]] = []
    for d in device_rows(analysis):
        rows.append([d.where(), "busy by kind", d.busy_by_kind or "-", "", ""])
        for t in d.transfers:
            paged = f"{t.pageable_count} of {t.count} pageable" if t.pageable_count else ""
            size = f"{t.bytes} in {t.time} (x{t.count})"
            rows.append([d.where(), t.direction, size, t.bandwidth, paged])
        if d.exposed_copies is not None:
            rows.append([d.where(), "copies not overlapped", d.exposed_copies, "", ""])
    return table(["rank/GPU", "what", "amount", "bandwidth", "note"], rows)


def _device_table(analysis: Analysis) -> list[str]:
    return table(
        [
            "rank",
            "GPU",
            "name",
            "window",
            "busy",
            "idle",
            "exposed comm",
            "pattern",
            "kernels",
            "memcpy",
            "memset",
        ],
        [
            [
                str(d.rank),
                str(d.device),
                d.name,
                d.window,
                d.busy,
                d.idle,
                d.exposed_comm if d.has_comm else "-",
                f"`{d.pattern}`" if d.pattern is not None else "-",
                str(d.kernels),
                str(d.memcpy),
                str(d.memset),
            ]
            for d in device_rows(analysis)
        ],
    )


def _cause_table(analysis: Analysis) -> list[str]:
    rows = [
        [c.where(":"), f"`{c.cause}`", c.time, c.of_idle, c.of_window] for c in cause_rows(analysis)
    ]
    return table(["rank:GPU", "cause", "time", "of idle", "of window"], rows, EMPTY["causes"])


def _gap_table(analysis: Analysis, top: int) -> list[str]:
    return table(
        ["rank:GPU", "length", "causes", "evidence"],
        [
            [
                g.where(":"),
                g.length,
                ", ".join(f"{c} {v}" for c, v in g.causes),
                "; ".join(truncate(e.label, 60) for e in g.evidence),
            ]
            for g in gap_rows(analysis, top)
        ],
        EMPTY["gaps"],
    )


def _step_table(analysis: Analysis) -> list[str]:
    return table(
        ["rank:GPU", "step", "span", "busy", "idle", "exposed comm", "busy by phase"],
        [
            [
                f"{s.rank}:{s.device}",
                s.name,
                fmt_ns(s.dur_ns),
                fmt_ns(s.busy_ns),
                fmt_ns(s.idle_ns),
                fmt_ns(s.exposed_comm_ns),
                phase_cell(s),
            ]
            for s in analysis.idle.steps
        ],
    )


def _short_kernel_table(analysis: Analysis, top: int) -> list[str]:
    return table(
        ["rank:GPU", "kernel", "launching op", "count", "total", "recoverable", "remedy"],
        [
            [r.where(":"), truncate(r.name, 50), r.launching_op or "-", str(r.count), r.total,
             r.recoverable, r.remedy]
            for r in short_kernel_rows(analysis, top)
        ],
    )  # fmt: skip


def _mfu_table(analysis: Analysis) -> list[str]:
    # a suspect MFU (kernels.suspect) is shown as computed, marked `!`, its reason listed once
    rows = analysis.kernels.mfu_by_device
    lines = table(
        ["rank:GPU", "TFLOPS", "peak", "MFU"],
        [
            [
                f"{m.rank}:{m.device}",
                f"{m.tflops:.2f}" if m.tflops is not None else "-",
                f"{m.peak_tflops:.1f}" if m.peak_tflops is not None else "-",
                (fmt_pct(m.mfu) if m.mfu is not None else "-") + ("!" if m.suspect else ""),
            ]
            for m in rows
        ],
    )
    reasons = dict.fromkeys(m.suspect_reason for m in rows if m.suspect and m.suspect_reason)
    # blank line first: a line right under a table would be read as one more row
    return lines + ([""] if reasons else []) + [f"- `!` {r}" for r in reasons]


def _code(text: str) -> str:
    return f"`{text}`"


def _host_lines(host: HostBreakdown) -> list[str]:
    """The host breakdown as lists (a trace without GPU activity: no tables, so the report
    reads the same in any Markdown viewer): phases per step, then the first steps."""
    out = [host_heading(host)]
    rows = host_phase_rows(host)
    if rows:
        out += ["", *(f"- {p}: {t} per step ({share})" for p, t, share in rows)]
    steps = host_step_rows(host)
    if steps:
        out += [
            "",
            "Steps (rank, name, duration: data loading, forward, backward, optimizer, other):",
        ]
        out += [""] + [f"- rank {r[0]} `{cell(r[1])}` {r[2]}: " + ", ".join(r[3:]) for r in steps]
    if len(host.steps) > len(steps):
        out += ["", f"{len(host.steps) - len(steps)} more steps: `tf analyze --json` (`host`)."]
    return out
