"""The analysis cache of ``tf analyze`` (issue 12: a repeat run on a big trace takes under 10 %
of the first): the same input and options read the finished analysis; anything changed
recomputes; a broken entry is ignored; --no-cache, --monitor and a part of the trace bypass it."""

from __future__ import annotations

import json
import os
import shutil
from pathlib import Path

import pytest

from tests.conftest import ROOT, run_cli

EXAMPLE = ROOT / "examples" / "synthetic_training.pt.trace.json.gz"


@pytest.fixture
def xdg(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    cache = tmp_path / "xdg-cache"
    monkeypatch.setenv("XDG_CACHE_HOME", str(cache))
    return cache


def _results(xdg: Path) -> list[Path]:
    root = xdg / "traceforensics" / "results"
    return sorted(root.iterdir()) if root.exists() else []


def _forbid_analysis(monkeypatch: pytest.MonkeyPatch) -> None:
    import traceforensics.cli.analyze as cli

    def boom(*_: object, **__: object) -> None:
        raise AssertionError("the analysis ran again")

    monkeypatch.setattr(cli, "analyze", boom)


def test_repeat_run_reads_the_finished_analysis(
    tmp_path: Path, xdg: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    trace = tmp_path / "t.pt.trace.json.gz"
    shutil.copyfile(EXAMPLE, trace)
    code, first, err = run_cli(["analyze", "--json", str(trace)], capsys)
    assert code == 0, err
    assert len(_results(xdg)) == 1
    code, text_first, _ = run_cli(["analyze", str(trace)], capsys)
    with monkeypatch.context() as m:
        _forbid_analysis(m)
        code, again, err = run_cli(["analyze", "--json", str(trace)], capsys)
        assert code == 0, err
        assert again == first
        code, text_again, _ = run_cli(["analyze", str(trace)], capsys)
        assert code == 0 and text_again == text_first
    # other options, a changed input: computed again, each with its own entry
    code, other, _ = run_cli(["analyze", "--json", "--window", "trace", str(trace)], capsys)
    assert code == 0 and json.loads(other)["devices"] != json.loads(first)["devices"]
    assert len(_results(xdg)) == 2
    os.utime(trace, ns=(1, 1))
    with monkeypatch.context() as m:
        _forbid_analysis(m)
        code, _, err = run_cli(["analyze", "--json", str(trace)], capsys)
        assert code == 3 and "the analysis ran again" in err  # the changed input missed


def test_broken_entry_is_recomputed(
    tmp_path: Path, xdg: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    trace = tmp_path / "t.json.gz"
    shutil.copyfile(EXAMPLE, trace)
    code, first, _ = run_cli(["analyze", "--json", str(trace)], capsys)
    (entry,) = _results(xdg)
    entry.write_bytes(b"not a pickle")
    code, again, err = run_cli(["analyze", "--json", str(trace)], capsys)
    assert code == 0 and again == first, err


def test_a_changed_entry_is_recomputed_not_served(
    tmp_path: Path, xdg: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """An entry changed where it still unpickles (another float: no pickle error) is never
    served: its first line, the SHA-256 of each part, no longer matches."""
    import pickletools

    trace = tmp_path / "t.json.gz"
    shutil.copyfile(EXAMPLE, trace)
    code, first, err = run_cli(["analyze", "--json", str(trace)], capsys)
    assert code == 0, err
    (entry,) = _results(xdg)
    data = bytearray(entry.read_bytes())
    body = data.index(b"\n") + 1
    floats = [
        pos
        for op, value, pos in pickletools.genops(bytes(data[body:]))
        if op.name == "BINFLOAT" and isinstance(value, float) and 0.01 < value < 1.0
    ]
    assert floats, "no float in the entry: nothing would be tested"
    for pos in floats:
        data[body + pos + 3] ^= 0x10  # a mantissa bit: another value, still a valid pickle
    entry.write_bytes(bytes(data))
    code, again, err = run_cli(["analyze", "--json", str(trace)], capsys)
    assert code == 0, err
    assert again == first


@pytest.mark.parametrize("extra", [["--no-cache"], ["--steps", "3:"]])
def test_bypassed(
    tmp_path: Path, xdg: Path, extra: list[str], capsys: pytest.CaptureFixture[str]
) -> None:
    trace = tmp_path / "t.json.gz"
    shutil.copyfile(EXAMPLE, trace)
    code, _, err = run_cli(["analyze", "--json", *extra, str(trace)], capsys)
    assert code == 0, err
    assert _results(xdg) == []


def test_a_run_the_cache_serves_reads_no_input(
    tmp_path: Path, xdg: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """A repeat run (``--json`` with an option, the text report) reads the finished analysis
    and the session entry, never the input; a damaged session entry is read from the input
    instead, the report unchanged, and written again whole."""
    from traceforensics import ingest
    from traceforensics.cache import read_parts

    trace = tmp_path / "t.pt.trace.json.gz"
    shutil.copyfile(EXAMPLE, trace)
    argv = ["analyze", "--json", "--top", "3", str(trace)]
    code, first, err = run_cli(argv, capsys)
    assert code == 0 and json.loads(first)["event_count"] > 0, err
    text = ["analyze", "--top", "3", str(trace)]
    code, text_first, _ = run_cli([*text, "--no-cache"], capsys)

    def no_load(*_: object, **__: object) -> None:
        raise AssertionError("the input was read")

    with monkeypatch.context() as m:
        _forbid_analysis(m)
        m.setattr(ingest, "_load_uncached", no_load)
        assert run_cli(argv, capsys)[1] == first
        code, text_again, err = run_cli(text, capsys)
        assert code == 0 and text_again == text_first, err
    (entry,) = (xdg / "traceforensics" / "sessions").iterdir()
    entry.write_bytes(entry.read_bytes()[:-100])
    code, text_again, err = run_cli(text, capsys)
    assert code == 0 and text_again == text_first, err
    assert set(read_parts(entry, ("meta", "events", "args"))) == {"meta", "events", "args"}


def test_a_run_the_cache_serves_imports_no_trace_reader(tmp_path: Path) -> None:
    """Nor does it import the Kineto reader (a fresh interpreter: this one has it)."""
    import subprocess
    import sys

    trace = tmp_path / "t.pt.trace.json.gz"
    shutil.copyfile(EXAMPLE, trace)
    code = (
        "import sys\n"
        "from traceforensics.cli.main import main\n"
        "try:\n"
        f"    main(['analyze', '--json', {str(trace)!r}])\n"
        "except SystemExit as exc:\n"
        "    assert not exc.code, exc.code\n"
        "sys.stderr.write(str('traceforensics.ingest.kineto' in sys.modules))\n"
    )
    env = os.environ | {"XDG_CACHE_HOME": str(tmp_path / "cache")}
    runs = [
        subprocess.run(
            [sys.executable, "-c", code], check=False, capture_output=True, text=True, env=env
        )
        for _ in range(2)
    ]
    assert [r.returncode for r in runs] == [0, 0], runs[-1].stderr
    assert [r.stderr[-5:].strip() for r in runs] == ["True", "False"]
    assert runs[1].stdout == runs[0].stdout
