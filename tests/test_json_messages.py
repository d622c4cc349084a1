"""Kineto JSON that cannot be read says what is actually wrong (issue 10: every rejection used to
say "may be truncated"), NaN literals are read, and a file too big for memory is refused before
it is read."""

from __future__ import annotations

import json
import warnings
from pathlib import Path

import pytest

from tests.conftest import run_cli
from traceforensics.ingest.kineto.reader import MEMORY_PER_JSON_BYTE
from traceforensics.model.memory import available_memory

GOOD = {"traceEvents": [{"ph": "X", "cat": "kernel", "name": "k", "pid": 0, "tid": 7, "ts": 1.0,
        "dur": 2.0, "args": {"device": 0, "stream": 7}}]}  # fmt: skip
CASES = {
    "truncated": (json.dumps(GOOD)[:-9].encode(), "truncated"),
    "invalid utf-8": (json.dumps(GOOD).replace('"k"', '"\xff"').encode("latin-1"), "not UTF-8"),
    "lone surrogate": (json.dumps(GOOD).replace('"k"', '"\\ud800"').encode(), "not UTF-8"),
    "too deep": (b"[" * 5000 + b"]" * 5000, "nests deeper"),
    "garbage inside": (json.dumps(GOOD).replace('"k"', "@").encode(), "damaged"),
}


@pytest.mark.parametrize("case", list(CASES))
def test_unreadable_json_names_the_problem(
    tmp_path: Path, case: str, capsys: pytest.CaptureFixture[str]
) -> None:
    data, words = CASES[case]
    path = tmp_path / "t.json"
    path.write_bytes(data)
    code, out, err = run_cli(["analyze", str(path), "--no-cache"], capsys)
    assert code == 2 and out == ""
    assert len(err.strip().splitlines()) == 1 and words in err, err
    if case != "truncated":
        assert "truncated" not in err, err


def test_nan_literals_are_read(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    text = json.dumps(GOOD).replace('"stream": 7}', '"stream": 7, "occupancy": NaN}')
    path = tmp_path / "nan.json"
    path.write_text(text)
    code, out, err = run_cli(["analyze", str(path), "--no-cache", "--json"], capsys)
    assert code == 0, err
    assert any("NaN" in w for w in json.loads(out)["warnings"])


def test_a_file_too_big_for_memory_is_refused_before_reading(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """A sparse file: it costs no disk, and it must cost no memory either."""
    free = available_memory()
    assert free is not None
    size = free // MEMORY_PER_JSON_BYTE * 2 + (1 << 30)
    path = tmp_path / "huge.json"
    with path.open("wb") as fh:
        fh.write(b'{"traceEvents": [')
        fh.truncate(size)
    code, out, err = run_cli(["analyze", str(path), "--no-cache"], capsys)
    assert code == 2 and out == ""
    assert len(err.strip().splitlines()) == 1 and "GiB of memory" in err, err


def test_a_huge_timestamp_is_one_line_and_no_warning(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """1e306 µs overflows float64 when scaled to ns; that must be the refusal, not a numpy
    RuntimeWarning printed above it (warnings are errors here, so one would fail the run)."""
    path = tmp_path / "huge.json"
    path.write_text(json.dumps(GOOD).replace('"ts": 1.0', '"ts": 1e306'))
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        code, out, err = run_cli(["analyze", str(path), "--no-cache"], capsys)
    assert code == 2 and out == ""
    assert len(err.strip().splitlines()) == 1 and "does not fit" in err, err
