"""``analysis.engines``: a query over a small table runs on polars' in-memory engine, over a
big one on the streaming engine, and the analysis is the same either way, on every real trace
(JSON compared whole) and on the bundled example."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.conftest import TRACES, kineto_trace_files, nsys_trace_files
from traceforensics.analysis import engines
from traceforensics.analysis.pipeline import analyze
from traceforensics.ingest import load_path

EXAMPLE = Path(__file__).resolve().parents[1] / "examples/synthetic_training.pt.trace.json.gz"


def test_the_engine_follows_the_rows() -> None:
    assert engines.engine_for(0) == "in-memory"
    assert engines.engine_for(engines.SMALL_QUERY_ROWS) == "in-memory"
    assert engines.engine_for(engines.SMALL_QUERY_ROWS + 1) == "streaming"


@pytest.mark.parametrize("rel", [str(EXAMPLE), *kineto_trace_files(), *nsys_trace_files()])
def test_both_engines_give_the_same_analysis(rel: str, monkeypatch: pytest.MonkeyPatch) -> None:
    path = Path(rel) if Path(rel).is_absolute() else TRACES / rel
    session = load_path(path)
    assert session.events.height <= engines.SMALL_QUERY_ROWS  # (the default is in-memory)
    in_memory = analyze(session).to_json()
    monkeypatch.setattr(engines, "SMALL_QUERY_ROWS", -1)  # every query streams
    streamed = analyze(session).to_json()
    assert streamed == in_memory
    assert in_memory["devices"] or not session.kind("kernel").height
