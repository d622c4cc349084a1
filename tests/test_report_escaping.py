"""Reports of a trace whose names are hostile (issue 13): the HTML report shows them, never runs
them; the Markdown tables keep their shape; `--report` picks the format from the extension."""

from __future__ import annotations

import html.parser
import json
from pathlib import Path

import pytest

from tests.conftest import run_cli

NAMES = [
    "<script>alert(1)</script>",
    '"><img src=x onerror=alert(2)>',
    "pipe|in|name",
    "line\nbreak",
    "日本語カーネル",
]


def _trace(path: Path) -> Path:
    events = []
    for i, name in enumerate(NAMES * 4):
        ts = 100.0 * i
        events += [
            {"ph": "X", "cat": "cpu_op", "name": f"op {name}", "pid": 1, "tid": 1, "ts": ts,
             "dur": 20.0, "args": {"External id": i}},
            {"ph": "X", "cat": "cuda_runtime", "name": "cudaLaunchKernel", "pid": 1, "tid": 1,
             "ts": ts + 5, "dur": 5.0, "args": {"correlation": i, "External id": i}},
            {"ph": "X", "cat": "kernel", "name": name, "pid": 0, "tid": 7, "ts": ts + 12,
             "dur": 3.0, "args": {"device": 0, "stream": 7, "correlation": i}},
        ]  # fmt: skip
    path.write_text(json.dumps({"traceEvents": events}))
    return path


class _Tags(html.parser.HTMLParser):
    def __init__(self) -> None:
        super().__init__()
        self.tags: set[str] = set()

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        self.tags.add(tag)
        assert not any(k.startswith("on") for k, _ in attrs), (tag, attrs)


def test_html_escapes_every_name(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    trace = _trace(tmp_path / "evil.json")
    out = tmp_path / "r.html"
    code, _, err = run_cli(["analyze", "--no-cache", str(trace), "--report", str(out)], capsys)
    assert code == 0, err
    page = out.read_text()
    parser = _Tags()
    parser.feed(page)
    assert "script" not in parser.tags  # no script element, no event handler attribute
    allowed = {
        "html",
        "head",
        "meta",
        "title",
        "style",
        "body",
        "h1",
        "h2",
        "p",
        "div",
        "ul",
        "li",
        "code",
        "b",
        "table",
        "tr",
        "th",
        "td",
        "img",
        "h3",
        "span",
        "ol",
        "br",
    }  # fmt: skip  (h3: captions, span: cause colours; ol, br: issue 47's investigation list)
    assert parser.tags <= allowed
    assert "&lt;script&gt;alert(1)&lt;/script&gt;" in page
    assert "日本語カーネル" in page
    assert "http://" not in page and "https://" not in page  # nothing fetched to view it


def test_markdown_tables_keep_their_shape(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    trace = _trace(tmp_path / "evil.json")
    out = tmp_path / "r.md"
    code, _, err = run_cli(["analyze", "--no-cache", str(trace), "--report", str(out)], capsys)
    assert code == 0, err
    blocks = [b for b in out.read_text().split("\n\n") if b.startswith("| ")]
    assert blocks
    for block in blocks:
        rows = block.splitlines()
        cells = {len(r.replace("\\|", "").split("|")) for r in rows}
        assert len(cells) == 1, block  # every row of a table has the header's columns


def test_report_extension_is_checked(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    trace = _trace(tmp_path / "evil.json")
    code, _, err = run_cli(
        ["analyze", "--no-cache", str(trace), "--report", str(tmp_path / "r.pdf")], capsys
    )
    assert code == 2 and ".html" in err and len(err.strip().splitlines()) == 1
