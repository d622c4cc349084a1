"""The job's figures of a stored run: computed by ``compare``, stored, never redefined here.

One definition of every rule: what a run's ``step_time``, ``idle``, ``mfu``, ... are is
``traceforensics.compare.analysis_figures`` (docs/diff.md), the figures ``tf analyze --fail-on``
checks. At record time each of them becomes one ``tf_figures`` row:

- ``name``: the ``--fail-on`` name (``compare.figures.figure_names``): ``step_time``,
  ``step_time.mean``, ``step_time.iqr``, ``idle``, ``idle.<cause>``, ``busy``, ``busy.<kind>``,
  ``comm``, ``comm.exposed``, ``copy.exposed``, ``mfu``;
- ``unit`` (``ns``, ``ns/step``, ``fraction``) and ``basis`` (``median_step``, ``per_step``,
  ``window_per_step``, ``total``, ``span``, ...) as compare gives them;
- ``value``: the figure (ns, ns per step, or a fraction for MFU); null when unknown (no steps,
  no FLOPs or peak);
- ``share``: for time figures their window total over the window (a fraction); null for step
  time and MFU.

So a listing or a trend is a query over what compare computed when the run was recorded, and
cannot drift from ``tf diff`` or ``--fail-on``. Nothing here aggregates devices.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from typing import Any

import polars as pl

from traceforensics.compare import analysis_figures
from traceforensics.compare.figures import figure_names
from traceforensics.model.errors import InputError
from traceforensics.model.schema import BUSY_CLASSES

#: The ``tf_figures`` columns a listing reads, and the rows it reads (``query.LISTED``: these
#: names and every ``idle.<cause>``).
FIGURE_COLUMNS = ("run_id", "name", "value", "share")
LISTED_NAMES = ("idle", "step_time", "mfu")
#: How the name of a cause's idle figure starts (``idle.data_loading``).
CAUSE_PREFIX = "idle."
#: Placeholders that stand for any cause id / busy kind in help texts and messages.
CAUSE_WORD, KIND_WORD = "CAUSE", "KIND"


def figure_rows(document: Mapping[str, Any], label: str) -> list[dict[str, Any]]:
    """One ``tf_figures`` row (without ``run_id``) per figure ``analysis_figures`` gives for
    ``document`` (``label`` names the document in its errors). A value that is not a finite
    number is stored as null: SQLite and PostgreSQL treat NaN differently."""
    return [
        {
            "name": name,
            "unit": d.unit,
            "basis": d.basis,
            "value": _finite(d.after),
            "share": _finite(d.share_after),
        }
        for name, d in analysis_figures(dict(document), label).items()
    ]


def _finite(x: float | None) -> float | None:
    return float(x) if x is not None and math.isfinite(x) else None


def names_shown() -> str:
    """Every figure name with ``CAUSE`` and ``KIND`` standing for the ids (help texts)."""
    return ", ".join(figure_names((CAUSE_WORD,), (KIND_WORD,)))


def check_figure(text: str, causes: Sequence[str], kinds: Sequence[str] = BUSY_CLASSES) -> str:
    """The figure name ``text`` gives (trimmed, lower case) when compare's ``figure_names``
    for these cause ids and busy kinds holds it (exactly what ``--fail-on`` accepts), else a
    one-line ``InputError`` listing the valid names."""
    name = text.strip().lower()
    if name in figure_names(causes, kinds):
        return name
    head, dot, tail = name.partition(".")
    if head == "idle" and dot:
        why = f"unknown cause {tail!r}; idle.{CAUSE_WORD} takes one of {', '.join(causes)}"
    elif head == "busy" and dot:
        why = f"unknown busy kind {tail!r}; busy.{KIND_WORD} takes one of {', '.join(kinds)}"
    else:
        why = f"unknown; pass one of {names_shown()} (the --fail-on names, docs/diff.md)"
    raise InputError(f"figure {text!r}: {why}")


def trend_name(text: str, causes: Sequence[str]) -> str:
    """``check_figure`` against the cause ids a store holds (``stored_causes``); with none
    stored yet, any ``idle.<cause>`` passes: nothing to trend, and no cause list to judge by."""
    name = text.strip().lower()
    if not causes and name.startswith(CAUSE_PREFIX) and name != CAUSE_PREFIX:
        return name
    return check_figure(text, causes)


def stored_causes(names: Sequence[str]) -> tuple[str, ...]:
    """The cause ids behind stored ``idle.<cause>`` figure names, in first-seen order."""
    return tuple(
        dict.fromkeys(n.removeprefix(CAUSE_PREFIX) for n in names if n.startswith(CAUSE_PREFIX))
    )


def listed_figures(rows: pl.DataFrame) -> pl.DataFrame:
    """Per ``run_id`` of ``rows`` (``tf_figures`` rows: ``FIGURE_COLUMNS`` where ``LISTED``)
    what a listing shows: ``idle`` (the idle figure's share of the window), ``step_time_ns``
    (the step_time figure, rounded to ns), ``mfu``, and ``top_cause``: the cause whose
    ``idle.<cause>`` figure has the largest share (one run's shares are all of one window, so
    it is the cause with the most idle ns); ties by name; null without idle. A choice among
    compare's figures, not a figure of its own."""
    top = (
        rows.filter(pl.col("name").str.starts_with(CAUSE_PREFIX) & (pl.col("share") > 0))
        .sort(["run_id", "share", "name"], descending=[False, True, False])
        .group_by("run_id", maintain_order=True)
        .first()
        .select("run_id", pl.col("name").str.strip_prefix(CAUSE_PREFIX).alias("top_cause"))
    )

    def pick(name: str, column: str) -> pl.Expr:
        return pl.col(column).filter(pl.col("name") == name).first()

    wide = rows.group_by("run_id").agg(
        pick("idle", "share").alias("idle"),
        pick("step_time", "value").round().alias("step_time_ns"),
        pick("mfu", "value").alias("mfu"),
    )
    return wide.join(top, on="run_id", how="left")
