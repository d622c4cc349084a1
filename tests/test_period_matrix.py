"""The utilization period is the fundamental, not a harmonic (issue 10): periods from 0.3 s to
10 min, at several sampling rates, phases and noise levels, as series and as nvidia-smi logs."""

from __future__ import annotations

import datetime as dt
from pathlib import Path

import numpy as np
import pytest

from traceforensics.analysis.monitoring.monitor import analyze_monitor
from traceforensics.analysis.utilization.patterns import SAWTOOTH_MAX_PERIOD_S, classify_utilization
from traceforensics.ingest.monitor import load_monitor_log

PERIODS_S = (0.3, 0.45, 0.9, 0.95, 1.3, 2.2, 4.7, 13.0, 47.0, 130.0, 600.0)
INTERVALS_S = (0.05, 0.1, 1.0, 5.0)
MAX_SAMPLES = 20_000


def _cases() -> list[tuple[float, float]]:
    """(period, interval) pairs a log can resolve: >= 6 samples a cycle, 5 cycles in reach."""
    return [
        (p, i) for p in PERIODS_S for i in INTERVALS_S if p >= 6 * i and 5 * p / i <= MAX_SAMPLES
    ]


def _expected(period: float) -> str:
    return "high_frequency_sawtooth" if period < SAWTOOTH_MAX_PERIOD_S else "low_frequency_tidal"


def _square(period: float, interval: float, phase: float, noise: float, seed: int) -> np.ndarray:
    n = int(min(max(8 * period / interval, 200), MAX_SAMPLES))
    t = np.arange(n) * interval + phase * period
    x = np.where((t % period) / period < 0.66, 95.0, 3.0)
    rng = np.random.default_rng(seed)
    return np.clip(x + rng.normal(0.0, noise, n), 0.0, 100.0)


@pytest.mark.parametrize(("period", "interval"), _cases())
def test_fundamental_period_of_swinging_utilization(period: float, interval: float) -> None:
    assert len(_cases()) >= 20  # the matrix really spans rates and periods
    for phase in (0.0, 0.37, 0.81):
        for noise in (0.0, 5.0, 12.0):
            r = classify_utilization(_square(period, interval, phase, noise, 7), interval)
            assert r.period_s is not None, (phase, noise, r.evidence)
            tolerance = max(0.1 * period, 1.5 * interval)
            assert abs(r.period_s - period) <= tolerance, (phase, noise, r.period_s)
            want = (
                "high_frequency_sawtooth"
                if period < SAWTOOTH_MAX_PERIOD_S
                else "low_frequency_tidal"
            )
            assert r.pattern == want, (phase, noise, r.pattern)


def test_half_saturated_and_sporadic_claim_no_swing() -> None:
    rng = np.random.default_rng(3)
    half = np.clip(50 + rng.normal(0, 6, 3000), 0, 100)
    assert classify_utilization(half, 1.0).pattern == "persistent_half_saturation"
    sporadic = np.clip(96 + rng.normal(0, 2, 3000), 0, 100)
    sporadic[rng.choice(3000, 40, replace=False)] = 2.0
    assert classify_utilization(sporadic, 1.0).pattern == "sporadic_drops"


def _smi_log(path: Path, period: float, interval: float, n: int) -> Path:
    t0 = dt.datetime(2025, 3, 21, 10, 0, 0)
    lines = ["timestamp, index, utilization.gpu [%], clocks.sm [MHz]"]
    for k in range(n):
        busy = ((k * interval) % period) / period < 0.66
        stamp = (t0 + dt.timedelta(seconds=k * interval)).strftime("%Y/%m/%d %H:%M:%S.%f")[:-3]
        lines.append(f"{stamp}, 0, {95 if busy else 3} %, {1980 if busy else 1410} MHz")
    path.write_text("\n".join(lines) + "\n")
    return path


@pytest.mark.parametrize(
    ("period", "interval", "n"),
    [(0.9, 0.1, 3000), (0.95, 0.1, 3000), (47.0, 1.0, 1200), (130.0, 5.0, 600)],
)
def test_period_through_an_nvidia_smi_log(
    tmp_path: Path, period: float, interval: float, n: int
) -> None:
    """The issue's case first: a 10 Hz log of a 0.9 s sawtooth (6 busy, 3 starved samples)."""
    log = load_monitor_log(_smi_log(tmp_path / "smi.csv", period, interval, n))
    (gpu,) = analyze_monitor(log).gpus
    found = gpu.pattern.period_s
    assert found is not None, gpu.pattern.evidence
    assert abs(found - period) <= max(0.1 * period, 1.5 * interval), found
    assert gpu.pattern.pattern == _expected(period)
