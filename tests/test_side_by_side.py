"""On a big table the analysis runs its steps one after another (``context.side_by_side``) to
bound memory; the answer must be the one the concurrent run gives."""

from __future__ import annotations

import pytest

from tests.conftest import ROOT, shared_trace
from traceforensics.analysis import context
from traceforensics.analysis.pipeline import analyze
from traceforensics.ingest import load_path


@pytest.mark.parametrize(
    "trace",
    [
        ROOT / "examples" / "synthetic_training.pt.trace.json.gz",
        "kineto/resnet50_v100_workers0.pt.trace.json.gz",
        "hta/ddp_nccl_a100_rank0.json.gz",
    ],
)
def test_one_at_a_time_gives_the_concurrent_answer(
    trace: object, monkeypatch: pytest.MonkeyPatch
) -> None:
    path = trace if not isinstance(trace, str) else shared_trace(trace)
    session = load_path(path)  # type: ignore[arg-type]
    together = analyze(session).to_json()
    monkeypatch.setattr(context, "SIDE_BY_SIDE_MAX_ROWS", 0)
    assert not context.side_by_side(session.events.height)
    assert analyze(session).to_json() == together
