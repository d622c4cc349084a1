"""``cache.serve``: a repeat ``tf analyze TRACE --json`` is answered with the first run's bytes,
by the console script (``cli.entry``) without importing polars; anything that could change
the answer misses. Each run is a fresh interpreter, as the console script is."""

from __future__ import annotations

import gzip
import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from traceforensics.cache import read_parts, servable

EXAMPLE = Path(__file__).resolve().parents[1] / "examples" / "synthetic_training.pt.trace.json.gz"

#: The console script, reporting on a pipe (from an atexit handler) whether polars was imported.
_SCRIPT = (
    "import atexit, os, sys\n"
    "sys.argv = ['tf', *sys.argv[1:]]\n"
    "fd = int(os.environ['REPLAY_TEST_FD'])\n"
    "atexit.register(lambda: os.write(fd, str('polars' in sys.modules).encode()))\n"
    "from traceforensics.cli.entry import main\n"
    "main()\n"
)


def _tf(
    args: list[str], cache: Path, env: dict[str, str] | None = None
) -> tuple[int, bytes, bytes, bool]:
    """``tf ARGS`` as the console script: (exit code, stdout, stderr, polars imported)."""
    read, write = os.pipe()
    # (not a TF_ name: the replay's key holds those settings)
    run_env = os.environ | {"XDG_CACHE_HOME": str(cache), "REPLAY_TEST_FD": str(write)}
    proc = subprocess.run(
        [sys.executable, "-c", _SCRIPT, *args],
        capture_output=True,
        env=run_env | (env or {}),
        pass_fds=(write,),
        check=False,
    )
    os.close(write)
    with os.fdopen(read, "rb") as fh:
        imported = fh.read() == b"True"
    return proc.returncode, proc.stdout, proc.stderr, imported


def _warned_trace(tmp_path: Path) -> Path:
    """The example trace plus an event of an unknown category: its run warns on stderr."""
    doc = json.loads(gzip.decompress(EXAMPLE.read_bytes()))
    doc["traceEvents"].append(
        {"ph": "X", "cat": "mystery", "name": "m", "pid": 1, "tid": 1, "ts": 1, "dur": 1}
    )
    path = tmp_path / "warned.pt.trace.json"
    path.write_text(json.dumps(doc))
    return path


def _entries(cache: Path) -> list[Path]:
    """The analysis entries holding an answer to replay (parts stdout and stderr)."""
    results = cache / "traceforensics" / "results"
    found = sorted(results.iterdir()) if results.exists() else []
    return [p for p in found if _answers(p)]


def _answers(entry: Path) -> bool:
    try:
        read_parts(entry, ("stdout", "stderr"))
    except (KeyError, ValueError):
        return False
    return True


def test_a_repeat_is_the_first_runs_bytes_without_polars(tmp_path: Path) -> None:
    trace, cache = _warned_trace(tmp_path), tmp_path / "cache"
    code, out, err, imported = _tf(["analyze", str(trace), "--json"], cache)
    assert code == 0 and imported
    assert b"unknown categories" in err  # the warning the replay must repeat
    assert len(_entries(cache)) == 1
    for args in (["analyze", str(trace), "--json"], ["analyze", "--json", str(trace)]):
        again = _tf(args, cache)
        assert again == (0, out, err, False)
    assert json.loads(out)["inputs"][0]["path"] == str(trace)


def test_what_could_change_the_answer_misses(tmp_path: Path) -> None:
    trace, cache = tmp_path / "t.pt.trace.json.gz", tmp_path / "cache"
    shutil.copy(EXAMPLE, trace)
    first = _tf(["analyze", str(trace), "--json"], cache)
    assert first[0] == 0 and _tf(["analyze", str(trace), "--json"], cache)[3] is False
    # a setting of ours: computed again (the analysis cache may still serve it)
    assert _tf(["analyze", str(trace), "--json"], cache, {"TF_INGEST_WORKERS": "0"})[3]
    # the input rewritten with other content: its answer, not the stored one
    doc = json.loads(gzip.decompress(EXAMPLE.read_bytes()))
    doc["traceEvents"] = doc["traceEvents"][: len(doc["traceEvents"]) // 2]
    trace.write_bytes(gzip.compress(json.dumps(doc).encode()))
    code, out, _, imported = _tf(["analyze", str(trace), "--json"], cache)
    assert code == 0 and imported and out != first[1]
    assert json.loads(out)["event_count"] < json.loads(first[1])["event_count"]


def test_no_cache_neither_reads_nor_writes_an_entry(tmp_path: Path) -> None:
    cache = tmp_path / "cache"
    code, _, _, imported = _tf(["analyze", str(EXAMPLE), "--json", "--no-cache"], cache)
    assert code == 0 and imported and _entries(cache) == []
    _tf(["analyze", str(EXAMPLE), "--json"], cache)
    assert _tf(["analyze", str(EXAMPLE), "--json", "--no-cache"], cache)[3]  # computed


def test_a_damaged_entry_is_not_served(tmp_path: Path) -> None:
    cache = tmp_path / "cache"
    out = _tf(["analyze", str(EXAMPLE), "--json"], cache)[1]
    (entry,) = _entries(cache)
    entry.write_bytes(entry.read_bytes()[:-10])  # cut short
    code, again, _, imported = _tf(["analyze", str(EXAMPLE), "--json"], cache)
    assert (code, again, imported) == (0, out, True)  # computed, and stored whole again
    assert _tf(["analyze", str(EXAMPLE), "--json"], cache) == (0, out, b"", False)


def test_warnings_come_before_the_json_as_on_a_first_run(tmp_path: Path) -> None:
    """With stderr and stdout on one stream (``2>&1``, a terminal) the replay reads the same."""
    trace, cache = _warned_trace(tmp_path), tmp_path / "cache"
    env = os.environ | {"XDG_CACHE_HOME": str(cache)}
    script = (
        "import sys; sys.argv=['tf', *sys.argv[1:]]\n"
        "from traceforensics.cli.entry import main\nmain()"
    )

    def joined() -> bytes:
        args = [sys.executable, "-c", script, "analyze", str(trace), "--json"]
        return subprocess.run(
            args, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, env=env, check=True
        ).stdout

    first = joined()
    assert first.startswith(b"tf: warning:") and joined() == first


def test_a_replaced_file_of_the_same_size_and_mtime_misses(tmp_path: Path) -> None:
    """``cp -p`` of another trace of the same length over it: another inode (and ctime)."""
    trace, cache = _warned_trace(tmp_path), tmp_path / "cache"
    first = _tf(["analyze", str(trace), "--json"], cache)
    other = tmp_path / "other.json"
    other.write_bytes(trace.read_bytes().replace(b'"mystery"', b'"mysterz"'))
    stat = trace.stat()
    os.replace(other, trace)
    os.utime(trace, ns=(stat.st_atime_ns, stat.st_mtime_ns))
    assert (trace.stat().st_size, trace.stat().st_mtime_ns) == (stat.st_size, stat.st_mtime_ns)
    code, _, err, imported = _tf(["analyze", str(trace), "--json"], cache)
    assert code == 0 and imported and b"mysterz" in err and err != first[2]


def test_a_closed_pipe_ends_quietly(tmp_path: Path) -> None:
    """``tf analyze TRACE --json | head -c 1``: exit 1 and no traceback, replayed or not."""
    cache = tmp_path / "cache"
    env = os.environ | {"XDG_CACHE_HOME": str(cache)}
    _tf(["analyze", str(EXAMPLE), "--json"], cache)
    script = (
        "import os, sys\nsys.argv=['tf', 'analyze', sys.argv[1], '--json']\n"
        "r, w = os.pipe(); os.close(r); os.dup2(w, 1)\n"
        "from traceforensics.cli.entry import main\nmain()"
    )
    proc = subprocess.run(
        [sys.executable, "-c", script, str(EXAMPLE)], capture_output=True, env=env, check=False
    )
    assert proc.returncode == 1 and b"Traceback" not in proc.stderr


def test_the_package_hash_covers_its_data_files(tmp_path: Path) -> None:
    """A peak-FLOPS table edited changes the answer: it changes the key too."""
    from traceforensics import cache

    copy = tmp_path / "pkg"
    shutil.copytree(cache.PACKAGE, copy, ignore=shutil.ignore_patterns("__pycache__", "*.so"))
    fingerprint = cache.code_fingerprint.__wrapped__
    before = fingerprint(copy)
    data = next(p for p in copy.rglob("*.csv"))
    data.write_text(data.read_text() + "\n")
    assert fingerprint(copy) != before
    (copy / "cli" / "stray.pyc").write_bytes(b"x")  # bytecode is not what runs the rules
    data.write_text(data.read_text()[:-1])
    assert fingerprint(copy) == before


def test_a_directory_is_not_replayed(tmp_path: Path) -> None:
    ranks, cache = tmp_path / "ranks", tmp_path / "cache"
    ranks.mkdir()
    shutil.copy(EXAMPLE, ranks / "rank0.pt.trace.json.gz")
    first = _tf(["analyze", str(ranks), "--json"], cache)
    assert first[0] == 0 and _entries(cache) == []
    assert _tf(["analyze", str(ranks), "--json"], cache)[3]


def test_a_missing_or_looping_trace_still_gets_its_one_line_error(tmp_path: Path) -> None:
    loop = tmp_path / "loop.json"
    loop.symlink_to(loop)
    for path in (tmp_path / "nope.json", loop):
        code, out, err, _ = _tf(["analyze", str(path), "--json"], tmp_path)
        assert code == 2 and out == b"" and err.startswith(b"tf: error:"), err


@pytest.mark.parametrize(
    ("argv", "path"),
    [
        (["analyze", "t.json", "--json"], "t.json"),
        (["analyze", "--json", "t.json"], "t.json"),
        (["analyze", "t.json"], None),  # the text report: colour, terminal width
        (["analyze", "t.json", "--json", "--top", "5"], None),
        (["analyze", "t.json", "--json", "--no-cache"], None),
        (["analyze", "--json", "--json"], None),
        (["diff", "a", "--json"], None),
        (["analyze", "-x", "--json"], None),
    ],
)
def test_only_the_plain_json_command_is_replayed(argv: list[str], path: str | None) -> None:
    assert servable(argv) == path
