"""``tf history``: the stored runs, or one figure's trend over them (docs/history.md). The
``--store`` and ``--label`` options of ``tf analyze`` that record a run are ``cli.store``."""

from __future__ import annotations

import re
import sys
from datetime import UTC, datetime, timedelta
from typing import Any, Final

import click

from traceforensics import history
from traceforensics.analysis.idle.causes import CAUSES
from traceforensics.cli.options import EXIT_CODES_HELP, non_negative_int
from traceforensics.cli.store import STORE_HELP
from traceforensics.history.figures import check_figure, names_shown
from traceforensics.model.errors import InputError
from traceforensics.model.schema import BUSY_CLASSES
from traceforensics.report.format import one_line
from traceforensics.report.history_text import render_runs, render_trend, runs_json, trend_json
from traceforensics.report.json_out import dumps

#: The newest runs listed unless asked (``--limit``; ``tf mcp``'s history tool too).
HISTORY_LIMIT: Final = 20
_AGE_RE = re.compile(r"^\s*(\d+(?:\.\d+)?)\s*([mhdw])\s*$")
_AGE_UNITS = {"m": "minutes", "h": "hours", "d": "days", "w": "weeks"}


def since_value(ctx: click.Context, param: click.Parameter, value: str | None) -> datetime | None:
    """``--since``: an ISO date or date-time (UTC unless it names its offset) or an age
    (``30m``, ``12h``, ``7d``, ``2w`` before now)."""
    if value is None:
        return None
    age = _AGE_RE.match(value)
    if age:
        return datetime.now(UTC) - timedelta(**{_AGE_UNITS[age.group(2)]: float(age.group(1))})
    try:
        when = datetime.fromisoformat(value.strip())
    except ValueError:
        raise InputError(
            f"--since {value!r}: not a date; pass 2026-11-30, 2026-11-30T14:00 (UTC) or an age "
            "such as 12h or 7d"
        ) from None
    return when if when.tzinfo else when.replace(tzinfo=UTC)


@click.command(
    "history",
    short_help="Stored runs: list them, or follow one figure over them.",
    epilog="\b\nExamples:\n"
    "  tf analyze trace.json.gz --store --label git=abc123 --label run=baseline\n"
    "  tf history\n"
    "  tf history --label branch=main --since 7d\n"
    "  tf history --trend idle.data_loading --label branch=main\n"
    "  tf history --trend step_time --json > trend.json\n"
    "  tf history --store postgresql+psycopg://ci@db/perf --limit 50\n\n"
    "A store with no runs yet prints one line and exits 0.\n" + EXIT_CODES_HELP,
)
@click.option(
    "--store",
    "--store-url",
    "store",
    default=None,
    metavar="URL",
    help="The history store: " + STORE_HELP,
)
@click.option(
    "--label",
    "labels",
    multiple=True,
    metavar="K=V",
    help="Only runs with this label (repeatable: all must match, one key given twice matches "
    "either value; a bare VALUE matches any label, #ID one run).",
)
@click.option(
    "--since",
    default=None,
    metavar="DATE",
    callback=since_value,
    help="Only runs recorded at or after DATE: 2026-11-30, 2026-11-30T14:00 (UTC) or an age "
    "(12h, 7d).",
)
@click.option(
    "--limit",
    default=HISTORY_LIMIT,
    metavar="N",
    show_default=True,
    callback=non_negative_int,
    help="The newest N runs (0: all).",
)
@click.option(
    "--trend",
    "figure",
    default=None,
    metavar="FIGURE",
    help=f"Follow one figure over the runs, any --fail-on figure: {names_shown()} (e.g. "
    "idle.data_loading; docs/diff.md).",
)
@click.option("--json", "as_json", is_flag=True, help="Write the JSON object to stdout.")
def history_command(
    store: str | None,
    labels: tuple[str, ...],
    since: datetime | None,
    limit: int,
    figure: str | None,
    as_json: bool,
) -> None:
    """List the runs stored by tf analyze --store (newest first), or with --trend follow one
    figure over them (oldest first)."""
    url = history.display(history.check_url(store))
    # the names --fail-on accepts (cli/fail_on.py), checked before the store is opened
    name = check_figure(figure, CAUSES, BUSY_CLASSES) if figure is not None else None
    flt = history.RunFilter(labels=labels, since=since, limit=limit or None)
    if name is not None:
        points = history.trend(store, name, flt)
        if not as_json and points.is_empty() and not _exists(store):
            return _nothing(url)
        _out(trend_json(points, name, url) if as_json else render_trend(points, name, url))
        return
    runs = history.list_runs(store, flt)
    if not as_json and runs.is_empty() and not _exists(store):
        return _nothing(url)
    _out(runs_json(runs, url) if as_json else render_runs(runs, url))


def _exists(store: str | None) -> bool:
    """Whether the store holds any run at all (an empty answer may be the filters')."""
    return not history.list_runs(store, history.RunFilter(limit=1)).is_empty()


def _nothing(url: str) -> None:
    click.echo(f"no runs stored yet in {one_line(url)}; store one with tf analyze TRACE --store")


def _out(answer: str | dict[str, Any]) -> None:
    if isinstance(answer, str):
        sys.stdout.write(answer)
    else:
        sys.stdout.buffer.write(dumps(answer))
