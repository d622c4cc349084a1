"""The Markdown report carries what a ticket needs (issue 13, in part): tool version, command
line, inputs, analysis window; exposed communication and the pattern per device; a rank column
and the definition of "recoverable" under the short-kernel table."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.conftest import ROOT, run_cli
from traceforensics._version import __version__

EXAMPLE = ROOT / "examples" / "synthetic_training.pt.trace.json.gz"


def test_markdown_header_and_tables(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    md = tmp_path / "ticket.md"
    argv = ["analyze", "--no-cache", str(EXAMPLE), "--steps", "3:", "--markdown", str(md)]
    code, _, err = run_cli(argv, capsys)
    assert code == 0, err
    text = md.read_text()
    head = text.split("## Verdict")[0]
    assert f"- tool: traceforensics {__version__}" in head
    assert f"- command: `tf analyze --no-cache {EXAMPLE} --steps 3: --markdown {md}`" in head
    assert f"- input: `{EXAMPLE}`" in head
    assert "- window: `device` (first to last GPU work); analysed part: steps 3:" in head
    devices = text.split("## Devices")[1].split("\n\n")[1]
    assert "| exposed comm | pattern |" in devices
    short = text.split("## Short kernels worth fusing")[1]
    assert "| rank:GPU | kernel |" in short and "*recoverable*:" in short
    assert " us " not in text and " us)" not in text  # µs, not "us"
