"""Acceptance on the real ResNet-50 V100 pair: the trace-derived curve is classified, and the
idle attribution confirms data loading for num_workers=0 only."""

from __future__ import annotations

import numpy as np
import pytest

import traceforensics
from tests.conftest import shared_trace
from traceforensics.analysis.context import prepare
from traceforensics.analysis.utilization.timeline import device_timeline, pattern_bin_ms


def _classify(rel: str) -> tuple[str, float, dict[str, str], float | None]:
    result = traceforensics.analyze(shared_trace(rel))
    dev = result.devices[0]
    assert dev.pattern is not None
    pat = dev.pattern.pattern
    verdicts = {v.cause_id or v.text: v.verdict for v in dev.pattern_causes}
    # independent mean: the curve re-binned at the classification bin from the busy union
    ctx = prepare(result.session)
    lo, hi = ctx.trace_span
    tl = device_timeline(ctx, 0, pattern_bin_ms(hi - lo, 100.0))
    assert pat.mean_pct == pytest.approx(float(np.mean(tl.values)) * 100)
    return pat.pattern, float(pat.mean_pct or 0.0), verdicts, pat.period_s


def test_resnet_workers0_is_a_data_loading_sawtooth() -> None:
    pattern, mean, verdicts, period = _classify("kineto/resnet50_v100_workers0.pt.trace.json.gz")
    assert pattern == "high_frequency_sawtooth"
    assert period is not None and 0.05 < period < 1.0
    assert verdicts["data_loading"] == "confirmed"
    assert mean < 60


def test_resnet_workers4_differs_with_higher_utilization() -> None:
    p0, mean0, _v0, _ = _classify("kineto/resnet50_v100_workers0.pt.trace.json.gz")
    p4, mean4, v4, _ = _classify("kineto/resnet50_v100_workers4.pt.trace.json.gz")
    assert p4 != p0 or mean4 > mean0
    assert mean4 > mean0
    assert v4.get("data_loading", "refuted") != "confirmed"
