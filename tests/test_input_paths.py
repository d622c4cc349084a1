"""Paths a user can type that are not plain trace files (issue 10): each ends in exit 2 with one
line naming the file, what is wrong and what to do; none hangs, none modifies anything."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from tests.conftest import run_cli

TF = [sys.executable, "-c", "from traceforensics.cli.main import main; main()"]


def _one_line_error(err: str) -> str:
    lines = err.strip().splitlines()
    assert len(lines) == 1, err
    assert lines[0].startswith("tf: error: ") and "internal error" not in lines[0], err
    return lines[0]


@pytest.mark.parametrize("command", ["analyze", "monitor"])
def test_fifo_is_refused_without_blocking(tmp_path: Path, command: str) -> None:
    """A FIFO named like a trace used to block forever in format sniffing: run in a child with
    a timeout, so a regression fails instead of hanging the suite."""
    fifo = tmp_path / "trace.json"
    os.mkfifo(fifo)
    done = subprocess.run(
        [*TF, command, str(fifo)], capture_output=True, text=True, timeout=60, check=False
    )
    assert done.returncode == 2
    line = _one_line_error(done.stderr)
    assert str(fifo) in line and "not a regular file" in line
    assert sorted(p.name for p in tmp_path.iterdir()) == ["trace.json"]


@pytest.mark.parametrize(
    "bad",
    [
        "line\nbreak.json",
        "carriage\rreturn.json",
        "tab\tand\x1besc.json",
        "rtl\u202eoverride.json",  # would reorder the line visually
        "nel\x85and\u2028sep.json",  # line breaks for str.splitlines and some terminals
        "bad\udcffbyte.json",  # an undecodable byte of the name (surrogateescape)
    ],
)
def test_control_characters_in_names_stay_on_one_line(
    tmp_path: Path, bad: str, capsys: pytest.CaptureFixture[str]
) -> None:
    path = tmp_path / bad
    path.write_text("not a trace")
    code, out, err = run_cli(["analyze", str(path)], capsys)
    assert code == 2 and out == ""
    line = _one_line_error(err)
    assert line.isprintable(), line
    escaped = bad.replace("\n", "\\n").replace("\r", "\\r").replace("\t", "\\t")
    for raw, shown in {"\x1b": "\\x1b", "\u202e": "\\u202e", "\x85": "\\x85", "\u2028": "\\u2028",
                       "\udcff": "\\xff"}.items():  # fmt: skip
        escaped = escaped.replace(raw, shown)
    assert escaped in line


def test_broken_link_loop_and_long_name(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    broken = tmp_path / "gone.json"
    broken.symlink_to(tmp_path / "nowhere.json")
    loop_a, loop_b = tmp_path / "a.json", tmp_path / "b.json"
    loop_a.symlink_to(loop_b)
    loop_b.symlink_to(loop_a)
    cases = {
        broken: "broken symbolic link",
        loop_a: "cannot open",
        tmp_path / ("x" * 300 + ".json"): "cannot open",
        tmp_path / "missing.json": "no such file or directory",
    }
    for path, words in cases.items():
        for command in ("analyze", "monitor"):
            code, out, err = run_cli([command, str(path)], capsys)
            assert code == 2 and out == "", (path, err)
            line = _one_line_error(err)
            assert words in line and "check the path" in line, line


def test_directory_given_to_monitor(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    code, _out, err = run_cli(["monitor", str(tmp_path)], capsys)
    assert code == 2 and "is a directory" in _one_line_error(err)


def _unprivileged() -> list[str]:
    """Command prefix under which file permissions apply. Root ignores them, so as root the
    child runs without the capabilities that bypass them (``setpriv``); skips when that is
    not possible here."""
    if os.geteuid() != 0:
        return []
    import shutil
    import tempfile

    setpriv = shutil.which("setpriv")
    if setpriv is None:
        pytest.skip("running as root without setpriv: file permissions cannot be tested")
    prefix = [setpriv, "--bounding-set=-dac_override,-dac_read_search"]
    with tempfile.NamedTemporaryFile() as probe:
        os.chmod(probe.name, 0)
        done = subprocess.run([*prefix, "cat", probe.name], capture_output=True, check=False)
    if done.returncode == 0:
        pytest.skip("setpriv cannot drop the capabilities here: permissions cannot be tested")
    return prefix


def _denied(tmp_path: Path) -> dict[str, tuple[list[str], str, str]]:
    """case -> (tf arguments, path the line must name, words it must hold)."""
    sample = (
        Path(__file__).resolve().parents[1] / "examples" / "synthetic_training.pt.trace.json.gz"
    )
    locked = tmp_path / "locked.json"
    locked.write_text("{}")
    locked_dir = tmp_path / "locked_dir"
    locked_dir.mkdir()
    (locked_dir / "rank0.json.gz").write_bytes(sample.read_bytes())
    ranks = tmp_path / "ranks"
    ranks.mkdir()
    (ranks / "rank0.json.gz").write_bytes(sample.read_bytes())
    (ranks / "rank1.json.gz").write_bytes(sample.read_bytes())
    no_search = tmp_path / "no_search"
    no_search.mkdir()
    (no_search / "t.json.gz").write_bytes(sample.read_bytes())
    denied = "permission denied; make it readable or copy it"
    return {
        "file": (["analyze", str(locked)], str(locked), denied),
        "log": (["monitor", str(locked)], str(locked), denied),
        "--monitor log": (
            ["analyze", str(sample), "--monitor", str(locked)], str(locked), denied),
        "directory": (["analyze", str(locked_dir)], str(locked_dir), denied),
        "rank file": (["analyze", str(ranks)], str(ranks / "rank1.json.gz"), denied),
        "parent": (
            ["analyze", str(no_search / "t.json.gz")], str(no_search / "t.json.gz"),
            "cannot open (Permission denied); check the path"),
    }  # fmt: skip


def test_permission_denied_is_one_line_with_advice(tmp_path: Path) -> None:
    prefix = _unprivileged()
    cases = _denied(tmp_path)
    before = {p: p.stat().st_mtime_ns for p in tmp_path.rglob("*")}
    for name in ("locked.json", "ranks/rank1.json.gz", "locked_dir"):
        (tmp_path / name).chmod(0)
    (tmp_path / "no_search").chmod(0o600)  # listable, but its files cannot be reached
    try:
        for case, (args, named, words) in cases.items():
            done = subprocess.run(
                [*prefix, *TF, *args], capture_output=True, text=True, timeout=120, check=False
            )
            assert done.returncode == 2, (case, done.stderr)
            line = _one_line_error(done.stderr)
            assert named in line and words in line, (case, line)
    finally:
        for p in [*tmp_path.iterdir(), tmp_path / "ranks" / "rank1.json.gz"]:
            p.chmod(0o755)
    after = {p: p.stat().st_mtime_ns for p in tmp_path.rglob("*")}
    assert after == before  # nothing written beside the inputs, nothing touched


def test_a_good_trace_under_a_name_that_is_not_utf8(tmp_path: Path) -> None:
    """A name with a byte that is not UTF-8 (Python sees a lone surrogate) once crashed the
    cache key, the JSON writer and the Markdown writer; every output now shows it escaped."""
    sample = (
        Path(__file__).resolve().parents[1] / "examples" / "synthetic_training.pt.trace.json.gz"
    )
    raw_name = os.fsencode(tmp_path) + b"/run\xff.json.gz"
    with open(raw_name, "wb") as fh:
        fh.write(sample.read_bytes())
    path = os.fsdecode(raw_name)
    env = {**os.environ, "LC_ALL": "C.UTF-8", "PYTHONIOENCODING": "utf-8"}
    outputs = {
        "text": [],
        "json": ["--json"],
        "markdown": ["--markdown", str(tmp_path / "r.md")],
        "plot": ["--plot", str(tmp_path / "r.png")],
    }
    for what, extra in outputs.items():
        done = subprocess.run(
            [*TF, "analyze", path, *extra], capture_output=True, timeout=120, check=False, env=env
        )
        assert done.returncode == 0, (what, done.stderr)
        if what == "json":
            import json

            assert json.loads(done.stdout)["inputs"][0]["path"] == path
        if what == "text":
            assert "run\\xff.json.gz" in done.stdout.decode()  # the byte, as ls -b shows it
    assert "run\\xff.json.gz" in (tmp_path / "r.md").read_text()
