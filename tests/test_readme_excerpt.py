"""The README shows real output (issue 13): its "What you get" block is the first lines of
``tf analyze`` on the ResNet-50 trace, and the figure it links is a PNG in the repository."""

from __future__ import annotations

import re

import pytest

from tests.conftest import ROOT, run_cli, shared_trace

TRACE = "kineto/resnet50_v100_workers0.pt.trace.json.gz"


def _section() -> str:
    text = (ROOT / "README.md").read_text(encoding="utf-8")
    return text.split("## What you get\n", 1)[1].split("\n## ", 1)[0]


def test_readme_verdict_is_the_real_output(
    capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    path = shared_trace(TRACE)
    block = re.search(r"```\n\$ tf analyze (\S+)\n(.*?)```", _section(), re.S)
    assert block is not None and block.group(1) == path.name
    shown = block.group(2).splitlines()
    monkeypatch.chdir(path.parent)  # the README runs it from the trace's folder
    code, out, err = run_cli(["analyze", "--no-cache", path.name], capsys)
    assert code == 0, err
    assert len(shown) >= 6 and out.splitlines()[: len(shown)] == shown


def test_readme_figure_is_a_small_png() -> None:
    links = re.findall(r"!\[[^\]]+\]\(([^)]+)\)", _section())
    assert links, "no figure in the README's What you get"
    for link in links:
        data = (ROOT / link).read_bytes()
        assert data[:8] == b"\x89PNG\r\n\x1a\n" and 10_000 < len(data) < 150_000


def test_readme_diff_verdict_is_the_real_output(
    capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    text = (ROOT / "README.md").read_text(encoding="utf-8")
    section = text.split("## Did the change work?", 1)[1].split("\n## ", 1)[0]
    block = re.search(r"```\n\$ tf diff (\S+) (\S+)\n(.*?)```", section, re.S)
    assert block is not None
    before, after = (
        shared_trace(f"kineto/{block.group(1)}"),
        shared_trace(f"kineto/{block.group(2)}"),
    )
    monkeypatch.chdir(before.parent)
    code, out, err = run_cli(["diff", before.name, after.name], capsys)
    assert code == 0, err
    shown = block.group(3).rstrip("\n")
    assert len(shown.splitlines()) >= 3 and shown in out


def test_readme_investigation_is_the_real_output(
    capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """Issue 47: the investigation excerpt is ``--sections method`` on the same trace."""
    path = shared_trace(TRACE)
    block = re.search(r"```\n\$ tf analyze (\S+) --sections method\n(.*?)```", _section(), re.S)
    assert block is not None and block.group(1) == path.name
    monkeypatch.chdir(path.parent)
    code, out, err = run_cli(["analyze", "--no-cache", path.name, "--sections", "method"], capsys)
    assert code == 0, err
    shown = block.group(2).rstrip("\n")
    assert shown.startswith("== Investigation") and shown in out
