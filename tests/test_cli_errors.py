"""Bad input ends with exit code 2 and one clear line naming the file — never a traceback."""

from __future__ import annotations

import gzip
import sqlite3
from pathlib import Path

import pytest

from traceforensics.cli.main import main


def _run(argv: list[str], capsys: pytest.CaptureFixture[str]) -> tuple[int, str, str]:
    with pytest.raises(SystemExit) as exc:
        main(argv)
    out, err = capsys.readouterr()
    code = exc.value.code
    return (code if isinstance(code, int) else 1), out, err


def _bad_inputs(tmp: Path) -> dict[str, Path]:
    files: dict[str, Path] = {}
    p = tmp / "not_json.json"
    p.write_text("this is not json at all\n")
    files["not_json"] = p
    p = tmp / "truncated.json.gz"
    p.write_bytes(gzip.compress(b'{"traceEvents": [' + b'{"ph": "X"},' * 2000)[:200])
    files["truncated_gzip"] = p
    p = tmp / "not_a_trace.json"
    p.write_text('{"hello": "world", "items": [1, 2, 3]}')
    files["json_not_trace"] = p
    p = tmp / "empty.json"
    p.write_bytes(b"")
    files["empty"] = p
    p = tmp / "broken_structure.json"
    p.write_text('{"traceEvents": [')
    files["broken_json"] = p
    p = tmp / "random.bin"
    p.write_bytes(bytes(range(256)) * 4)
    files["binary"] = p
    p = tmp / "other.sqlite"
    con = sqlite3.connect(p)
    con.execute("CREATE TABLE people (name TEXT)")
    con.commit()
    con.close()
    files["sqlite_not_nsys"] = p
    files["missing"] = tmp / "does_not_exist.json"
    return files


@pytest.mark.parametrize(
    "case",
    [
        "not_json",
        "truncated_gzip",
        "json_not_trace",
        "empty",
        "broken_json",
        "binary",
        "sqlite_not_nsys",
        "missing",
    ],
)
def test_bad_input_exits_2_with_one_line(
    case: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = _bad_inputs(tmp_path)[case]
    code, out, err = _run(["analyze", "--no-cache", str(path)], capsys)
    assert code == 2, err
    assert out == ""
    lines = err.strip().splitlines()
    assert len(lines) == 1, err
    assert "Traceback" not in err
    assert path.name in lines[0]


def test_bad_input_with_json_flag_still_exits_2(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = _bad_inputs(tmp_path)["not_json"]
    code, out, err = _run(["analyze", "--json", "--no-cache", str(path)], capsys)
    assert code == 2 and out == "" and path.name in err


def test_empty_directory_is_an_input_error(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    code, _, err = _run(["analyze", "--no-cache", str(tmp_path)], capsys)
    assert code == 2 and str(tmp_path) in err


def test_a_polars_panic_is_one_line_and_exit_3(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """A panic inside polars (``PanicException`` is a ``BaseException``, not an ``Exception``:
    a corrupt cached Parquet page raised one) is an internal error: one line, exit 3, no
    traceback."""
    import polars as pl

    import traceforensics.cli.analyze as cli

    def panics(*_: object, **__: object) -> None:
        raise pl.exceptions.PanicException("index out of bounds")

    monkeypatch.setattr(cli, "analyze", panics)
    example = Path(__file__).resolve().parents[1] / "examples/synthetic_training.pt.trace.json.gz"
    code, _, err = _run(["analyze", str(example), "--no-cache"], capsys)
    assert code == 3
    assert err.splitlines() == [
        "tf: internal error: PanicException: index out of bounds (set TF_DEBUG=1 for a traceback)"
    ]
