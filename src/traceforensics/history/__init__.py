"""The run history (issue 15, docs/history.md): analyses stored with labels in an SQLite file
or a PostgreSQL database, listed, followed as trends and read back as baselines.

``record_run`` stores a ``traceforensics.analysis/1`` document; ``find_baseline`` gives the
stored document of the newest run a selector names; ``list_runs`` and ``trend`` answer as
polars DataFrames. The job's figures (step time, idle, MFU, ...) are never defined here: they
are ``compare.analysis_figures``, computed when a run is recorded and stored (``tf_figures``,
``history.figures``). Imports ``compare`` and ``model``; ``compare`` never imports this.
"""

from __future__ import annotations

from traceforensics.history.figures import check_figure, names_shown
from traceforensics.history.labels import parse_label, parse_labels
from traceforensics.history.migrate import SCHEMA_VERSION
from traceforensics.history.query import RunFilter, find_baseline, list_runs, trend
from traceforensics.history.store import prepare_store, record_run, store_shown
from traceforensics.history.urls import ENV_URL, check_url, default_url, parse_url, resolve_url

__all__ = [
    "ENV_URL",
    "SCHEMA_VERSION",
    "RunFilter",
    "check_figure",
    "check_url",
    "default_url",
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
