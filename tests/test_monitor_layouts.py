"""Monitoring logs whose rows do not match their header (issue 10): mixed separators, short
and long rows. Each is read (bad rows skipped and counted) or refused with one line, never an
internal error."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.conftest import run_cli

LOGS = {
    "smi mixed separators": (
        "timestamp, index, utilization.gpu [%]\n2025/03/21 10:00:01.000, 0, 50 %\n"
        "2025/03/21 10:00:02.000; 0; 60 %\n2025/03/21 10:00:03.000, 0, 70 %, extra\n"
        "2025/03/21 10:00:04.000\n",
        [],
    ),
    "csv short first row": ("a,b,c\n1,2\n3,4,5,6\n7,8,9\n", ["--columns", "util=b"]),
    "csv rows of every length": ("time,util\n1,50\n2;60\n3\t70\n4,80,90\n5\n", []),
    "table ragged": ("time util\n1 50\n2 60 70\n3\n4 80\n", []),
    "csv no row fits": ("a,b,c\n1,2\n3,4,5,6\n", ["--columns", "util=b"]),
}


@pytest.mark.parametrize("case", list(LOGS))
def test_ragged_logs(tmp_path: Path, case: str, capsys: pytest.CaptureFixture[str]) -> None:
    text, extra = LOGS[case]
    path = tmp_path / "log.csv"
    path.write_text(text)
    code, out, err = run_cli(["monitor", str(path), *extra], capsys)
    assert "internal error" not in err, err
    assert code in (0, 2), err
    if code == 2:
        assert len(err.strip().splitlines()) == 1 and str(path) in err, err
    else:
        assert "GPU 0" in out
    assert path.read_text() == text
