"""``tf analyze`` imports only what it runs: the other commands, the comparison code, the rank
fan-out and the decode worker's ``multiprocessing`` are imported by what uses them (about a
third of a small trace's run was importing them). Checked in a fresh interpreter each time:
this test process has imported everything already."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

EXAMPLE = Path(__file__).resolve().parents[1] / "examples" / "synthetic_training.pt.trace.json.gz"

#: Modules ``tf analyze TRACE --json`` must not import (the largest of those made lazy).
NOT_ON_THE_ANALYZE_PATH = (
    "traceforensics.cli.diff",  # the other commands (``cli.lazy_group``)
    "traceforensics.cli.history",
    "traceforensics.cli.monitor",
    "traceforensics.cli.record",
    "traceforensics.cli.explain",
    "traceforensics.recording",
    "traceforensics.ingest.monitor",  # only with --monitor
    "traceforensics.compare",  # only with --fail-on
    "traceforensics.fanout",  # only for a directory of rank files
    "multiprocessing",
    "traceforensics.report.tables",  # the text renderers (``report.terminal``)
    "traceforensics.report.ranks_text",
    "traceforensics.report.history_text",
    "sqlalchemy",  # only with --store (``traceforensics.history``)
    "torch",
)


def _modules_after(argv: list[str], tmp_path: Path) -> set[str]:
    """Run ``tf ARGV`` through ``main`` in a fresh interpreter; the modules it imported."""
    code = (
        "import json, sys\n"
        "from traceforensics.cli.main import main\n"
        "try:\n"
        f"    main({argv!r})\n"
        "except SystemExit as exc:\n"
        "    assert not exc.code, exc.code\n"
        "sys.stderr.write(json.dumps(sorted(sys.modules)))\n"
    )
    env = os.environ | {"XDG_CACHE_HOME": str(tmp_path / "cache")}
    out = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, env=env, check=True
    )
    return set(json.loads(out.stderr))


def test_analyze_json_imports_nothing_it_does_not_run(tmp_path: Path) -> None:
    modules = _modules_after(["analyze", str(EXAMPLE), "--json", "--no-cache"], tmp_path)
    assert "traceforensics.analysis.pipeline" in modules  # (the check itself works)
    assert sorted(m for m in NOT_ON_THE_ANALYZE_PATH if m in modules) == []


@pytest.mark.parametrize("argv", [["--version"], ["explain", "host_sync"]])
def test_commands_without_traces_import_no_trace_reader(argv: list[str], tmp_path: Path) -> None:
    modules = _modules_after(argv, tmp_path)
    assert "traceforensics.ingest.kineto" not in modules
    assert "traceforensics.cli.analyze" not in modules


def test_a_mistyped_command_is_still_named(capsys: pytest.CaptureFixture[str]) -> None:
    # click suggests close names from the commands it has: the lazy group loads them first
    from traceforensics.cli.main import main

    with pytest.raises(SystemExit) as exc:
        main(["analyse", str(EXAMPLE)])
    assert exc.value.code == 2
    assert "No such command 'analyse'. Did you mean 'analyze'?" in capsys.readouterr().err


def test_every_registered_command_resolves_to_its_name() -> None:
    import click

    from traceforensics.cli.main import COMMANDS, cli

    ctx = click.Context(cli)
    assert cli.list_commands(ctx) == sorted(COMMANDS)
    for name in COMMANDS:
        command = cli.get_command(ctx, name)
        assert command is not None and command.name == name


def test_only_the_console_script_freezes_the_heap_for_exit(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """The console script's run ends the process: its heap is frozen (``gc.freeze``), so the
    interpreter's last collection does not walk it (~0.1 s of every run with polars loaded).
    An in-process ``main([...])`` (tests, scripts) leaves the collector as it was."""
    import gc

    from traceforensics.cli.main import main

    before = gc.get_freeze_count()
    main(["--version"])
    assert gc.get_freeze_count() == before
    monkeypatch.setattr(sys, "argv", ["tf", "--version"])
    try:
        main()
        assert gc.get_freeze_count() > before
    finally:
        gc.unfreeze()
    assert "traceforensics, version" in capsys.readouterr().out
