"""docs/mcp.md and the JSON contract say what ``tf mcp`` does: every tool in the table and in
the contract, the field lists equal to the views', the editor snippets valid JSON, and the
transcript's tool list the server's own descriptions (a changed description means re-running
``tools/mcp_transcript.py``)."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from traceforensics.report import views, views_runs

DOCS = Path(__file__).resolve().parents[1] / "docs"
MCP = (DOCS / "mcp.md").read_text(encoding="utf-8")
CONTRACT = (DOCS / "json-output.md").read_text(encoding="utf-8").split("## `tf mcp`'s answers")[1]


def _descriptions() -> dict[str, str]:
    pytest.importorskip("mcp", reason="tf mcp needs the mcp extra")
    from traceforensics.cli.mcp_server import DESCRIPTIONS

    return dict(DESCRIPTIONS)


def test_every_tool_is_in_the_docs_table_and_the_contract() -> None:
    for name in _descriptions():
        assert re.search(rf"^\| `{name}` \|", MCP, re.M), name
        assert re.search(rf"^\| `{name}` \|", CONTRACT, re.M), name


def test_the_contract_lists_the_views_fields() -> None:
    for field in (*views._DEVICE_FIELDS, *views._RANK_FIELDS, *views_runs._FIGURE_FIELDS):
        assert f"`{field}`" in CONTRACT, field


def test_the_editor_snippets_are_valid_json() -> None:
    blocks = re.findall(r"```json\n(.*?)```", MCP.split("## A real exchange")[0], re.S)
    assert len(blocks) >= 3
    for block in blocks:
        for line in block.strip().splitlines() if block.lstrip().startswith('{"what"') else [block]:
            json.loads(line)


def test_the_transcript_shows_the_servers_tools() -> None:
    exchange = MCP.split("## A real exchange")[1]
    for name, text in _descriptions().items():
        assert f"- `{name}`: {text}" in exchange, f"re-run tools/mcp_transcript.py ({name})"
    assert "→ error" in exchange and "outside the folders this server may read" in exchange
