"""The "Serving" section of the reports (issue 48): the engine, its iterations by phase and
graph replay, and the host gaps between them by class. ``serving_lines`` (terminal),
``serving_markdown`` (Markdown lines) and ``serving_html`` (an HTML fragment) say the same;
each is empty when the trace is not a server's (``analysis.serving`` is None)."""

from __future__ import annotations

import html
from dataclasses import dataclass
from statistics import median
from typing import Final

from traceforensics.analysis.pipeline import Analysis
from traceforensics.analysis.serving import Iteration, ServingAnalysis
from traceforensics.analysis.serving.engines import GAP_CLASS_IDS
from traceforensics.analysis.serving.results import PHASES
from traceforensics.report.format import fmt_ns, fmt_pct

TITLE: Final = "Serving"
HEADERS: Final = (
    "phase",
    "graph",
    "iterations",
    "batch sizes",
    "median dur",
    "median busy",
    "median host gap",
    "host gap total",
)


@dataclass(frozen=True)
class GroupRow:
    """One (phase, graph) group of iterations: durations in ns (medians and a total)."""

    phase: str
    graph: bool
    count: int
    batch_sizes: str
    median_dur_ns: int
    median_busy_ns: int
    median_gap_ns: int
    gap_ns: int

    def cells(self) -> list[str]:
        return [
            self.phase,
            "graph" if self.graph else "eager",
            str(self.count),
            self.batch_sizes,
            fmt_ns(self.median_dur_ns),
            fmt_ns(self.median_busy_ns),
            fmt_ns(self.median_gap_ns),
            fmt_ns(self.gap_ns),
        ]


def _sizes(its: list[Iteration]) -> str:
    sizes = sorted({i.batch_size for i in its if i.batch_size is not None})
    if not sizes:
        return "-"
    return ", ".join(map(str, sizes[:6])) + (f" (+{len(sizes) - 6})" if len(sizes) > 6 else "")


def group_rows(serving: ServingAnalysis) -> list[GroupRow]:
    """The iterations grouped by phase (``PHASES`` order), graph replays first."""
    out: list[GroupRow] = []
    for phase in PHASES:
        for graph in (True, False):
            its = [i for i in serving.iterations if i.phase == phase and i.graph == graph]
            if not its:
                continue
            out.append(
                GroupRow(
                    phase,
                    graph,
                    len(its),
                    _sizes(its),
                    int(median(i.dur_ns for i in its)),
                    int(median(i.busy_ns for i in its)),
                    int(median(i.host_gap_ns for i in its)),
                    sum(i.host_gap_ns for i in its),
                )
            )
    return out


def summary_lines(serving: ServingAnalysis) -> list[str]:
    """Plain sentences: what was recognised, the iterations, the host gaps and their split."""
    s = serving.summary()
    by = ", ".join(f"{n} {p}" for p, n in s["by_phase"].items() if n)
    how = "forced (--workload serving)" if serving.forced else "recognised"
    lines = [
        f"engine {serving.engine} ({how}): {s['iterations']} "
        f"iteration{'s' * (s['iterations'] != 1)} ({by or 'none'}); "
        f"{s['graph_iterations']} replay a graph, {s['eager_decode_iterations']} decode "
        "iterations run eagerly"
    ]
    gap = s["host_gap_ns"]
    if gap > 0:
        parts = ", ".join(
            f"{c} {fmt_ns(s['gap'][c])} ({fmt_pct(s['gap'][c] / gap)})"
            for c in GAP_CLASS_IDS
            if s["gap"][c]
        )
        lines.append(f"GPU idle between iterations {fmt_ns(gap)}: {parts}")
    if serving.async_scheduling:  # the remedy then does not advise it
        lines.append(
            "scheduling already overlaps the GPU (async): " + "; ".join(serving.async_evidence[:2])
        )
    if serving.evidence:
        lines.append("signs: " + "; ".join(serving.evidence[:3]))
    return lines


def serving_lines(analysis: Analysis) -> list[str]:
    """The terminal section (title, sentences, one aligned row per group); [] if no server."""
    sv = analysis.serving
    if sv is None:
        return []
    rows = [list(HEADERS)] + [r.cells() for r in group_rows(sv)]
    widths = [max(len(r[k]) for r in rows) for k in range(len(HEADERS))]
    table = [
        "  " + "  ".join(c.ljust(w) for c, w in zip(r, widths, strict=True)).rstrip() for r in rows
    ]
    return [TITLE, *("  " + line for line in summary_lines(sv)), *(table if len(rows) > 1 else [])]


def serving_markdown(analysis: Analysis) -> list[str]:
    """The Markdown section: a heading, the sentences, a table; [] if no server."""
    sv = analysis.serving
    if sv is None:
        return []
    out = [f"## {TITLE}", ""]
    out += [f"- {_md(line)}" for line in summary_lines(sv)]
    rows = group_rows(sv)
    if rows:
        out += ["", "| " + " | ".join(HEADERS) + " |", "|" + "---|" * len(HEADERS)]
        out += ["| " + " | ".join(_md(c) for c in r.cells()) + " |" for r in rows]
    return [*out, ""]


def serving_html(analysis: Analysis) -> str:
    """The HTML fragment (a ``section`` with a list and a table); "" if no server."""
    sv = analysis.serving
    if sv is None:
        return ""
    items = "".join(f"<li>{html.escape(line)}</li>" for line in summary_lines(sv))
    head = "".join(f"<th>{html.escape(h)}</th>" for h in HEADERS)
    body = "".join(
        "<tr>" + "".join(f"<td>{html.escape(c)}</td>" for c in r.cells()) + "</tr>"
        for r in group_rows(sv)
    )
    table = f"<table><thead><tr>{head}</tr></thead><tbody>{body}</tbody></table>" if body else ""
    return f'<section id="serving"><h2>{TITLE}</h2><ul>{items}</ul>{table}</section>'


def _md(text: str) -> str:
    return text.replace("|", "\\|")


__all__ = [
    "GroupRow",
    "group_rows",
    "serving_html",
    "serving_lines",
    "serving_markdown",
    "summary_lines",
]
