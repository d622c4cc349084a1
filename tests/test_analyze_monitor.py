"""`tf analyze TRACE --monitor LOG`: the log is aligned with the trace by wall-clock time."""

from __future__ import annotations

import datetime as dt
import json
from pathlib import Path

import pytest

from traceforensics import load
from traceforensics.analysis.context import prepare
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
    lo, hi = prepare(session).trace_span
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
    lo, _ = prepare(session).trace_span
    _write_smi_csv(tmp_path / "smi.csv", lo + 3_600_000_000_000, 30, 1000)
    obj = _analyze(["--monitor", str(tmp_path / "smi.csv"), str(EXAMPLE)], capsys)
    (gpu,) = obj["monitor"]["gpus"]  # type: ignore[index]
    assert gpu["samples"] == 30
    warnings = obj["warnings"]
    assert isinstance(warnings, list) and any("not aligned" in w for w in warnings)


def test_local_time_log_aligns_with_its_utc_offset(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    session = load(str(EXAMPLE))
    lo, hi = prepare(session).trace_span
    eight_hours = 8 * 3600 * 1_000_000_000
    # nvidia-smi on a UTC+8 machine: the same instants, printed 8 h ahead
    times = _write_smi_csv(tmp_path / "smi.csv", lo - 1_000_000_000 + eight_hours, 200, 10)
    log = str(tmp_path / "smi.csv")
    aligned = _analyze(["--monitor", log, "--log-utc-offset", "+08:00", str(EXAMPLE)], capsys)
    (gpu,) = aligned["monitor"]["gpus"]  # type: ignore[index]
    utc = [t - eight_hours for t in times]
    assert gpu["samples"] == sum(1 for t in utc if lo - 50_000_000 <= t < hi + 50_000_000)
    assert aligned["warnings"] == []
    naive = _analyze(["--monitor", log, str(EXAMPLE)], capsys)
    assert any("not aligned" in w for w in naive["warnings"])  # type: ignore[union-attr]


@pytest.mark.parametrize(
    ("text", "hours"),
    [("+08:00", 8.0), ("-05:00", -5.0), ("+0530", 5.5), ("UTC", 0.0), ("UTC+8", 8.0), ("-5", -5.0)],
)
def test_utc_offset_parsing(text: str, hours: float) -> None:
    from traceforensics.ingest.monitor import parse_utc_offset

    assert parse_utc_offset(text) == round(hours * 3600 * 1e9)


@pytest.mark.parametrize("text", ["+25:00", "tomorrow", "+08:75"])
def test_bad_utc_offset_is_one_line(text: str, capsys: pytest.CaptureFixture[str]) -> None:
    try:
        main(
            [
                "analyze",
                "--no-cache",
                "--monitor",
                str(EXAMPLE),
                "--log-utc-offset",
                text,
                str(EXAMPLE),
            ]
        )
    except SystemExit as exc:
        assert exc.code == 2
    err = capsys.readouterr().err
    assert len(err.strip().splitlines()) == 1 and "--log-utc-offset" in err
