"""Reading stored runs: which runs match, their listing, a figure's trend, a baseline.

Job figures are read from ``tf_figures`` as ``compare`` computed them at record time
(``history.figures``); nothing here adds devices up.

Filters: every label selector must match (``KEY=VALUE``; several values of one key match
either), a bare ``VALUE`` matches a run with any label of that value (a bare integer also the
run with that id), ``#ID`` the run with that id; ``since`` keeps runs recorded at or after it;
``limit`` keeps the newest N. Listings are newest first, trends oldest first.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any, TypeVar

import polars as pl
import sqlalchemy as sa

from traceforensics.history.figures import (
    CAUSE_PREFIX,
    FIGURE_COLUMNS,
    LISTED_NAMES,
    listed_figures,
    stored_causes,
    trend_name,
)
from traceforensics.history.labels import Selector, parse_selector
from traceforensics.history.store import db_errors, load_document, opened, store_shown
from traceforensics.history.tables import DEVICES, FIGURES, FINDINGS, INPUTS, LABELS, RUNS
from traceforensics.model.errors import InputError

T = TypeVar("T")
_CHUNK = 500  # ids per IN (...) list
#: Listings' order, and which run a selector names when several match: the newest.
_NEWEST = (RUNS.c.recorded_at.desc(), RUNS.c.id.desc())

#: WHERE clauses on ``tf_figures``, built here, beside SQLAlchemy, so ``history.figures``
#: (figure names for the CLI's help) imports no database code: every ``idle.<cause>`` row, and
#: the rows a listing reads.
CAUSE_FIGURES = FIGURES.c.name.like(CAUSE_PREFIX + "%")
LISTED = FIGURES.c.name.in_(LISTED_NAMES) | CAUSE_FIGURES


@dataclass(frozen=True)
class RunFilter:
    """Which runs: label selectors (all must match), recorded at or after ``since`` (UTC),
    the newest ``limit``."""

    labels: tuple[str, ...] = ()
    since: datetime | None = None
    limit: int | None = None

    def __post_init__(self) -> None:
        for text in self.labels:  # a bad selector fails here, even on an empty store
            parse_selector(text)


def _condition(selectors: Sequence[Selector]) -> sa.ColumnElement[bool]:
    by_key: dict[str, list[str]] = {}
    parts: list[sa.ColumnElement[bool]] = []
    for s in selectors:
        if s.key is not None and s.value is not None:
            by_key.setdefault(s.key, []).append(s.value)
            continue
        alternatives: list[sa.ColumnElement[bool]] = []
        if s.run_id is not None:
            alternatives.append(RUNS.c.id == s.run_id)
        if s.value is not None:
            alternatives.append(_has_label(LABELS.c.value == s.value))
        parts.append(sa.or_(*alternatives))
    parts += [
        _has_label(sa.and_(LABELS.c.key == k, LABELS.c.value.in_(v))) for k, v in by_key.items()
    ]
    return sa.and_(sa.true(), *parts)


def _has_label(cond: sa.ColumnElement[bool]) -> sa.ColumnElement[bool]:
    return sa.exists().where(LABELS.c.run_id == RUNS.c.id, cond)


def matching_ids(conn: sa.Connection, flt: RunFilter) -> list[int]:
    """Ids of the runs ``flt`` keeps, newest first."""
    where = _condition([parse_selector(t) for t in flt.labels])
    if flt.since is not None:
        since = flt.since if flt.since.tzinfo else flt.since.replace(tzinfo=UTC)
        where = sa.and_(where, RUNS.c.recorded_at >= since)
    query = sa.select(RUNS.c.id).where(where).order_by(*_NEWEST)
    if flt.limit is not None:
        query = query.limit(flt.limit)
    return list(conn.execute(query).scalars())


def _chunks(ids: Sequence[int]) -> Iterator[list[int]]:
    for k in range(0, len(ids), _CHUNK):
        yield list(ids[k : k + _CHUNK])


def _frame(
    conn: sa.Connection,
    table: sa.Table,
    columns: Sequence[str],
    ids: Sequence[int],
    where: sa.ColumnElement[bool] | None = None,
) -> pl.DataFrame:
    """``columns`` of ``table`` for runs ``ids`` (and ``where``), typed from the table even
    when empty."""
    rows: list[dict[str, Any]] = []
    cols = [table.c[c] for c in columns]
    key = table.c["id" if table is RUNS else "run_id"]
    for chunk in _chunks(ids):
        query = sa.select(*cols).where(key.in_(chunk), sa.true() if where is None else where)
        rows += [dict(r._mapping) for r in conn.execute(query)]
    if "recorded_at" in columns:
        for row in rows:
            row["recorded_at"] = _utc(row["recorded_at"])
    schema = {c: _dtype(table.c[c]) for c in columns}
    return pl.DataFrame(rows, schema=schema, orient="row") if rows else pl.DataFrame(schema=schema)


def _dtype(column: sa.Column[Any]) -> pl.DataType:
    kind = column.type
    if isinstance(kind, sa.Integer):
        return pl.Int64()
    if isinstance(kind, sa.Float):
        return pl.Float64()
    if isinstance(kind, sa.Boolean):
        return pl.Boolean()
    if isinstance(kind, sa.DateTime):
        return pl.Datetime("us", "UTC")
    return pl.String()


def _utc(value: datetime) -> datetime:
    """SQLite gives back naive datetimes: they were written as UTC."""
    return value if value.tzinfo else value.replace(tzinfo=UTC)


_LIST_SCHEMA: dict[str, pl.DataType] = {
    "run_id": pl.Int64(),
    "recorded_at": pl.Datetime("us", "UTC"),
    "tool_version": pl.String(),
    "source_format": pl.String(),
    "trace_sha256": pl.String(),
    "labels": pl.List(pl.String()),
    "inputs": pl.List(pl.String()),
    "devices": pl.Int64(),
    "idle": pl.Float64(),
    "top_cause": pl.String(),
    "step_time_ns": pl.Int64(),
    "mfu": pl.Float64(),
    "findings": pl.Int64(),
    "top_finding": pl.String(),
    "top_finding_ns": pl.Int64(),
}
_TREND_SCHEMA: dict[str, pl.DataType] = {
    "run_id": pl.Int64(),
    "recorded_at": pl.Datetime("us", "UTC"),
    "labels": pl.List(pl.String()),
    "unit": pl.String(),
    "basis": pl.String(),
    "value": pl.Float64(),
    "share": pl.Float64(),
}


def _runs(conn: sa.Connection, ids: Sequence[int]) -> pl.DataFrame:
    """The run rows with their labels (sorted ``key=value`` texts) and inputs, in ``ids``'
    order."""
    runs = _frame(
        conn, RUNS, ("id", "recorded_at", "tool_version", "source_format", "trace_sha256"), ids
    ).rename({"id": "run_id"})
    labels = (
        _frame(conn, LABELS, ("run_id", "key", "value"), ids)
        .sort("run_id", "key")
        .group_by("run_id", maintain_order=True)
        .agg((pl.col("key") + "=" + pl.col("value")).alias("labels"))
    )
    inputs = (
        _frame(conn, INPUTS, ("run_id", "position", "path"), ids)
        .sort("run_id", "position")
        .group_by("run_id", maintain_order=True)
        .agg(pl.col("path").alias("inputs"))
    )
    order = pl.DataFrame({"run_id": list(ids)}, schema={"run_id": pl.Int64})
    return (
        order.join(runs, on="run_id", how="left")
        .join(labels, on="run_id", how="left")
        .join(inputs, on="run_id", how="left")
        .with_columns(pl.col("labels", "inputs").fill_null([]))
    )


def _with_store(url: str | None, read: Callable[[sa.Connection, str], T]) -> T | None:
    """``read(conn, shown)`` on the store, or None when no store exists yet."""
    with opened(url, write=False) as store:
        if store is None:
            return None
        with db_errors(store), store.engine.connect() as conn:
            return read(conn, store.shown)


def list_runs(url: str | None = None, filters: RunFilter | None = None) -> pl.DataFrame:
    """The runs ``filters`` keeps, newest first: ``run_id``, ``recorded_at`` (UTC),
    ``tool_version``, ``source_format``, ``trace_sha256``, ``labels`` (``key=value`` texts),
    ``inputs``, ``devices`` (count), ``idle``, ``top_cause``, ``step_time_ns``, ``mfu`` (stored
    job figures: ``figures.listed_figures``), ``findings`` (count), ``top_finding`` (category
    of the first finding, the largest loss) and ``top_finding_ns`` (its recoverable ns).
    Empty (same columns) when no store exists yet."""

    def read(conn: sa.Connection, _shown: str) -> pl.DataFrame:
        ids = matching_ids(conn, filters or RunFilter())
        devices = (
            _frame(conn, DEVICES, ("run_id",), ids)
            .group_by("run_id")
            .agg(pl.len().cast(pl.Int64).alias("devices"))
        )
        findings = _frame(conn, FINDINGS, ("run_id", "position", "category", "recoverable_ns"), ids)
        first = findings.filter(pl.col("position") == 0).select(
            "run_id",
            pl.col("category").alias("top_finding"),
            pl.col("recoverable_ns").alias("top_finding_ns"),
        )
        counts = findings.group_by("run_id").agg(pl.len().cast(pl.Int64).alias("findings"))
        return (
            _runs(conn, ids)
            .join(devices, on="run_id", how="left")
            .join(
                listed_figures(_frame(conn, FIGURES, FIGURE_COLUMNS, ids, LISTED)),
                on="run_id",
                how="left",
            )
            .join(counts, on="run_id", how="left")
            .join(first, on="run_id", how="left")
            .with_columns(pl.col("findings").fill_null(0))
            .select([pl.col(c).cast(t) for c, t in _LIST_SCHEMA.items()])
        )

    frame = _with_store(url, read)
    return frame if frame is not None else pl.DataFrame(schema=_LIST_SCHEMA)


def trend(url: str | None, figure: str, filters: RunFilter | None = None) -> pl.DataFrame:
    """One stored figure (a ``--fail-on`` name) over the runs ``filters`` keeps, oldest
    first: ``run_id``, ``recorded_at``, ``labels``, ``unit`` (``ns``, ``ns/step``,
    ``fraction``), ``basis``, ``value`` (Float64 in that unit) and ``share`` (a time figure's
    share of the window); nulls when a run lacks the figure. Empty when no store exists yet.
    An unknown name is a one-line ``InputError`` (``figures.trend_name``)."""

    def read(conn: sa.Connection, _shown: str) -> pl.DataFrame:
        stored = sa.select(FIGURES.c.name).distinct().where(CAUSE_FIGURES)
        name = trend_name(figure, stored_causes(list(conn.execute(stored).scalars())))
        ids = matching_ids(conn, filters or RunFilter())
        columns = ("run_id", "unit", "basis", "value", "share")
        values = _frame(conn, FIGURES, columns, ids, FIGURES.c.name == name)
        return (
            _runs(conn, ids)
            .select("run_id", "recorded_at", "labels")
            .join(values, on="run_id", how="left")
            .select([pl.col(c).cast(t) for c, t in _TREND_SCHEMA.items()])
            .reverse()
        )

    frame = _with_store(url, read)
    if frame is None:
        trend_name(figure, ())
        return pl.DataFrame(schema=_TREND_SCHEMA)
    return frame


def find_baseline(selector: str, url: str | None = None) -> dict[str, Any]:
    """The stored analysis document (``traceforensics.analysis/1``) of the newest run
    ``selector`` names (``KEY=VALUE``, a bare label value, ``#ID`` or an integer id; a bare
    integer names that run id first). One-line ``InputError`` when none matches or the store
    is missing or unreadable."""
    sel = parse_selector(selector)

    def read(conn: sa.Connection, shown: str) -> dict[str, Any]:
        run_id = _baseline_id(conn, sel)
        if run_id is None:
            raise InputError(
                f"no stored run {sel.describe()} in {shown}; list runs with tf history"
            )
        return load_document(conn, run_id)

    doc = _with_store(url, read)
    if doc is None:
        raise InputError(
            f"no stored run {sel.describe()} in {store_shown(url)}: no runs stored yet; store "
            "one with tf analyze TRACE --store"
        )
    return doc


def _baseline_id(conn: sa.Connection, sel: Selector) -> int | None:
    if sel.run_id is not None:  # an id (#ID, or a bare integer: the id first)
        found = conn.execute(sa.select(RUNS.c.id).where(RUNS.c.id == sel.run_id)).scalar()
        if found is not None or sel.value is None:
            return found
        sel = Selector(sel.text, value=sel.value)
    query = sa.select(RUNS.c.id).where(_condition([sel])).order_by(*_NEWEST).limit(1)
    return conn.execute(query).scalar()
