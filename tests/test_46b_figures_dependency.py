"""Figures in a default install (issue 46, item 2): matplotlib is a core dependency, imported only
when a figure is drawn; an HTML report whose figures cannot be drawn says so."""

from __future__ import annotations

import tomllib

import pytest

from tests.conftest import ROOT, fresh_python
from traceforensics import analyze, load
from traceforensics.model.errors import InputError
from traceforensics.report import plots
from traceforensics.report.html import render_html

SAMPLE = ROOT / "examples" / "synthetic_training.pt.trace.json.gz"


def test_matplotlib_is_a_core_dependency() -> None:
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    assert any(d.split(">")[0] == "matplotlib" for d in project["dependencies"])


def test_start_up_imports_no_matplotlib() -> None:
    # (``tf --version`` and the commands that draw nothing do not pay for it)
    code = (
        "import sys\n"
        "import traceforensics, traceforensics.cli.main, traceforensics.report.html\n"
        "print('matplotlib' in sys.modules)\n"
    )
    assert fresh_python(code).stdout.strip() == "False"


def test_a_report_whose_figures_cannot_be_drawn_says_why(monkeypatch: pytest.MonkeyPatch) -> None:
    analysis = analyze(load(SAMPLE))
    assert "data:image/png;base64," in render_html(analysis)  # (drawn when they can be)

    def missing(_: object) -> list[tuple[str, str, bytes]]:
        raise InputError("plots need matplotlib, a dependency of traceforensics that is missing")

    monkeypatch.setattr(plots, "figure_pngs", missing)
    page = render_html(analysis)
    assert "<h2>Figures</h2>" in page and "could not be drawn" in page
    assert "plots need matplotlib" in page and "data:image/png" not in page
