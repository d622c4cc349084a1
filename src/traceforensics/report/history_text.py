"""``tf history``'s output: the stored runs and a figure's trend, as text and as JSON.

The text is one table per answer (newest run first in a listing, oldest first in a trend, so
a trend reads downwards in time); a trend adds a bar per run (scaled to the largest value
shown) and one sparkline with the first-to-last change. Figures are the stored job figures
(``tf_figures``, computed by ``compare``) and are written in compare's words
(``compare.words``: ``1.23 ms/step``, ``14.1%``), as ``tf diff`` writes them. JSON objects are
``traceforensics.history/1`` and ``traceforensics.trend/1`` (docs/history.md).
"""

from __future__ import annotations

from datetime import datetime
from pathlib import PurePath
from typing import Any

import polars as pl

from traceforensics.compare.deltas import FigureDelta
from traceforensics.compare.figures import is_time_figure
from traceforensics.compare.words import fmt_change, fmt_delta, fmt_pair, fmt_value
from traceforensics.report.format import fmt_ns, fmt_pct, one_line, truncate

HISTORY_SCHEMA = "traceforensics.history/1"
TREND_SCHEMA = "traceforensics.trend/1"
BAR_WIDTH = 24
_EIGHTHS = " ▏▎▍▌▋▊▉█"
_SPARKS = "▁▂▃▄▅▆▇█"
_NONE = "—"


def _when(value: datetime | None) -> str:
    return value.strftime("%Y-%m-%d %H:%M") if value is not None else _NONE


def _labels(labels: list[str] | None, width: int) -> str:
    return truncate(one_line(" ".join(labels or [])) or _NONE, width)


#: Name endings every PyTorch Profiler trace shares: left out, so the names' own part shows.
_TRACE_ENDINGS = (".pt.trace.json.gz", ".pt.trace.json")
INPUT_WIDTH = 24


def _input(inputs: list[str] | None) -> str:
    """The first input's name (a directory's own name), without the common trace ending; a
    long one keeps its start and end."""
    if not inputs:
        return _NONE
    name = one_line(PurePath(inputs[0]).name or inputs[0])
    for ending in _TRACE_ENDINGS:
        name = name.removesuffix(ending)
    more = f" +{len(inputs) - 1}" if len(inputs) > 1 else ""
    room = INPUT_WIDTH - len(more)
    if len(name) > room:
        head = (room - 1) // 2
        name = name[:head] + "…" + name[len(name) - (room - 1 - head) :]
    return name + more


def render_runs(runs: pl.DataFrame, shown: str) -> str:
    """The listing: one line per run, newest first."""
    if runs.is_empty():
        return f"no stored run in {one_line(shown)} matches; list all with tf history\n"
    lines = [
        f"{runs.height} run{'s' if runs.height != 1 else ''} in {one_line(shown)} (newest first)",
        f"{'run':>5}  {'recorded (UTC)':<16}  {'idle':>6}  {'top cause':<17}  {'step time':>9}  "
        f"{'MFU':>6}  {'input':<{INPUT_WIDTH}}  labels",
    ]
    for r in runs.iter_rows(named=True):
        idle = fmt_pct(r["idle"]) if r["idle"] is not None else _NONE
        step = fmt_ns(r["step_time_ns"]) if r["step_time_ns"] is not None else _NONE
        mfu = fmt_pct(r["mfu"]) if r["mfu"] is not None else _NONE
        lines.append(
            f"{r['run_id']:>5}  {_when(r['recorded_at']):<16}  {idle:>6}  "
            f"{r['top_cause'] or _NONE:<17}  {step:>9}  {mfu:>6}  "
            f"{_input(r['inputs']):<{INPUT_WIDTH}}  {_labels(r['labels'], 60)}"
        )
    return "\n".join(lines) + "\n"


#: What a figure's value is, by its ``basis`` (compare's words, docs/diff.md).
_BASIS_WORDS = {
    "median_step": "the job's median step",
    "mean_step": "the job's mean step",
    "step_iqr": "the interquartile range of the job's steps",
    "per_step": "per step: the mean of the steps' values",
    "window_per_step": "per step: the window total over the steps",
    "total": "the window total (no steps)",
    "span": "over the GPU-active span",
}


def _bar(value: float | None, top: float) -> str:
    """A horizontal bar of ``value`` on a scale where ``top`` fills :data:`BAR_WIDTH`."""
    if value is None or top <= 0 or value <= 0:
        return ""
    eighths = round(min(value / top, 1.0) * BAR_WIDTH * 8)
    return "█" * (eighths // 8) + (_EIGHTHS[eighths % 8] if eighths % 8 else "")


def sparkline(values: list[float | None]) -> str:
    """One block per value, low to high between the smallest and largest (a space for none)."""
    known = [v for v in values if v is not None]
    if not known:
        return ""
    low, high = min(known), max(known)
    span = high - low
    return "".join(
        " " if v is None else _SPARKS[round((v - low) / span * 7) if span > 0 else 3]
        for v in values
    )


def _change(name: str, unit: str, first: dict[str, Any], last: dict[str, Any]) -> str:
    """First to last in compare's words: the relative change with both values; the change in
    percentage points of the share of the window (time figures) or of MFU."""
    d = FigureDelta(name, unit, last["basis"], first["value"], last["value"])
    text = fmt_change(d)
    if unit == "fraction":
        return f"{text}, {fmt_delta(d)}"
    if is_time_figure(name) and first["share"] is not None and last["share"] is not None:
        shares = FigureDelta(name, "fraction", "share", first["share"], last["share"])
        pair = fmt_pair(shares.before, shares.after, "fraction")
        text += f"; share of the window {pair} ({fmt_delta(shares)})"
    return text


def render_trend(points: pl.DataFrame, name: str, shown: str) -> str:
    """The trend: one line per run, oldest first (value in its unit, share of the window for
    time figures, a bar), then the sparkline and the first-to-last change. Bars, sparkline
    and change use the runs whose value is in the newest run's unit: a run without steps has
    a window total, which is not comparable with per-step values (a note names them)."""
    if points.is_empty():
        return f"no stored run in {one_line(shown)} matches; list all with tf history\n"
    rows = points.to_dicts()
    known = [r for r in rows if r["value"] is not None]
    unit = known[-1]["unit"] if known else None
    alike = [r for r in known if r["unit"] == unit]
    top = max((r["value"] for r in alike), default=0.0)
    with_share = is_time_figure(name)
    what = _BASIS_WORDS.get(known[-1]["basis"], known[-1]["basis"]) if known else "no values"
    what += "; share: of the whole window" if with_share else ""
    lines = [
        f"{name} over {len(rows)} run{'s' if len(rows) != 1 else ''} in {one_line(shown)}, "
        f"oldest first ({what})",
        f"{'run':>5}  {'recorded (UTC)':<16}  {'value':>14}  "
        f"{' share  ' if with_share else ''}{'':<{BAR_WIDTH}}  labels",
    ]
    for r in rows:
        value = fmt_value(r["value"], r["unit"]) if r["value"] is not None else _NONE
        share = fmt_pct(r["share"]) if r["share"] is not None else _NONE
        bar = _bar(r["value"], top) if r["unit"] == unit else ""
        lines.append(
            f"{r['run_id']:>5}  {_when(r['recorded_at']):<16}  {value:>14}  "
            f"{f'{share:>6}  ' if with_share else ''}{bar:<{BAR_WIDTH}}  "
            f"{_labels(r['labels'], 60)}".rstrip()
        )
    others = [str(r["run_id"]) for r in known if r["unit"] != unit]
    if others:
        lines.append(
            f"note: run{'s' if len(others) > 1 else ''} {', '.join(others)}: values in "
            f"{'other units' if len(others) > 1 else 'another unit'} (a run without steps has "
            "window totals), left out of the bars and the trend line"
        )
    if unit is not None and len(alike) >= 2:
        series = [r["value"] if r["unit"] == unit else None for r in rows]
        lines.append(f"trend  {sparkline(series)}  {_change(name, unit, alike[0], alike[-1])}")
    return "\n".join(lines) + "\n"


def _labels_dict(labels: list[str] | None) -> dict[str, str]:
    return dict(item.partition("=")[::2] for item in labels or [])


def _iso(value: datetime | None) -> str | None:
    return value.isoformat() if value is not None else None


def runs_json(runs: pl.DataFrame, shown: str) -> dict[str, Any]:
    """The ``traceforensics.history/1`` object of a listing."""
    rows = []
    for r in runs.iter_rows(named=True):
        rows.append(
            r | {"recorded_at": _iso(r["recorded_at"]), "labels": _labels_dict(r["labels"])}
        )
    return {"schema": HISTORY_SCHEMA, "store": shown, "runs": rows}


def trend_json(points: pl.DataFrame, name: str, shown: str) -> dict[str, Any]:
    """The ``traceforensics.trend/1`` object of a trend. Every point has ``unit``, ``basis``,
    ``value`` and ``share``, written as ``traceforensics.diff/1`` writes a figure
    (``FigureDelta.to_json``: times integer ns, fractions to 6 decimals)."""
    rows = []
    for r in points.iter_rows(named=True):
        value, share = r["value"], r["share"]
        if r["unit"] is not None:
            d = FigureDelta(name, r["unit"], r["basis"], None, value, share_after=share)
            written = d.to_json()
            value, share = written["after"], written["share_after"]
        rows.append(
            r
            | {"recorded_at": _iso(r["recorded_at"]), "labels": _labels_dict(r["labels"])}
            | {"value": value, "share": share}
        )
    return {"schema": TREND_SCHEMA, "store": shown, "figure": name, "points": rows}
