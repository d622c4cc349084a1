"""A real exchange with ``tf mcp`` as Markdown: the transcript in docs/mcp.md.

Starts the server as an MCP client does (``tf mcp --root TRACES`` over stdio, the SDK's own
client), lists its tools and makes the calls an assistant makes for "why is my GPU idle, and
did the data-loader change help?" on the shared ResNet-50 pair: ``analyze``, ``findings`` of
one category, ``gap``, ``explain`` and ``diff``, then one refused path. Each request is written
as sent and each answer as received (long answers cut at ``--chars`` characters, marked), with
the time it took.

    .venv/bin/python tools/mcp_transcript.py --traces ../shared/traces > /tmp/transcript.md
"""

from __future__ import annotations

import argparse
import contextlib
import json
import sys
import time
from pathlib import Path
from typing import Any

import anyio

W0 = "kineto/resnet50_v100_workers0.pt.trace.json.gz"
W4 = "kineto/resnet50_v100_workers4.pt.trace.json.gz"
CALLS: list[tuple[str, dict[str, Any]]] = [
    ("analyze", {"path": W0}),
    ("findings", {"path": W0, "category": "data_loading"}),
    ("gap", {"path": W0, "index": 0}),
    ("explain", {"id": "data_loading"}),
    ("diff", {"before": W0, "after": W4, "fail_on": ["step_time>+5%"]}),
    ("analyze", {"path": W0}),  # the same question again: answered from memory
    ("analyze", {"path": "/etc/passwd"}),
]


def _shown(text: str, chars: int) -> str:
    """The answer, pretty-printed, cut at ``chars`` characters."""
    with contextlib.suppress(ValueError):  # (an error is one line of text, not JSON)
        text = json.dumps(json.loads(text), indent=1, ensure_ascii=False)
    if len(text) <= chars:
        return text
    return text[:chars] + f"\n… ({len(text) - chars:,} more characters in the answer)"


async def _exchange(traces: Path, chars: int) -> list[str]:
    from mcp import Client
    from mcp.client.stdio import StdioServerParameters

    tf = str(Path(sys.executable).with_name("tf"))
    params = StdioServerParameters(command=tf, args=["mcp", "--root", str(traces)], cwd=str(traces))
    out = [
        f"Server: `tf mcp --root {traces.name}` (started by the client in that folder)",
        "",
    ]
    async with Client(params) as client:
        tools = (await client.list_tools()).tools
        out += ["**tools/list** →", "", *(f"- `{t.name}`: {t.description}" for t in tools), ""]
        for name, arguments in CALLS:
            t0 = time.perf_counter()
            result = await client.call_tool(name, arguments)
            took = time.perf_counter() - t0
            kind = "error" if result.is_error else "answer"
            text = result.content[0].text  # type: ignore[union-attr]
            out += [
                f"**tools/call** `{name}` `{json.dumps(arguments)}` → {kind} in {took:.2f} s, "
                f"{len(text):,} characters",
                "",
                "```json" if not result.is_error else "```",
                _shown(text, chars),
                "```",
                "",
            ]
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument(
        "--traces", type=Path, default=Path(__file__).resolve().parents[2] / "shared" / "traces"
    )
    ap.add_argument("--chars", type=int, default=1800, help="characters of each answer shown")
    args = ap.parse_args()
    lines = anyio.run(_exchange, args.traces.resolve(), args.chars)
    sys.stdout.write("\n".join(lines) + "\n")


if __name__ == "__main__":
    main()
