"""Pattern classification on synthetic series with known shape, period and drop count."""

from __future__ import annotations

import numpy as np
import pytest

from traceforensics.analysis.utilization.patterns import (
    LIKELY_CAUSES,
    PATTERNS,
    check_causes,
    classify_utilization,
)

RNG = np.random.default_rng(7)


def _square(n: int, interval: float, period: float, duty: float) -> np.ndarray:
    """Square wave on sample indices: round(period/interval) samples per cycle, the first
    round(duty x that) of them high."""
    per = round(period / interval)
    x = np.where((np.arange(n) % per) < round(duty * per), 95.0, 3.0) + RNG.normal(0, 2, n)
    return np.clip(x, 0, 100)


@pytest.mark.parametrize(
    ("interval", "period", "expected"),
    [
        (0.1, 0.6, "high_frequency_sawtooth"),
        (0.01, 0.25, "high_frequency_sawtooth"),
        (1.0, 45.0, "low_frequency_tidal"),
        (5.0, 600.0, "low_frequency_tidal"),
    ],
)
def test_periodic_swings(interval: float, period: float, expected: str) -> None:
    r = classify_utilization(_square(int(8 * period / interval), interval, period, 0.5), interval)
    assert r.pattern == expected
    assert r.period_s == pytest.approx(period, rel=0.05)
    assert r.duty_cycle == pytest.approx(0.5, abs=0.05)
    # plain count of falls from high to low
    assert r.drop_count == pytest.approx(8, abs=1)


def test_levels() -> None:
    assert classify_utilization(np.clip(RNG.normal(50, 6, 500), 0, 100), 1).pattern == (
        "persistent_half_saturation"
    )
    assert (
        classify_utilization(np.clip(RNG.normal(96, 1.5, 500), 0, 100), 1).pattern == "steady_high"
    )
    assert classify_utilization(np.abs(RNG.normal(0.5, 0.5, 500)), 1).pattern == "idle"


def test_sporadic_drops_counts_each_isolated_fall() -> None:
    x = np.clip(RNG.normal(94, 2, 2000), 0, 100)
    for at in (100, 700, 701, 1500):
        x[at] = 0.5
    r = classify_utilization(x, 1.0)
    assert r.pattern == "sporadic_drops"
    assert r.drop_count == 3  # 700-701 is one drop


def test_six_samples_claim_no_period() -> None:
    r = classify_utilization([98.2, 12.5, 0.3, 87.6, 45.1, 99.1], 1.0)
    assert r.pattern == "insufficient_data"
    assert r.period_s is None
    assert "too few" in r.period_note and "period" in r.period_note
    assert r.mean_pct == pytest.approx((98.2 + 12.5 + 0.3 + 87.6 + 45.1 + 99.1) / 6)


def test_noise_without_period_is_not_given_one() -> None:
    x = np.where(RNG.random(3000) < 0.5, 95.0, 2.0)
    r = classify_utilization(x, 1.0)
    assert r.period_s is None
    assert r.pattern == "irregular"


def test_missing_samples_are_interpolated_not_dropped() -> None:
    x = _square(800, 1.0, 40.0, 0.5)
    x[RNG.choice(800, 30, replace=False)] = np.nan
    r = classify_utilization(x, 1.0)
    assert r.missing == 30 and r.samples == 770
    assert r.pattern == "low_frequency_tidal" and r.period_s == pytest.approx(40, rel=0.05)


def test_every_pattern_has_causes_and_verdicts() -> None:
    assert set(LIKELY_CAUSES) == set(PATTERNS)
    idle = {"data_loading": 400, "memcpy": 40, "launch_overhead": 10, "cpu_compute": 150}
    verdicts = {v.cause_id: v for v in check_causes("high_frequency_sawtooth", idle)}
    total = sum(idle.values())
    assert verdicts["data_loading"].verdict == "confirmed"
    assert verdicts["data_loading"].share == pytest.approx(400 / total)
    assert verdicts["launch_overhead"].verdict == "refuted"
    assert verdicts["host_sync"].verdict == "refuted" and verdicts["host_sync"].idle_ns == 0
    assert verdicts["cpu_compute"].verdict == "confirmed"
    assert verdicts["memcpy"].verdict == "minor"
    half = check_causes("persistent_half_saturation", idle)
    assert any(v.cause_id is None and v.verdict == "not_checkable" for v in half)
    assert all(v.verdict == "not_checkable" for v in check_causes("sporadic_drops", {}))
