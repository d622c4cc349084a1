"""The ``--store [URL]`` and ``--label KEY=VALUE`` options of ``tf analyze``, which record a
finished run in the history store (``tf history`` lists them; docs/history.md).

Apart from ``cli.history`` so that ``tf analyze`` does not import the ``tf history`` command
and its report renderers; the store itself (``traceforensics.history``, SQLAlchemy) is
imported only when ``--store`` is given.
"""

from __future__ import annotations

import os
import shlex
from collections.abc import Callable, Sequence
from typing import Any

import click

from traceforensics import history
from traceforensics.model.errors import InputError
from traceforensics.report.format import one_line

#: Labels every ``tf analyze --store`` of this environment adds (``KEY=VALUE`` words, shell
#: quoting); ``--label`` wins over a key given here too.
ENV_LABELS = "TF_LABELS"
STORE_HELP = (
    "sqlite:///FILE or postgresql+psycopg://USER@HOST/DB; default $TF_HISTORY_URL, else "
    "history.sqlite in ~/.local/share/traceforensics."
)


def store_value(ctx: click.Context, param: click.Parameter, value: str | None) -> str | None:
    """``--store [URL]``: None when absent, ``""`` (the default store) when given bare, else a
    URL. The store is opened now (created when new): a bad URL, a server that does not
    answer or a read-only file fails before a long analysis, not after it. ``--label`` without
    ``--store`` is refused here, before the analysis: click handles an option absent from the
    command line after every given one, so the labels are known by then."""
    if value is None:
        if ctx.params.get("labels"):
            raise InputError("--label: labels are stored with the run; add --store")
        return None
    if value and "://" not in value:
        raise InputError(
            f"--store {value!r}: not a database URL; pass sqlite:///PATH or "
            "postgresql+psycopg://USER@HOST/DB, or put --store after the trace to use the "
            "default store"
        )
    env_labels()  # checked before the store is touched
    history.prepare_store(value or None)
    return value


def label_values(
    ctx: click.Context, param: click.Parameter, value: tuple[str, ...]
) -> dict[str, str]:
    """``--label KEY=VALUE`` (repeatable), checked now (``$TF_LABELS`` is checked with
    ``--store``: it only matters when storing)."""
    if not value:  # (every run calls this: without labels nothing is imported)
        return {}
    from traceforensics.history.labels import parse_labels

    try:
        return parse_labels(value)
    except InputError as exc:
        raise InputError(f"--label: {exc}") from exc


def env_labels() -> dict[str, str]:
    """The labels of ``$TF_LABELS`` (``KEY=VALUE`` words, shell quoting)."""
    from traceforensics.history.labels import parse_labels

    try:
        return parse_labels(shlex.split(os.environ.get(ENV_LABELS, "")))
    except (InputError, ValueError) as exc:
        raise InputError(f"${ENV_LABELS}: {exc}; fix or unset it") from exc


def store_run(
    document: Callable[[], dict[str, Any]],
    store: str | None,
    labels: dict[str, str],
    inputs: Sequence[str],
) -> None:
    """Record a finished analysis when ``--store`` was given (``store``: None absent, ``""``
    the default store, else its URL), labelled with ``$TF_LABELS`` and ``labels`` (``--label``
    wins for a key in both; ``--label`` without ``--store`` was refused by ``store_value``).
    One line on stderr: stdout stays the report or the pure JSON."""
    if store is None:
        return
    run_id = history.record_run(
        document(), url=store or None, labels=env_labels() | labels, inputs=inputs
    )
    click.echo(
        f"tf: stored run {run_id} in {one_line(history.store_shown(store or None))}", err=True
    )
