"""Benchmark: analysis time (gap pass, kernel pass, whole ``tf analyze`` pipeline) against load.

Usage::

    .venv/bin/python bench/bench_analysis.py [TRACE] [--repeat N] [--json]

Default trace: ../shared/traces/kineto/resnet50_v100_workers0.pt.trace.json.gz (75k events).
Each figure is the best of ``--repeat`` (default 3) wall times in this process:

- ``load_s``: ``load_path`` (no cache), a fresh session each time;
- ``gaps_s``: ``analyze_gaps``; ``kernels_s``: ``analyze_kernels``;
- ``analyze_s``: the full pipeline ``analysis.pipeline.analyze`` (summary, gaps, kernels,
  utilization patterns): what ``tf analyze`` adds after loading.

The passes run on the last loaded session, after one untimed warm-up of ``analyze`` (first-call
imports and polars' thread pool start are not analysis time). Acceptance target:
``ratio = analyze_s / load_s < 1`` (the whole analysis adds less than loading takes). Best-of-N
damps, but does not remove, the noise of a shared machine; rerun when in doubt.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import TypeVar

ROOT = Path(__file__).resolve().parents[1]
DEFAULT_TRACE = ROOT.parent / "shared/traces/kineto/resnet50_v100_workers0.pt.trace.json.gz"

T = TypeVar("T")


def best_of(repeat: int, fn: Callable[[], T]) -> tuple[float, T]:
    """Smallest wall time of ``repeat`` calls (seconds) and the last call's result."""
    best = float("inf")
    result: T | None = None
    for _ in range(max(repeat, 1)):
        t0 = time.perf_counter()
        result = fn()
        best = min(best, time.perf_counter() - t0)
    assert result is not None
    return best, result


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("trace", nargs="?", default=str(DEFAULT_TRACE))
    ap.add_argument("--repeat", type=int, default=3, help="runs per figure; best kept")
    ap.add_argument("--json", action="store_true", help="print one JSON object")
    args = ap.parse_args(argv)
    path = Path(args.trace)
    if not path.exists():
        print(f"{path}: not found (the default needs ../shared/traces)", file=sys.stderr)
        return 2

    from traceforensics.analysis.idle.gaps import analyze_gaps
    from traceforensics.analysis.kernels.forensics import analyze_kernels
    from traceforensics.analysis.pipeline import analyze
    from traceforensics.ingest import load_path

    load_s, session = best_of(args.repeat, lambda: load_path(path))
    analyze(session)  # warm-up, untimed
    gaps_s, gaps = best_of(args.repeat, lambda: analyze_gaps(session))
    kernels_s, kernels = best_of(args.repeat, lambda: analyze_kernels(session))
    analyze_s, _ = best_of(args.repeat, lambda: analyze(session))
    out = {
        "trace": path.name,
        "events": session.events.height,
        "gaps": sum(d.n_gaps for d in gaps.devices),
        "kernels": kernels.kernel_count,
        "repeat": max(args.repeat, 1),
        "load_s": round(load_s, 4),
        "gaps_s": round(gaps_s, 4),
        "kernels_s": round(kernels_s, 4),
        "analyze_s": round(analyze_s, 4),
        "ratio": round(analyze_s / load_s, 3),
    }
    if args.json:
        print(json.dumps(out))
    else:
        print(
            f"{out['trace']}: {out['events']} events, {out['gaps']} gaps, {out['kernels']}"
            f" kernels (best of {out['repeat']})\n"
            f"  load         {out['load_s']:.4f} s\n"
            f"  analyze_gaps {out['gaps_s']:.4f} s\n"
            f"  kernels      {out['kernels_s']:.4f} s\n"
            f"  analyze()    {out['analyze_s']:.4f} s\n"
            f"  ratio analyze/load {out['ratio']} (target < 1)"
        )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
