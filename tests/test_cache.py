"""The cache (``traceforensics.cache``): lives under XDG_CACHE_HOME, keyed by input identity
and code, never beside the input; the session entries."""

from __future__ import annotations

import errno
import io
import json
import os
import subprocess
import sys
from pathlib import Path

import polars as pl
import pytest

from traceforensics.cache import cache_dir, cached_session, code_fingerprint, entry_path
from traceforensics.model import TraceMeta, TraceSession

EXAMPLE = Path(__file__).resolve().parents[1] / "examples/synthetic_training.pt.trace.json.gz"


def _session(tag: str) -> TraceSession:
    frame = pl.DataFrame(
        {
            "event_id": [0],
            "kind": ["kernel"],
            "start_ns": [5],
            "dur_ns": [7],
            "rank": [0],
            "device": [0],
            "name": [tag],
        }
    )
    return TraceSession.from_frames(frame, TraceMeta(source_format="test"))


@pytest.fixture
def xdg(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    cache = tmp_path / "xdg-cache"
    monkeypatch.setenv("XDG_CACHE_HOME", str(cache))
    return cache


def test_second_load_comes_from_cache_and_is_equal(tmp_path: Path, xdg: Path) -> None:
    src = tmp_path / "in" / "t.json"
    src.parent.mkdir()
    src.write_text("{}")
    calls: list[Path] = []

    def loader(p: Path) -> TraceSession:
        calls.append(p)
        return _session("k1")

    first = cached_session(src, loader)
    second = cached_session(src, loader)
    assert len(calls) == 1
    assert second.events.equals(first.events)
    assert cache_dir() == xdg / "traceforensics"
    assert any((cache_dir() / "sessions").iterdir())
    # nothing written beside the input
    assert sorted(os.listdir(src.parent)) == ["t.json"]


def test_changed_input_misses_the_cache(tmp_path: Path, xdg: Path) -> None:
    src = tmp_path / "t.json"
    src.write_text("{}")
    k1 = entry_path("sessions", src)
    src.write_text('{"x": 1}')
    os.utime(src, ns=(1, 1))
    assert entry_path("sessions", src) != k1
    names: list[str] = []

    def loader(p: Path) -> TraceSession:
        names.append("load")
        return _session(f"v{len(names)}")

    cached_session(src, loader)
    src.write_text('{"x": 22}')
    cached_session(src, loader)
    assert names == ["load", "load"]


def test_broken_cache_entry_is_rebuilt(tmp_path: Path, xdg: Path) -> None:
    src = tmp_path / "t.json"
    src.write_text("{}")
    entry = entry_path("sessions", src)
    entry.parent.mkdir(parents=True)
    entry.write_text("not json")
    s = cached_session(src, lambda p: _session("fresh"))
    assert s.events.get_column("name").cast(pl.String).to_list() == ["fresh"]
    # written whole again: the next load reads it
    assert cached_session(src, lambda p: _session("again")).events.equals(s.events)


@pytest.mark.parametrize("cut", ["head", "tail", "flip"])
def test_a_damaged_session_entry_is_never_served(tmp_path: Path, xdg: Path, cut: str) -> None:
    """The one integrity rule: a part whose bytes do not match its SHA-256 is a miss (a byte
    changed inside a Parquet page can decode into other values without an error)."""
    src = tmp_path / "t.json"
    src.write_text("{}")
    cached_session(src, lambda p: _session("first"))
    entry = entry_path("sessions", src)
    data = bytearray(entry.read_bytes())
    if cut == "head":
        data = data[:10]
    elif cut == "tail":
        data = data[:-10]
    else:
        data[-100] ^= 0x40
    entry.write_bytes(bytes(data))
    s = cached_session(src, lambda p: _session("fresh"))
    assert s.events.get_column("name").cast(pl.String).to_list() == ["fresh"]


def test_cache_hit_names_the_path_typed_this_time(
    tmp_path: Path, xdg: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """A second run typing the same file differently (relative, absolute, through a rank
    directory) must print its own path (issue 10: the text header used to print the path of
    whichever run filled the cache); the path as typed is part of the key."""
    from tests.conftest import run_cli

    example = Path(__file__).resolve().parents[1] / "examples/synthetic_training.pt.trace.json.gz"
    ranks = tmp_path / "ranks"
    ranks.mkdir()
    (ranks / "rank-0.pt.trace.json.gz").write_bytes(example.read_bytes())
    monkeypatch.chdir(tmp_path)
    for first, second in (
        ("ranks/rank-0.pt.trace.json.gz", str(ranks / "rank-0.pt.trace.json.gz")),
        ("ranks", str(ranks)),
    ):
        for typed in (first, second):
            code, out, err = run_cli(["analyze", typed], capsys)
            assert code == 0, err
            head = out.splitlines()[0]
            want = typed if typed.endswith(".gz") else f"{typed}/rank-0.pt.trace.json.gz"
            assert f"· {want} (rank" in head, (typed, head)
    assert any((xdg / "traceforensics" / "sessions").iterdir()), "the cache was never filled"


def test_a_changed_reader_misses_the_cache(tmp_path: Path) -> None:
    """The key carries a hash of every file of the package, so a session an older reader made
    (say, with a device name it could not read) is never served after the reader changes."""
    import shutil

    import traceforensics

    package = Path(traceforensics.__file__).parent
    copy = tmp_path / "pkg"
    shutil.copytree(package, copy, ignore=shutil.ignore_patterns("__pycache__", "*.so"))
    before = code_fingerprint(copy)
    assert before == code_fingerprint(package)
    reader = copy / "ingest" / "nsys" / "meta.py"
    reader.write_text(reader.read_text() + "\n# changed\n")
    assert code_fingerprint.__wrapped__(copy) != before
    reader.write_text(reader.read_text().removesuffix("\n# changed\n"))
    (copy / "cli" / "stray.pyc").write_bytes(b"x")  # bytecode is not what runs the rules
    assert code_fingerprint.__wrapped__(copy) == before
    scanner = copy / "ingest" / "kineto" / "_colscan.c"  # the compiled reader's source counts
    scanner.write_text(scanner.read_text() + "\n/* changed */\n")
    assert code_fingerprint.__wrapped__(copy) != before


def _full_disk_run(tmp_path: Path, limit_bytes: int) -> subprocess.CompletedProcess[str]:
    """``tf analyze --json`` of the bundled trace in a child whose files may not grow past
    ``limit_bytes`` (``RLIMIT_FSIZE``, SIGXFSZ ignored: writes fail with EFBIG, as on a full
    or quota-limited cache file system)."""
    script = (
        "import resource, signal, sys\n"
        "signal.signal(signal.SIGXFSZ, signal.SIG_IGN)\n"
        f"resource.setrlimit(resource.RLIMIT_FSIZE, ({limit_bytes}, {limit_bytes}))\n"
        "from traceforensics.cli.main import main\n"
        "sys.argv = ['tf', 'analyze', sys.argv[1], '--json']\n"
        "main()\n"
    )
    env = {**os.environ, "XDG_CACHE_HOME": str(tmp_path / "xdg")}
    return subprocess.run(
        [sys.executable, "-c", script, str(EXAMPLE)],
        capture_output=True,
        text=True,
        env=env,
        timeout=120,
        check=False,
    )


@pytest.mark.parametrize("limit_bytes", [4096, 16384])
def test_a_full_cache_disk_is_skipped_with_one_warning(tmp_path: Path, limit_bytes: int) -> None:
    """Issue 43: a cache that cannot be written (EFBIG/ENOSPC inside the parquet writer, which
    polars reports as its own error) cost the run (exit 3) and left ``.tmp-*`` folders."""
    proc = _full_disk_run(tmp_path, limit_bytes)
    assert proc.returncode == 0, proc.stderr
    warned = [line for line in proc.stderr.splitlines() if "could not be written" in line]
    assert len(warned) == 1, proc.stderr
    assert "internal error" not in proc.stderr
    assert json.loads(proc.stdout)["warnings"]  # the JSON carries it too
    left = [p.name for p in (tmp_path / "xdg").rglob("*") if p.name.startswith(".tmp-")]
    assert left == []


def test_an_enospc_while_saving_leaves_nothing_behind(
    tmp_path: Path, xdg: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    def full(self: pl.DataFrame, target: object, *args: object, **kwargs: object) -> None:
        assert isinstance(target, io.BytesIO)
        target.write(b"PAR1")  # a part was written before the disk filled
        raise OSError(errno.ENOSPC, "No space left on device")

    monkeypatch.setattr(pl.DataFrame, "write_parquet", full)
    src = tmp_path / "t.json"
    src.write_text("{}")
    session = cached_session(src, lambda p: _session("a"))
    assert [w for w in session.meta.warnings if "No space left on device" in w]
    assert [p for p in xdg.rglob("*") if p.is_file()] == []
    assert [p for p in xdg.rglob(".tmp-*")] == []
    # a second failing run warns once, not twice
    again = cached_session(src, lambda p: session)
    assert sum("could not be written" in w for w in again.meta.warnings) == 1
