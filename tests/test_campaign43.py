"""What the issue-43 fuzzing campaign found, one test per kind of damage (each failed before
its fix): exit 0, or exit 2 with one line naming the input and what to do; never exit 3,
never a library warning above the line, nothing written beside the input or the store."""

from __future__ import annotations

import gzip
import json
import os
import sqlite3
import subprocess
import sys
from pathlib import Path

import pytest

from tests.conftest import ROOT, run_cli
from tests.test_input_paths import _unprivileged

EXAMPLE = ROOT / "examples" / "synthetic_training.pt.trace.json.gz"
NSYS = ROOT / "tests" / "fixtures" / "nsys" / "modern.sqlite"


@pytest.fixture(autouse=True)
def _private_dirs(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.setenv("XDG_DATA_HOME", str(tmp_path / "data"))
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))
    monkeypatch.delenv("TF_HISTORY_URL", raising=False)


def _one_line_refusal(code: int, err: str) -> str:
    """The single ``tf: error:`` line of a refusal, checked to carry advice after a ``;``."""
    lines = err.strip().splitlines()
    assert code == 2, err
    assert len(lines) == 1 and lines[0].startswith("tf: error: "), err
    assert ";" in lines[0], err
    return lines[0]


# --- nsys StringIds -------------------------------------------------------------------------


def _string_ids_damaged(tmp_path: Path) -> tuple[Path, dict[int, str]]:
    """The fixture with a StringIds table whose ids may be text/real/blob and whose values
    may be blobs or text of invalid UTF-8 (the table rebuilt without INTEGER PRIMARY KEY,
    as a hand-made or damaged export has it). Returns the path and the intact id -> value."""
    path = tmp_path / "strings.sqlite"
    path.write_bytes(NSYS.read_bytes())
    with sqlite3.connect(path) as conn:
        intact = dict(conn.execute("SELECT id, value FROM StringIds").fetchall())
        conn.executescript(
            "CREATE TABLE S2(id, value); INSERT INTO S2 SELECT id, value FROM StringIds;"
            "DROP TABLE StringIds; ALTER TABLE S2 RENAME TO StringIds;"
        )
        first, second, third = sorted(intact)[:3]
        conn.execute("UPDATE StringIds SET id = 'abc' WHERE id = ?", (first,))
        conn.execute("UPDATE StringIds SET value = X'ff' WHERE id = ?", (second,))
        conn.execute("UPDATE StringIds SET value = CAST(X'41ff42' AS TEXT) WHERE id = ?", (third,))
        conn.executemany(
            "INSERT INTO StringIds VALUES (?, 'extra')", [(2.5,), (b"\xde\xad",), (None,)]
        )
    return path, intact


def test_damaged_string_ids_cost_their_rows_only(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path, intact = _string_ids_damaged(tmp_path)
    before = path.read_bytes()
    code, out, err = run_cli(["analyze", str(path), "--no-cache", "--json"], capsys)
    assert code == 0, err
    assert "internal error" not in err
    doc = json.loads(out)
    assert doc["event_count"] > 0
    assert path.read_bytes() == before

    from traceforensics.ingest.nsys.common import Strings
    from traceforensics.ingest.nsys.db import ExportDb

    with ExportDb(path) as db:
        got = dict(Strings(db).frame.select("id", "value").iter_rows())
    first, second, third = sorted(intact)[:3]
    assert first not in got  # its id became text: the row is gone
    assert got[second] == "\ufffd"  # a blob of invalid UTF-8, read as text
    assert got[third] == "A\ufffdB"
    for key, value in intact.items():  # every other row as it was
        if key not in (first, second, third):
            assert got[key] == value
    assert set(got) == set(intact) - {first}


# --- Kineto deviceProperties ----------------------------------------------------------------


@pytest.mark.parametrize("props", [5, 1e308, True, "x", {"name": "AMD Instinct"}])
def test_device_properties_that_are_not_a_list_read_as_absent(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], props: object
) -> None:
    doc = json.loads(gzip.decompress(EXAMPLE.read_bytes()))
    doc["deviceProperties"] = props
    path = tmp_path / "t.json"
    path.write_text(json.dumps(doc))
    code, out, err = run_cli(["analyze", str(path), "--no-cache", "--json"], capsys)
    assert code == 0, err
    devices = json.loads(out)["devices"]
    assert devices and all(d["name"] == "unknown" for d in devices)  # no list: no names


@pytest.mark.parametrize("base", [1e308, 2**63 - 1, -5, "9" * 30, 1.5])
def test_a_base_time_beyond_int64_costs_the_base_only(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], base: object
) -> None:
    """``baseTimeNanoseconds`` of 1e308 was refused as "malformed trace content
    (OverflowError ...)" (found by the long run's ``kineto-meta`` family)."""
    doc = json.loads(gzip.decompress(EXAMPLE.read_bytes()))
    plain = tmp_path / "plain.json"
    plain.write_text(json.dumps({k: v for k, v in doc.items() if k != "baseTimeNanoseconds"}))
    doc["baseTimeNanoseconds"] = base
    path = tmp_path / "t.json"
    path.write_text(json.dumps(doc))
    code, out, err = run_cli(["analyze", str(path), "--no-cache", "--json"], capsys)
    assert code == 0, err
    _c, want, _e = run_cli(["analyze", str(plain), "--no-cache", "--json"], capsys)
    # the same figures as the trace without a base (times relative, as written)
    got, ref = json.loads(out), json.loads(want)
    assert [f["recoverable_ns"] for f in got["findings"]] == [
        f["recoverable_ns"] for f in ref["findings"]
    ]
    assert got["event_count"] == ref["event_count"]


def test_detect_vendor_ignores_a_non_list() -> None:
    from traceforensics.ingest.kineto.meta import detect_vendor

    assert detect_vendor({"deviceProperties": 7}, ["cudaLaunchKernel"]) == "nvidia"
    assert detect_vendor({"deviceProperties": 7}, ["hipLaunchKernel"]) == "amd"
    assert detect_vendor({"deviceProperties": [{"name": "AMD MI250"}]}, []) == "amd"


# --- history URLs ---------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("url", "words"),
    [
        ("foo://bar", "foo is not a supported store"),
        ("http://[::1", "not a database URL"),
        ("postgresql://u@h:abc/db", "not a database URL"),
        ("sqlite:///a\x00b.sqlite", "NUL"),
        ("sqlite:///h.sqlite?foo=1", "foo are not SQLite options"),
        ("sqlite:///h.sqlite?timeout=abc", "timeout must be a number"),
        ("sqlite+:///h.sqlite", "no driver name after the '+'"),
    ],
)
@pytest.mark.parametrize("command", ["history", "analyze"])
def test_a_bad_store_url_is_one_line(
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
    url: str,
    words: str,
    command: str,
) -> None:
    monkeypatch.chdir(tmp_path)
    argv = ["history", "--store", url] if command == "history" else ["analyze", str(EXAMPLE)]
    if command == "analyze":
        argv += ["--store", url]
    code, _out, err = run_cli(argv, capsys)
    assert words in _one_line_refusal(code, err)
    assert not list(tmp_path.glob("*.sqlite*"))  # refused before any file was made


def _stored(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> Path:
    store = tmp_path / "st" / "h.sqlite"
    store.parent.mkdir()
    code, _out, err = run_cli(["analyze", str(EXAMPLE), "--store", f"sqlite:///{store}"], capsys)
    assert code == 0, err
    assert sorted(p.name for p in store.parent.iterdir()) == ["h.sqlite"]
    return store


def test_mode_ro_reads_without_a_library_warning_and_refuses_to_store(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    store = _stored(tmp_path, capsys)
    url = f"sqlite:///{store}?mode=ro"
    code, out, err = run_cli(["history", "--store", url, "--json"], capsys)
    assert code == 0 and err == "", err  # (SQLAlchemy's SAWarning was two lines here)
    assert len(json.loads(out)["runs"]) == 1
    code, _out, err = run_cli(["analyze", str(EXAMPLE), "--store", url], capsys)
    assert "read-only" in _one_line_refusal(code, err)
    # nothing beside the store: no -wal/-shm of a read-only open
    assert sorted(p.name for p in store.parent.iterdir()) == ["h.sqlite"]


def _as_unprivileged(argv: list[str], env_home: Path) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "XDG_DATA_HOME": str(env_home), "XDG_CACHE_HOME": str(env_home)}
    return subprocess.run(
        [
            *_unprivileged(),
            sys.executable,
            "-c",
            "from traceforensics.cli.entry import main; main()",
            *argv,
        ],
        capture_output=True,
        text=True,
        env=env,
        timeout=120,
        check=False,
    )


@pytest.mark.parametrize("lock", ["folder", "file"])
def test_a_read_only_store_lists_and_refuses_a_run_leaving_nothing(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], lock: str
) -> None:
    """A store in a read-only folder (or a read-only file): ``tf history`` lists it, and a
    ``--store`` into it is refused on one line without ``-wal``/``-shm`` files beside it.
    As root the child runs without the capabilities that bypass permissions (``setpriv``)."""
    store = _stored(tmp_path, capsys)
    url = f"sqlite:///{store}"
    target = store.parent if lock == "folder" else store
    mode = target.stat().st_mode
    target.chmod(0o555 if lock == "folder" else 0o444)
    try:
        listed = _as_unprivileged(["history", "--store", url, "--json"], tmp_path / "x")
        assert listed.returncode == 0, listed.stderr
        assert len(json.loads(listed.stdout)["runs"]) == 1
        stored = _as_unprivileged(["analyze", str(EXAMPLE), "--store", url], tmp_path / "x")
        assert "read-only" in _one_line_refusal(stored.returncode, stored.stderr)
    finally:
        target.chmod(mode)
    assert sorted(p.name for p in store.parent.iterdir()) == ["h.sqlite"]


# --- tf diff carries both sides' warnings ---------------------------------------------------


def _cut(tmp_path: Path, name: str = "cut.json.gz") -> Path:
    """The bundled trace cut at 60 % of its JSON (a job killed while writing), gzipped."""
    data = gzip.decompress(EXAMPLE.read_bytes())
    path = tmp_path / name
    path.write_bytes(gzip.compress(data[: int(len(data) * 0.6)], mtime=0))
    return path


def test_a_diff_against_a_cut_trace_says_so(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    cut = _cut(tmp_path)
    code, out, err = run_cli(["diff", str(EXAMPLE), str(cut), "--no-cache", "--json"], capsys)
    assert code == 0, err
    doc = json.loads(out)
    # the AFTER side's own warning, as tf analyze gives it, is carried and marked
    _c, own, _e = run_cli(["analyze", str(cut), "--no-cache", "--json"], capsys)
    cut_warnings = json.loads(own)["warnings"]
    assert any("cut off" in w for w in cut_warnings)
    for w in cut_warnings:
        assert f"AFTER: {w}" in doc["warnings"]
        assert any(line.endswith(w) for line in err.splitlines())  # and on stderr
    assert not any(w.startswith("BEFORE: ") for w in doc["warnings"])  # BEFORE has none
    assert doc["verdict"]["partial_sides"] == ["after"]
    assert "AFTER was read only in part" in doc["verdict"]["text"]
    # the same diff the other way round names BEFORE
    code, out, _err = run_cli(["diff", str(cut), str(EXAMPLE), "--no-cache", "--json"], capsys)
    assert json.loads(out)["verdict"]["partial_sides"] == ["before"]
    # and the text report shows the verdict's words
    code, text, _err = run_cli(["diff", str(EXAMPLE), str(cut), "--no-cache"], capsys)
    assert code == 0 and "read only in part" in text and "warning: AFTER: " in text


def test_a_diff_of_two_complete_traces_names_no_side(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    code, out, err = run_cli(["diff", str(EXAMPLE), str(EXAMPLE), "--no-cache", "--json"], capsys)
    assert code == 0, err
    doc = json.loads(out)
    assert doc["verdict"]["partial_sides"] == []
    assert "read only in part" not in doc["verdict"]["text"]


def test_a_broken_rank_directory_keeps_its_warnings_in_a_diff(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    ranks = tmp_path / "ranks"
    ranks.mkdir()
    (ranks / "rank0.pt.trace.json.gz").write_bytes(EXAMPLE.read_bytes())
    (ranks / "rank1.pt.trace.json").write_text("garbage")
    code, out, err = run_cli(["diff", str(EXAMPLE), str(ranks), "--no-cache", "--json"], capsys)
    assert code == 0, err
    doc = json.loads(out)
    left_out = [w for w in doc["warnings"] if w.startswith("AFTER: ") and "left out" in w]
    assert len(left_out) == 1 and "rank1.pt.trace.json" in left_out[0]
    assert doc["verdict"]["partial_sides"] == ["after"]


def test_running_out_of_memory_anywhere_is_one_line_exit_2(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """A ``MemoryError`` outside the Kineto load's own handler (any reader, any pass) says
    "not enough memory" with what to do, exit 2: never an internal error, never "malformed"."""
    import synth
    from traceforensics.analysis import pipeline

    tr = synth.SynthTrace()
    tr.launch("k", 0, 5_000, 10_000, 10_000)
    path = tr.write_nsys(tmp_path / "t.sqlite")

    def no_memory(*_args: object, **_kwargs: object) -> None:
        raise MemoryError

    monkeypatch.setattr(pipeline, "prepare", no_memory)
    code, out, err = run_cli(["analyze", str(path), "--no-cache"], capsys)
    assert (code, out) == (2, "")
    (line,) = err.strip().splitlines()
    assert line.startswith("tf: error: the input: not enough memory") and "--steps" in line
    assert "malformed" not in line and "internal error" not in line
