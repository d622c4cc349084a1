"""Issue 45, item 2: one cache (``traceforensics.cache``), one entry format, one integrity rule;
the repeat ``--json`` answer (replay) is a part of the analysis entry, not an entry of its own."""

from __future__ import annotations

import io
import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import polars as pl
import pytest

from tests.conftest import ROOT, run_cli
from traceforensics.cache import read_parts

EXAMPLE = ROOT / "examples" / "synthetic_training.pt.trace.json.gz"


@pytest.fixture
def xdg(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    cache = tmp_path / "xdg"
    monkeypatch.setenv("XDG_CACHE_HOME", str(cache))
    return cache


def _entries(xdg: Path) -> list[Path]:
    return sorted(p for p in (xdg / "traceforensics").rglob("*") if p.is_file())


def _tf(args: list[str], xdg: Path) -> subprocess.CompletedProcess[bytes]:
    """``tf ARGS`` through the console script (where the replay answers)."""
    script = (
        "import sys; sys.argv = ['tf', *sys.argv[1:]]\n"
        "from traceforensics.cli.entry import main\nmain()\n"
    )
    env = os.environ | {"XDG_CACHE_HOME": str(xdg)}
    return subprocess.run(
        [sys.executable, "-c", script, *args], capture_output=True, env=env, check=False
    )


def test_the_replay_is_a_part_of_the_analysis_entry(tmp_path: Path, xdg: Path) -> None:
    """A text run writes the analysis entry; the ``--json`` run after it reads the analysis
    from it and adds its answer to the same entry; the next ``--json`` is that answer."""
    trace = tmp_path / "t.pt.trace.json.gz"
    shutil.copyfile(EXAMPLE, trace)
    assert _tf(["analyze", str(trace)], xdg).returncode == 0
    (results,) = (xdg / "traceforensics" / "results").iterdir()
    with pytest.raises(KeyError):
        read_parts(results, ("stdout",))
    first = _tf(["analyze", str(trace), "--json"], xdg)
    assert first.returncode == 0
    assert list((xdg / "traceforensics" / "results").iterdir()) == [results]
    assert read_parts(results, ("stdout",))["stdout"] == first.stdout
    assert _tf(["analyze", "--json", str(trace)], xdg).stdout == first.stdout
    uncached = _tf(["analyze", str(trace), "--json", "--no-cache"], xdg)
    assert uncached.stdout == first.stdout and uncached.stderr == first.stderr


def test_every_entry_is_one_file_of_one_format(
    tmp_path: Path, xdg: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Sessions and analyses alike: one file, a head line naming each part with its length
    and SHA-256, every part readable by the one reader (a rank directory too)."""
    ranks = tmp_path / "ranks"
    ranks.mkdir()
    shutil.copyfile(EXAMPLE, ranks / "rank0.pt.trace.json.gz")
    for args in (["analyze", str(EXAMPLE)], ["analyze", str(ranks), "--json"]):
        assert run_cli(args, capsys)[0] == 0
    entries = _entries(xdg)
    kinds = {p.parent.name for p in entries}
    assert kinds == {"sessions", "results"} and len(entries) >= 3
    for entry in entries:
        with entry.open("rb") as fh:
            head = json.loads(fh.readline())
        names = [name for name, _, _ in head["parts"]]
        assert head["format"] == "3" and set(read_parts(entry, names)) == set(names)
        size = sum(length for _, length, _ in head["parts"])
        assert entry.stat().st_size == len(json.dumps(head)) + 1 + size


def _silent_flip(entry: Path, part: str) -> None:
    """Change bytes inside ``part`` (a Parquet table) of ``entry`` where polars still reads it,
    into another table: only the part's SHA-256 can tell."""
    data = entry.read_bytes()
    head = json.loads(data[: data.index(b"\n")])
    start = data.index(b"\n") + 1
    for name, length, _ in head["parts"]:
        if name == part:
            break
        start += length
    table = data[start : start + length]
    saved = pl.read_parquet(io.BytesIO(table))
    for k in range(1, 40):
        changed = bytearray(table)
        at = int(length * k / 40)
        for i in range(at, at + 8):
            changed[i] ^= 0x5A
        try:
            read = pl.read_parquet(io.BytesIO(bytes(changed)))
        except BaseException:  # (polars' panic is no ``Exception``)
            continue
        if not read.equals(saved):
            entry.write_bytes(data[:start] + bytes(changed) + data[start + length :])
            return
    raise AssertionError(f"{entry}: no change polars reads silently: nothing would be tested")


@pytest.mark.parametrize("part", ["events", "args"])
def test_a_silently_changed_table_is_read_from_the_input(
    tmp_path: Path, xdg: Path, part: str, capsys: pytest.CaptureFixture[str]
) -> None:
    """A cached table polars would read into other values: the analysis is the uncached one,
    and the entry is written again whole."""
    trace = tmp_path / "t.pt.trace.json.gz"
    shutil.copyfile(EXAMPLE, trace)
    # ``--steps 2:`` bypasses the analysis cache (a part of the trace), not the session cache
    argv = ["analyze", "--json", "--steps", "2:", str(trace)]
    code, uncached, err = run_cli([*argv, "--no-cache"], capsys)
    assert code == 0, err
    assert run_cli(argv, capsys)[1] == uncached
    (entry,) = (xdg / "traceforensics" / "sessions").iterdir()
    _silent_flip(entry, part)
    with pytest.raises(ValueError, match=f"part {part}"):
        read_parts(entry, (part,))
    code, again, err = run_cli(argv, capsys)
    assert code == 0 and again == uncached, err
    assert read_parts(entry, (part,))  # written again, whole
