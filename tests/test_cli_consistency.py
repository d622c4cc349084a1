"""One set of numbers everywhere, and analysis-time input errors as one line naming the file."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from tests.conftest import nonempty, run_cli

EXAMPLE = Path(__file__).resolve().parents[1] / "examples" / "synthetic_training.pt.trace.json.gz"


def _write(path: Path, events: list[dict[str, object]]) -> Path:
    path.write_text(json.dumps({"traceEvents": events}))
    return path


def _kernel(ts: int, dur: int, corr: int) -> dict[str, object]:
    return {
        "ph": "X",
        "cat": "kernel",
        "name": "k",
        "pid": 0,
        "tid": 7,
        "ts": ts,
        "dur": dur,
        "args": {"device": 0, "stream": 7, "correlation": corr},
    }


def test_trace_window_with_only_zero_length_gpu_ops(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = _write(
        tmp_path / "zero.json",
        [
            {"ph": "X", "cat": "cpu_op", "name": "op", "pid": 1, "tid": 1, "ts": 100, "dur": 50},
            _kernel(120, 0, 1),
        ],
    )
    code, out, err = run_cli(
        ["analyze", "--json", "--no-cache", "--window", "trace", str(path)], capsys
    )
    assert code == 0, err
    for d in nonempty(json.loads(out)["devices"]):
        assert d["busy_ns"] == 0
        assert sum(d["idle_by_cause"].values()) == d["idle_ns"] == d["window_ns"]


def test_mixed_clocks_are_one_line_naming_the_file(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    epoch = 1_700_000_000_000_000
    path = _write(
        tmp_path / "mixed.json",
        [
            {"ph": "X", "cat": "cpu_op", "name": "a", "pid": 1, "tid": 1, "ts": 1, "dur": 5},
            {"ph": "X", "cat": "cpu_op", "name": "b", "pid": 1, "tid": 2, "ts": epoch, "dur": 5},
            _kernel(epoch + 20, 5, 1),
        ],
    )
    code, out, err = run_cli(["analyze", "--no-cache", str(path)], capsys)
    assert code == 2 and out == ""
    lines = err.strip().splitlines()
    assert len(lines) == 1 and "mixed.json" in lines[0] and "clocks" in lines[0]


@pytest.mark.parametrize("argv", [["--step-pattern", r"step(?=\d)"], ["--bin-ms", "1e-9"]])
def test_options_rejected_before_a_traceback(
    argv: list[str], capsys: pytest.CaptureFixture[str]
) -> None:
    code, _, err = run_cli(["analyze", "--no-cache", *argv, str(EXAMPLE)], capsys)
    assert code == 2 and len(err.strip().splitlines()) == 1 and argv[0] in err


def test_trace_window_terminal_shows_one_window(capsys: pytest.CaptureFixture[str]) -> None:
    code, out, _ = run_cli(["analyze", "--no-cache", "--window", "trace", str(EXAMPLE)], capsys)
    assert code == 0
    verdict = re.search(r"idle ([\d.]+)% of a ([\d.]+ \w+) window", out)
    devices = re.search(r"window ([\d.]+ \w+)\s+busy .*idle [\d.]+ \w+ \(([\d.]+)%\)", out)
    assert verdict and devices
    assert verdict.group(2) == devices.group(1)
    assert verdict.group(1) == devices.group(2)


def test_mfu_steps_use_the_step_table_windows(capsys: pytest.CaptureFixture[str]) -> None:
    code, out, _ = run_cli(["analyze", "--json", "--no-cache", str(EXAMPLE)], capsys)
    assert code == 0
    obj = json.loads(out)
    steps = {(s["start_ns"], s["dur_ns"]) for s in obj["steps"]}
    mfu = {(s["window_start_ns"], s["window_ns"]) for s in obj["mfu"]["steps"]}
    assert steps and mfu == steps
    for summary in nonempty(obj["step_summary"]):
        assert all(isinstance(summary[k], int) for k in ("mean_ns", "p50_ns", "p95_ns"))
