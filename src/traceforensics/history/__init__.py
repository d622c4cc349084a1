"""The run history (issue 15, docs/history.md): analyses stored with labels in an SQLite file
or a PostgreSQL database, listed, followed as trends and read back as baselines.

``record_run`` stores a ``traceforensics.analysis/1`` document; ``find_baseline`` gives the
stored document of the newest run a selector names; ``list_runs`` and ``trend`` answer as
polars DataFrames. The job's figures (step time, idle, MFU, ...) are never defined here: they
are ``compare.analysis_figures``, computed when a run is recorded and stored (``tf_figures``,
``history.figures``). Imports ``compare`` and ``model``; ``compare`` never imports this.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from traceforensics.history.figures import check_figure, names_shown
    from traceforensics.history.labels import parse_label, parse_labels
    from traceforensics.history.migrate import SCHEMA_VERSION
    from traceforensics.history.query import RunFilter, find_baseline, list_runs, trend
    from traceforensics.history.store import prepare_store, record_run, store_shown
    from traceforensics.history.urls import (
        ENV_URL,
        check_url,
        default_url,
        display,
        parse_url,
        resolve_url,
    )

#: Where each public name lives: the package imports a module (and SQLAlchemy, ~0.3 s) only
#: when one of its names is first used, so every ``tf`` command does not pay for the store.
_HOME = {
    "check_figure": "figures",
    "names_shown": "figures",
    "parse_label": "labels",
    "parse_labels": "labels",
    "SCHEMA_VERSION": "migrate",
    "RunFilter": "query",
    "find_baseline": "query",
    "list_runs": "query",
    "trend": "query",
    "prepare_store": "store",
    "record_run": "store",
    "store_shown": "store",
    "ENV_URL": "urls",
    "check_url": "urls",
    "default_url": "urls",
    "display": "urls",
    "parse_url": "urls",
    "resolve_url": "urls",
}


def __getattr__(name: str) -> Any:
    module = _HOME.get(name)
    if module is None:
        raise AttributeError(f"module 'traceforensics.history' has no attribute {name!r}")
    return getattr(importlib.import_module(f"traceforensics.history.{module}"), name)


__all__ = [
    "ENV_URL",
    "SCHEMA_VERSION",
    "RunFilter",
    "check_figure",
    "check_url",
    "default_url",
    "display",
    "find_baseline",
    "list_runs",
    "names_shown",
    "parse_label",
    "parse_labels",
    "parse_url",
    "prepare_store",
    "record_run",
    "resolve_url",
    "store_shown",
    "trend",
]
