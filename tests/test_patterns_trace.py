"""Acceptance on the real ResNet-50 V100 pair: the trace-derived curve is classified, and the
idle attribution confirms data loading for num_workers=0 only."""

from __future__ import annotations

import numpy as np
import pytest

from tests.conftest import shared_trace
from traceforensics.analysis.utilization.patterns import check_causes
from traceforensics.analysis.utilization.timeline import classify_device, gpu_devices
from traceforensics.ingest import load_path


def _classify(rel: str) -> tuple[str, float, dict[str, str], float | None]:
    session = load_path(shared_trace(rel))
    (rank, device), *_ = gpu_devices(session)
    tl, pat = classify_device(session, rank, device)
    from traceforensics.analysis.idle.gaps import analyze_gaps

    idle = next(d for d in analyze_gaps(session).devices if (d.rank, d.device) == (rank, device))
    verdicts = {
        v.cause_id or v.text: v.verdict for v in check_causes(pat.pattern, idle.idle_by_cause)
    }
    # independent mean: busy ns of the timeline's bins re-weighted by bin length
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
