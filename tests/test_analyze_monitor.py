"""`tf analyze TRACE --monitor LOG`: the log is aligned with the trace by wall-clock time."""

from __future__ import annotations

import datetime as dt
import json
from pathlib import Path

import pytest

from traceforensics import load
from traceforensics.analysis.utilization import trace_window
from traceforensics.cli.main import main

EXAMPLE = Path(__file__).resolve().parents[1] / "examples" / "synthetic_training.pt.trace.json.gz"


def _write_smi_csv(path: Path, start_ns: int, n: int, step_ms: int) -> list[int]:
    """An nvidia-smi --query-gpu CSV with millisecond timestamps; returns the sample times (ns)
    as written (truncated to the millisecond, as the log carries them)."""
    times = [(start_ns + i * step_ms * 1_000_000) // 1_000_000 * 1_000_000 for i in range(n)]
    lines = ["timestamp, index, utilization.gpu [%], clocks.sm [MHz], temperature.gpu"]
    for i, t in enumerate(times):
        stamp = dt.datetime.fromtimestamp(t / 1e9, tz=dt.UTC).strftime("%Y/%m/%d %H:%M:%S.%f")
        lines.append(f"{stamp[:-3]}, 0, {90 if i % 2 else 10} %, 1800 MHz, 60")
    path.write_text("\n".join(lines) + "\n")
    return times


def _analyze(argv: list[str], capsys: pytest.CaptureFixture[str]) -> dict[str, object]:
    try:
        main(["analyze", "--json", "--no-cache", *argv])
    except SystemExit as exc:
        assert exc.code in (0, None)
    out = capsys.readouterr().out
    result: dict[str, object] = json.loads(out)
    return result


def test_log_is_clipped_to_the_trace_window(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    session = load(str(EXAMPLE))
    assert session.meta.clock_is_wall
    lo, hi = trace_window(session)
    # 2 s of 10 ms samples starting 1 s before the trace: only those within 5 samples
    # (50 ms) of the ~16 ms trace window may remain
    times = _write_smi_csv(tmp_path / "smi.csv", lo - 1_000_000_000, 200, 10)
    obj = _analyze(["--monitor", str(tmp_path / "smi.csv"), str(EXAMPLE)], capsys)
    mon = obj["monitor"]
    assert isinstance(mon, dict) and mon["schema"] == "traceforensics.monitor/1"
    expected = sum(1 for t in times if lo - 50_000_000 <= t < hi + 50_000_000)
    (gpu,) = mon["gpus"]
    assert gpu["samples"] == expected
    assert 0 < expected < len(times)
    assert obj["warnings"] == []


def test_log_outside_the_trace_is_shown_whole_with_a_warning(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    session = load(str(EXAMPLE))
    lo, _ = trace_window(session)
    _write_smi_csv(tmp_path / "smi.csv", lo + 3_600_000_000_000, 30, 1000)
    obj = _analyze(["--monitor", str(tmp_path / "smi.csv"), str(EXAMPLE)], capsys)
    (gpu,) = obj["monitor"]["gpus"]  # type: ignore[index]
    assert gpu["samples"] == 30
    warnings = obj["warnings"]
    assert isinstance(warnings, list) and any("not aligned" in w for w in warnings)
