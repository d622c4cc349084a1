"""Every command's --help carries examples, the exit codes and every key an option accepts."""

from __future__ import annotations

import re

import pytest
from click.testing import CliRunner

from traceforensics.cli.main import cli
from traceforensics.model.monitor import COLUMN_KEYS
from traceforensics.report.terminal import SECTIONS


def _help(*args: str) -> str:
    result = CliRunner().invoke(cli, [*args, "--help"], terminal_width=100)
    assert result.exit_code == 0, result.output
    return " ".join(result.output.split())  # click wraps: compare as one line


@pytest.mark.parametrize("command", ["analyze", "monitor"])
def test_help_has_examples_exit_codes_and_every_column_key(command: str) -> None:
    text = _help(command)
    assert f"Examples: tf {command} " in text
    assert "Exit codes: 0 done; 2 bad input or option" in text
    listed = re.search(r"KEY in (.*?) \(e\.g\.", text)
    assert listed is not None, text
    assert set(listed.group(1).replace(" ", "").split(",")) == set(COLUMN_KEYS)


def test_analyze_help_lists_every_section() -> None:
    text = _help("analyze")
    listed = re.search(r"comma-separated: ([a-z,\- ]+?) \(or all\)", text)
    assert listed is not None, text
    assert set(listed.group(1).replace(" ", "").split(",")) == set(SECTIONS) - {"verdict"}
