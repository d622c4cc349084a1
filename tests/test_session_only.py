"""``TraceSession.only``: ``tf analyze`` keeps the event columns and args the analysis reads
(``pipeline.EVENT_COLUMNS_READ``/``ARG_KEYS_READ``), and the analysis of that session is the
analysis of the whole one, on every real trace."""

from __future__ import annotations

from pathlib import Path

import polars as pl
import pytest

from tests.conftest import TRACES, kineto_trace_files, nsys_trace_files
from traceforensics.analysis.pipeline import ARG_KEYS_READ, EVENT_COLUMNS_READ, analyze
from traceforensics.ingest import load_path
from traceforensics.model.errors import SchemaError
from traceforensics.model.schema import EVENT_SCHEMA
from traceforensics.model.session import TraceSession
from traceforensics.report.markdown import render_markdown
from traceforensics.report.terminal import render_text

EXAMPLE = Path(__file__).resolve().parents[1] / "examples/synthetic_training.pt.trace.json.gz"
REAL = [*kineto_trace_files(), *nsys_trace_files()]


def _slim(session: TraceSession) -> TraceSession:
    return session.only(EVENT_COLUMNS_READ, ARG_KEYS_READ)


def test_only_keeps_the_named_columns_and_arg_rows() -> None:
    full = load_path(EXAMPLE)
    slim = _slim(full)
    assert slim.events.columns == [c for c in EVENT_SCHEMA if c in EVENT_COLUMNS_READ]
    assert {"grid", "block", "category"}.isdisjoint(slim.events.columns)
    assert slim.events.equals(full.events.select(slim.events.columns))
    assert slim.meta is full.meta
    # the args rows kept, recomputed row by row in plain Python
    keys = set(ARG_KEYS_READ)
    want = sorted(r for r in full.args.cast(pl.String).iter_rows() if r[1] in keys)
    assert want, "the example has shapes: some args must be kept"
    assert sorted(slim.args.cast(pl.String).iter_rows()) == want
    assert slim.args.height < full.args.height  # the example has other args too


def test_a_dropped_column_is_gone_not_nulled() -> None:
    slim = _slim(load_path(EXAMPLE))
    with pytest.raises(pl.exceptions.ColumnNotFoundError):
        slim.events.select("grid")
    with pytest.raises(SchemaError):
        slim.validate()


def test_only_refuses_unknown_columns() -> None:
    with pytest.raises(SchemaError, match="start_us"):
        load_path(EXAMPLE).only(["start_us", "start_ns"], [])


@pytest.mark.parametrize("rel", REAL or ["(no ../shared)"])
def test_analysis_of_the_kept_columns_is_the_whole_analysis(rel: str) -> None:
    if not REAL:
        pytest.skip("../shared/traces not present (tests on real traces need ../shared)")
    full = load_path(TRACES / rel)
    a, b = analyze(full), analyze(_slim(full))
    assert b.to_json() == a.to_json()


@pytest.mark.parametrize(
    "rel", ["kineto/resnet50_v100_workers0.pt.trace.json.gz", "nsys/NVIDIA__Fuser__report1.sqlite"]
)
def test_reports_of_the_kept_columns_are_the_whole_reports(rel: str) -> None:
    path = TRACES / rel
    if not path.exists():
        pytest.skip(f"../shared/traces/{rel} not present (tests on real traces need ../shared)")
    full = load_path(path)
    a, b = analyze(full), analyze(_slim(full))
    assert render_text(b) == render_text(a)
    assert render_markdown(b, command="tf") == render_markdown(a, command="tf")
