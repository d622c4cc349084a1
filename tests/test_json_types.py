"""Every JSON field is a plain JSON type, with every option (issue 10: a throttling monitoring
log used to crash ``tf analyze --json`` on a numpy float)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

import make_monitor_logs
import traceforensics
from tests.conftest import nonempty, run_cli

EXAMPLE = Path(__file__).resolve().parents[1] / "examples/synthetic_training.pt.trace.json.gz"
PLAIN = (str, int, float, bool, type(None))

OPTION_SETS = [
    [],
    ["--window", "trace"],
    ["--step-window", "annotation"],
    ["--top", "0", "--gaps", "0"],
    ["--short-kernel-us", "50", "--peak-tflops", "100"],
    ["--bin-ms", "5"],
    ["--step-pattern", "ProfilerStep", "--data-pattern", "loader"],
]


def _columns(log: Path) -> list[str]:
    """The column mapping the custom-header logs need (as a user would pass it)."""
    return ["--columns", make_monitor_logs.CUSTOM_COLUMNS] if "custom" in log.name else []


def _plain_paths(obj: Any, where: str = "") -> list[str]:
    """Paths of values that are not plain JSON types (numpy scalars, tuples, ...)."""
    if isinstance(obj, dict):
        bad = [f"{where}/{k!r} (key)" for k in obj if not isinstance(k, str)]
        return bad + [p for k, v in obj.items() for p in _plain_paths(v, f"{where}/{k}")]
    if isinstance(obj, list):
        return [p for i, v in enumerate(obj) for p in _plain_paths(v, f"{where}[{i}]")]
    return [] if type(obj) in PLAIN else [f"{where}: {type(obj).__name__}"]


@pytest.fixture(scope="module")
def logs(tmp_path_factory: pytest.TempPathFactory) -> list[Path]:
    out = tmp_path_factory.mktemp("logs")
    make_monitor_logs.generate(out, seed=3, n=120)
    return nonempty(sorted(p for p in out.iterdir() if "throttle" in p.name))


@pytest.mark.parametrize("argv", OPTION_SETS, ids=lambda a: " ".join(a) or "defaults")
def test_cli_json_with_every_option(argv: list[str], capsys: pytest.CaptureFixture[str]) -> None:
    code, out, err = run_cli(["analyze", str(EXAMPLE), "--json", "--no-cache", *argv], capsys)
    assert code == 0, err
    assert _plain_paths(json.loads(out)) == []


def test_cli_json_with_throttling_monitor_logs(
    logs: list[Path], capsys: pytest.CaptureFixture[str]
) -> None:
    episodes = 0
    for log in logs:
        for extra in ([], ["--log-utc-offset", "+08:00"]):
            argv = ["analyze", str(EXAMPLE), "--json", "--no-cache", "--monitor", str(log)]
            code, out, err = run_cli([*argv, *_columns(log), *extra], capsys)
            assert code == 0, (log.name, err)
            doc = json.loads(out)
            assert doc["monitor"]["gpus"], log.name
            code, out, err = run_cli(["monitor", str(log), "--json", *_columns(log)], capsys)
            assert code == 0, (log.name, err)
            episodes += sum(len(g["throttle_episodes"]) for g in json.loads(out)["gpus"])
    assert episodes > 0, "no throttle episode in any log: the crash path was not exercised"


def test_library_to_json_is_plain(logs: list[Path]) -> None:
    """The library object itself (notebooks serialise it with the stdlib json)."""
    for log in logs:
        cols = make_monitor_logs.CUSTOM_COLUMNS if "custom" in log.name else None
        parsed = traceforensics.load_monitor_log(log, columns=cols)
        doc = traceforensics.analyze(EXAMPLE, monitor=parsed, window="trace").to_json()
        assert _plain_paths(doc) == [], log.name
        json.dumps(doc, allow_nan=False)
