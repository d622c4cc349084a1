"""``tf monitor`` command: JSON contract, text report, plot, and errors."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from click.testing import CliRunner

from tests.conftest import run_cli
from traceforensics.cli.monitor import monitor_command
from traceforensics.model.errors import OptionError

FIXTURE = Path(__file__).parent / "fixtures" / "monitor" / "runbook_zh_1hz.txt"
GPU_KEYS = {
    "gpu",
    "samples",
    "span_s",
    "pattern",
    "period_s",
    "util_mean",
    "util_p50",
    "throttle_episodes",
    "findings",
}
EPISODE_KEYS = {"start", "end", "reason", "sm_clock_mhz", "temperature_c", "power_w"}


def test_json_on_the_chinese_runbook_log() -> None:
    result = CliRunner().invoke(monitor_command, [str(FIXTURE), "--json"])
    assert result.exit_code == 0, result.output
    doc = json.loads(result.output)
    assert doc["schema"] == "traceforensics.monitor/1"
    (gpu,) = doc["gpus"]
    assert set(gpu) >= GPU_KEYS
    assert gpu["samples"] == 6 and gpu["span_s"] == 5.0
    values = [float(ln.split()[2]) for ln in FIXTURE.read_text("utf-8").splitlines()[1:]]
    assert gpu["util_mean"] == round(sum(values) / 6, 2)
    assert gpu["util_p50"] == round(sorted(values)[2] / 2 + sorted(values)[3] / 2, 2)
    # six samples: the report says a period cannot be claimed instead of guessing one
    assert gpu["period_s"] is None and gpu["pattern"] == "insufficient_data"
    assert any("too few" in f and "period" in f for f in gpu["findings"])
    # 345 MHz at 0.3% and 1210 MHz at 12.5% are idle down-clocking, not throttling
    assert gpu["throttle_episodes"] == []
    assert gpu["idle_downclock_samples"] == 2


def test_text_report_and_plot(tmp_path: Path) -> None:
    log = tmp_path / "smi.csv"
    rows = [
        "timestamp, index, utilization.gpu [%], clocks.sm [MHz], clocks.max.sm [MHz], "
        "temperature.gpu, power.draw [W], power.limit [W]"
    ]
    for i in range(120):
        hot = 40 <= i < 60
        rows.append(
            f"2025/03/21 10:{i // 60:02d}:{i % 60:02d}.000, 0, 97 %, "
            f"{1300 if hot else 1980} MHz, 1980 MHz, {70}, {395 if hot else 300} W, 400 W"
        )
    log.write_text("\n".join(rows) + "\n", "utf-8")
    png = tmp_path / "m.png"
    result = CliRunner().invoke(monitor_command, [str(log), "--plot", str(png)])
    assert result.exit_code == 0, result.output
    assert "GPU 0" in result.output and "power" in result.output
    assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    doc = json.loads(CliRunner().invoke(monitor_command, [str(log), "--json"]).output)
    (ep,) = doc["gpus"][0]["throttle_episodes"]
    assert set(ep) >= EPISODE_KEYS
    assert (ep["start"], ep["end"], ep["reason"]) == (40.0, 60.0, "power")  # 395 of 400 W
    assert ep["reason_source"] == "inferred"


def test_bad_log_raises_input_error(tmp_path: Path) -> None:
    bad = tmp_path / "x.txt"
    bad.write_text("a b c\n1 2 3\n", "utf-8")
    result = CliRunner().invoke(monitor_command, [str(bad)])
    assert isinstance(result.exception, OptionError)
    assert result.exception.option == "columns" and "--" not in str(result.exception)


def test_bad_log_message_names_the_flag(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """On the command line the same error ends with the flag that fixes it."""
    bad = tmp_path / "x.txt"
    bad.write_text("a b c\n1 2 3\n", "utf-8")
    code, out, err = run_cli(["monitor", str(bad)], capsys)
    assert code == 2 and out == ""
    assert len(err.strip().splitlines()) == 1 and err.strip().endswith("(--columns)")
