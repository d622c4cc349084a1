"""Bad nsys input and ``.nsys-rep`` handling (with a stand-in ``nsys`` on PATH)."""

from __future__ import annotations

import os
import sqlite3
import sys
from pathlib import Path

import pytest

from tests.conftest import FIXTURES
from traceforensics.ingest import load_path
from traceforensics.ingest.nsys import export
from traceforensics.model.errors import (
    CorruptTraceError,
    InputError,
    ToolMissingError,
    UnsupportedFormatError,
)

MODERN = FIXTURES / "nsys" / "modern.sqlite"


def _one_line(err: BaseException, path: Path) -> str:
    text = str(err)
    assert "\n" not in text and str(path) in text
    return text


def test_sqlite_that_is_not_an_nsys_export(tmp_path: Path) -> None:
    path = tmp_path / "app.sqlite"
    with sqlite3.connect(path) as conn:
        conn.execute("CREATE TABLE users (id INTEGER, name TEXT)")
    with pytest.raises(UnsupportedFormatError) as info:
        load_path(path)
    assert "not an Nsight Systems export" in _one_line(info.value, path)


@pytest.mark.parametrize("damage", ["garbage", "truncated"])
def test_corrupt_sqlite(tmp_path: Path, damage: str) -> None:
    path = tmp_path / "broken.sqlite"
    data = MODERN.read_bytes()
    if damage == "garbage":  # valid magic, garbage everywhere else
        data = data[:16] + bytes((i * 7) % 251 for i in range(len(data) - 16))
    else:  # cut inside the table pages
        data = data[: len(data) // 3]
    path.write_bytes(data)
    with pytest.raises(CorruptTraceError) as info:
        load_path(path)
    _one_line(info.value, path)


def _stand_in_nsys(bin_dir: Path, log: Path, *, fail: bool = False) -> None:
    """An ``nsys`` that logs its argv and 'exports' by copying the modern fixture."""
    bin_dir.mkdir(exist_ok=True)
    script = bin_dir / "nsys"
    body = (
        "import sys, shutil\n"
        "args = sys.argv[1:]\n"
        f"open({str(log)!r}, 'a').write(' '.join(args) + '\\n')\n"
        + (
            "sys.stderr.write('Error: report is truncated\\n'); sys.exit(1)\n"
            if fail
            else f"shutil.copy({str(MODERN)!r}, args[args.index('--output') + 1])\n"
        )
    )
    script.write_text(f"#!{sys.executable}\n{body}", encoding="utf-8")
    script.chmod(0o755)


def _report(tmp_path: Path) -> Path:
    report = tmp_path / "reports" / "run1.nsys-rep"
    report.parent.mkdir()
    report.write_bytes(b"NSYS-REP stand-in, not parsed by the test")
    return report


def test_nsys_rep_exports_once_and_reuses_the_cache(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    log = tmp_path / "nsys.log"
    _stand_in_nsys(tmp_path / "bin", log)
    monkeypatch.setenv("PATH", str(tmp_path / "bin"))
    report = _report(tmp_path)
    # progress is for a person at a terminal (piped stderr keeps one line per error)
    monkeypatch.setattr(sys.stderr, "isatty", lambda: True)
    session = load_path(report)
    assert "exporting run1.nsys-rep" in capsys.readouterr().err
    direct = load_path(MODERN)
    assert session.events.equals(direct.events)
    assert session.meta.inputs[0].format == "nsys-rep"
    assert session.meta.inputs[0].path == str(report)
    calls = log.read_text().splitlines()
    assert len(calls) == 1 and calls[0].startswith("export --type sqlite")
    assert calls[0].endswith(str(report))
    cached = report.parent / ("run1.nsys-rep" + export.CACHE_SUFFIX)
    assert cached.is_file()

    load_path(report)  # unchanged report: the cached export is reused
    assert len(log.read_text().splitlines()) == 1
    assert capsys.readouterr().err == ""

    st = report.stat()
    os.utime(report, ns=(st.st_atime_ns, st.st_mtime_ns + 5_000_000_000))
    load_path(report)  # changed report: exported again
    assert len(log.read_text().splitlines()) == 2
    assert not list(report.parent.glob("*.partial.sqlite"))


def test_nsys_rep_cache_falls_back_to_user_cache_dir(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    _stand_in_nsys(tmp_path / "bin", tmp_path / "nsys.log")
    monkeypatch.setenv("PATH", str(tmp_path / "bin"))
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "xdg"))
    monkeypatch.setattr(export, "_writable", lambda _folder: False)  # folder not writable
    report = _report(tmp_path)
    load_path(report)
    assert list((tmp_path / "xdg" / "traceforensics" / "nsys").glob("run1-*.tf.sqlite"))
    assert [p.name for p in report.parent.iterdir()] == ["run1.nsys-rep"]


def test_nsys_rep_without_nsys(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    empty = tmp_path / "empty-bin"
    empty.mkdir()
    monkeypatch.setenv("PATH", str(empty))
    report = _report(tmp_path)
    with pytest.raises(ToolMissingError) as info:
        load_path(report)
    text = _one_line(info.value, report)
    manual = report.with_suffix(".sqlite")
    command = f"nsys export --type sqlite --force-overwrite true --output {manual} {report}"
    assert command in text
    assert isinstance(info.value, InputError)


def test_nsys_rep_export_failure(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    _stand_in_nsys(tmp_path / "bin", tmp_path / "nsys.log", fail=True)
    monkeypatch.setenv("PATH", str(tmp_path / "bin"))
    report = _report(tmp_path)
    with pytest.raises(CorruptTraceError) as info:
        load_path(report)
    assert "report is truncated" in _one_line(info.value, report)
    assert [p.name for p in report.parent.iterdir()] == ["run1.nsys-rep"]


def test_missing_file(tmp_path: Path) -> None:
    with pytest.raises(InputError):
        load_path(tmp_path / "nope.sqlite")
