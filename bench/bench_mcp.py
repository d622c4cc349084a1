"""``tf mcp``'s answers: the cost of a first question and of the next ones, in one run.

Per trace (the shared ones and the ResNet-50 trace tiled ``--tiled`` times, as
``bench_scale.py`` makes it), in a fresh cache folder: the first ``analyze`` (a cold
analysis), a second question from a new server state (the analysis cache on disk only: what
each question would cost without the in-memory memo) and a second question from the same
server state (the memo of ``cli.mcp_tools``). The memo stays only if the last column is far
below the middle one (docs/benchmarks.md, "Issue 49"). Also: how long ``tf mcp`` takes to
start and list its tools.

    .venv/bin/python bench/bench_mcp.py [--repeat 5] [--tiled 10]
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path

SHARED = Path(__file__).resolve().parents[2] / "shared" / "traces"
TRACES = (
    "kineto/resnet50_v100_workers0.pt.trace.json.gz",
    "nsys/jsun-012__assignment2-systems__result.sqlite",
    "hta/job128_sampled",
)


def _ms(seconds: list[float]) -> str:
    return f"{statistics.median(seconds) * 1000:8.1f} ms"


def _startup(repeat: int) -> list[float]:
    import anyio
    from mcp import Client
    from mcp.client.stdio import StdioServerParameters

    tf = str(Path(sys.executable).with_name("tf"))

    async def once() -> float:
        t0 = time.perf_counter()
        async with Client(StdioServerParameters(command=tf, args=["mcp"])) as client:
            await client.list_tools()
            return time.perf_counter() - t0

    return [anyio.run(once) for _ in range(repeat)]


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--repeat", type=int, default=5)
    ap.add_argument(
        "--tiled", type=int, default=10, help="also the ResNet-50 trace tiled N times (0: not)"
    )
    args = ap.parse_args()
    paths = [SHARED / rel for rel in TRACES]
    if args.tiled > 1:
        from bench_scale import tiled  # (this folder: the tiled traces bench_scale caches)

        paths.append(tiled(args.tiled))
    os.environ["XDG_CACHE_HOME"] = tempfile.mkdtemp(prefix="tf-bench-mcp-")
    from traceforensics.cli.mcp_roots import Roots
    from traceforensics.cli.mcp_tools import Tools

    print(f"{'trace':<55} {'first':>11} {'disk cache':>11} {'memo':>11}")
    roots = Roots.of(sorted({str(SHARED), *(str(p.parent) for p in paths)}))
    for p in paths:
        path, rel = str(p), str(p.relative_to(p.parents[1]))
        cold, disk, memo = [], [], []
        for _ in range(args.repeat):
            os.environ["XDG_CACHE_HOME"] = tempfile.mkdtemp(prefix="tf-bench-mcp-")
            tools = Tools(roots)
            t0 = time.perf_counter()
            tools.analyze(path)
            cold.append(time.perf_counter() - t0)
            t0 = time.perf_counter()
            Tools(roots).findings(path)
            disk.append(time.perf_counter() - t0)
            t0 = time.perf_counter()
            tools.findings(path)
            memo.append(time.perf_counter() - t0)
        print(f"{rel:<55} {_ms(cold)} {_ms(disk)} {_ms(memo)}")
    print(f"tf mcp start and tools/list: {_ms(_startup(args.repeat))}")


if __name__ == "__main__":
    main()
