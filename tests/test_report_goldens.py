"""Golden reports (issue 13): the terminal and Markdown reports of the bundled example, compared
line by line with the files under ``tests/golden/``. A change to the reports shows up here as a
diff to read; after checking it, ``TF_UPDATE_GOLDENS=1 pytest tests/test_report_goldens.py``
rewrites the goldens."""

from __future__ import annotations

import difflib
import os
from pathlib import Path

import pytest

from tests.conftest import ROOT, run_cli

GOLDEN = ROOT / "tests" / "golden"
EXAMPLE = "examples/synthetic_training.pt.trace.json.gz"  # relative: stable in every checkout


def _check(name: str, text: str) -> None:
    path = GOLDEN / name
    if os.environ.get("TF_UPDATE_GOLDENS") == "1":
        path.write_text(text, encoding="utf-8")
    want = path.read_text(encoding="utf-8")
    diff = "\n".join(
        difflib.unified_diff(want.splitlines(), text.splitlines(), "golden", "now", lineterm="")
    )
    assert text == want, f"{name} changed (TF_UPDATE_GOLDENS=1 after checking):\n{diff}"


def test_terminal_report_golden(
    capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(ROOT)
    code, out, err = run_cli(["analyze", "--no-cache", EXAMPLE], capsys)
    assert code == 0, err
    _check("example_terminal.txt", out)


def test_markdown_report_golden(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(ROOT)
    md = tmp_path / "r.md"
    code, _, err = run_cli(["analyze", "--no-cache", EXAMPLE, "--markdown", str(md)], capsys)
    assert code == 0, err
    text = md.read_text().replace(str(md), "REPORT.md")  # the output path differs per run
    _check("example_report.md", text)
