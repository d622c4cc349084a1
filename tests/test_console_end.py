"""The console script ends its process the usual way once a command ran: the standard streams
flushed, the ``atexit`` handlers and the interpreter's own shutdown run, the exit code kept,
another thread joined. Checked in fresh interpreters running ``cli.entry.main`` as the ``tf``
script does."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

EXAMPLE = Path(__file__).resolve().parents[1] / "examples" / "synthetic_training.pt.trace.json.gz"

#: ``tf ARGS`` as the console script, with an atexit handler, a probe the interpreter's own
#: shutdown runs, and optionally a thread still running.
_SCRIPT = """
import atexit, os, sys, threading, time
sys.argv = ["tf", *sys.argv[1:]]
atexit.register(lambda: sys.stderr.write("atexit ran\\n"))

# run by the interpreter's shutdown (``threading._shutdown``), not by ``atexit``
threading._register_atexit(lambda: os.write(2, b"teardown ran\\n"))
if "--with-thread" in sys.argv:
    sys.argv.remove("--with-thread")

    def late():
        # alive until the main thread stopped (the shutdown began): a fixed sleep could end
        # before a slow machine's command did, and the command would then see no thread
        while threading.main_thread().is_alive():
            time.sleep(0.01)
        sys.stderr.write("thread finished\\n")

    threading.Thread(target=late).start()
from traceforensics.cli.entry import main
main()
"""


def _tf(args: list[str], tmp_path: Path) -> subprocess.CompletedProcess[str]:
    env = os.environ | {"XDG_CACHE_HOME": str(tmp_path / "cache")}
    return subprocess.run(
        [sys.executable, "-c", _SCRIPT, *args],
        capture_output=True,
        text=True,
        env=env,
        check=False,
        timeout=120,
    )


def test_a_finished_command_flushes_and_shuts_down(tmp_path: Path) -> None:
    done = _tf(["analyze", str(EXAMPLE), "--json", "--no-cache"], tmp_path)
    assert done.returncode == 0, done.stderr
    document = json.loads(done.stdout)  # the whole output was flushed
    assert document["devices"], document.keys()
    assert "atexit ran" in done.stderr
    assert "teardown ran" in done.stderr
    # the same document with another thread running
    usual = _tf(["analyze", str(EXAMPLE), "--json", "--no-cache", "--with-thread"], tmp_path)
    assert usual.returncode == 0, usual.stderr
    assert _without_timing(json.loads(usual.stdout)) == _without_timing(document)


def test_another_thread_is_joined_by_the_usual_shutdown(tmp_path: Path) -> None:
    done = _tf(["--version", "--with-thread"], tmp_path)
    assert done.returncode == 0, done.stderr
    assert "traceforensics, version" in done.stdout
    # the thread outlived the command: killing it would have lost its write
    assert done.stderr.count("thread finished") == 1
    assert "teardown ran" in done.stderr


def test_exit_codes_are_kept(tmp_path: Path) -> None:
    missing = _tf(["analyze", str(tmp_path / "absent.pt.trace.json")], tmp_path)
    assert missing.returncode == 2
    assert missing.stderr.startswith("tf: error:"), missing.stderr
    assert "atexit ran" in missing.stderr
    usage = _tf(["analyze", str(EXAMPLE), "--no-such-option"], tmp_path)
    assert usage.returncode == 2, usage.stderr
    assert "atexit ran" in usage.stderr


def _without_timing(document: dict[str, object]) -> dict[str, object]:
    """The document less what differs between two runs of one input (wall-clock figures)."""
    return {k: v for k, v in document.items() if k not in {"timing", "generated_at"}}
