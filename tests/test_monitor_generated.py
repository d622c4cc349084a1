"""Generated logs (tools/make_monitor_logs.py) in every format x every pattern: the analysis
must find the injected pattern and throttle window, and never call idle down-clocking
throttling."""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path
from types import ModuleType
from typing import Any

import numpy as np
import pytest

from tests.conftest import nonempty
from traceforensics.analysis.monitoring.monitor import (
    THROTTLE_MAX_CLOCK_RATIO,
    MonitorReport,
    analyze_monitor,
)
from traceforensics.ingest.monitor import load_monitor_log
from traceforensics.model.monitor import gpu_rows

ROOT = Path(__file__).resolve().parents[1]


def _generator() -> ModuleType:
    spec = importlib.util.spec_from_file_location(
        "make_monitor_logs", ROOT / "tools" / "make_monitor_logs.py"
    )
    assert spec is not None and spec.loader is not None
    mod = importlib.util.module_from_spec(spec)
    sys.modules["make_monitor_logs"] = mod
    spec.loader.exec_module(mod)
    return mod


@pytest.fixture(scope="module")
def generated(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, list[dict[str, Any]]]:
    out = tmp_path_factory.mktemp("monitor_logs")
    return out, _generator().generate(out, seed=0)


def _load(out: Path, entry: dict[str, Any]) -> tuple[Any, MonitorReport]:
    # dcgmi dmon prints no timestamps: the sample interval comes from the command line
    interval = entry["interval_s"] if entry["format"] == "dcgmi" else None
    log = load_monitor_log(out / entry["file"], entry["columns"], interval)
    return log, analyze_monitor(log)


def test_every_format_and_pattern_is_generated(
    generated: tuple[Path, list[dict[str, Any]]],
) -> None:
    _out, manifest = generated
    formats = {m["format"] for m in manifest}
    assert formats == {
        "smi_csv",
        "smi_csv_nounits",
        "smi_dmon",
        "dcgmi",
        "table_zh",
        "table_custom",
    }
    scenarios = {m["scenario"] for m in manifest}
    assert len(scenarios) == 7


def test_patterns_and_throttle_episodes_match_the_injected_truth(
    generated: tuple[Path, list[dict[str, Any]]],
) -> None:
    out, manifest = generated
    for entry in nonempty(manifest):
        log, report = _load(out, entry)
        assert {str(g.gpu) for g in report.gpus} == set(entry["gpus"]), entry["file"]
        for g in nonempty(report.gpus):
            truth = entry["gpus"][str(g.gpu)]
            assert g.pattern.pattern == truth["pattern"], (entry["file"], g.gpu)
            window = truth["throttle_s"]
            if window is None:
                assert g.throttle_episodes == [], (entry["file"], g.gpu)
                continue
            assert len(g.throttle_episodes) == 1, entry["file"]
            ep = g.throttle_episodes[0]
            tol = 2 * entry["interval_s"]
            assert abs(ep.start - window[0]) <= tol and abs(ep.end - window[1]) <= tol
            assert ep.reason == truth["reason"]
            # independent: mean clock of the raw rows inside the window
            rows = gpu_rows(log.frame, g.gpu)
            t = (rows.get_column("time_ns").to_numpy() - rows.get_column("time_ns").min()) / 1e9
            inside = (t >= window[0]) & (t < window[1])
            raw_clock = rows.get_column("sm_clock_mhz").to_numpy()[inside].mean()
            assert ep.sm_clock_mhz == pytest.approx(raw_clock, rel=0.02)


def test_idle_down_clocking_is_never_throttling(
    generated: tuple[Path, list[dict[str, Any]]],
) -> None:
    out, manifest = generated
    checked = 0
    for entry in manifest:
        log, report = _load(out, entry)
        for g in report.gpus:
            rows = gpu_rows(log.frame, g.gpu)
            util = rows.get_column("util_pct").to_numpy()
            clock = rows.get_column("sm_clock_mhz").to_numpy()
            down = np.sum((util < 20) & (clock < THROTTLE_MAX_CLOCK_RATIO * np.nanmax(clock)))
            if down == 0:
                continue
            checked += 1
            assert g.idle_downclock_samples > 0
            if entry["gpus"][str(g.gpu)]["throttle_s"] is None:
                assert g.throttle_episodes == [], entry["file"]
            for ep in g.throttle_episodes:
                assert ep.util_mean >= 80
    assert checked >= 10  # tidal, sawtooth and idle GPUs in every format down-clock


def test_statistics_and_memory_trend_against_raw_rows(
    generated: tuple[Path, list[dict[str, Any]]],
) -> None:
    out, manifest = generated
    entry = next(m for m in manifest if m["file"] == "smi_csv_sporadic_drops.csv")
    log, report = _load(out, entry)
    g = report.gpus[0]
    util = [v for v in gpu_rows(log.frame, 0).get_column("util_pct").to_list() if v is not None]
    assert g.util_mean == pytest.approx(sum(util) / len(util))
    assert g.samples == len(util)
    # 3000 MiB injected over 600 s = 18000 MiB/h
    assert g.mem_trend_mib_per_h == pytest.approx(18_000, rel=0.05)
    assert any("MiB/h" in f for f in g.findings)
    assert g.pattern.drop_count >= 4
