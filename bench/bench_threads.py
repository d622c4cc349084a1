"""Benchmark: do the analysis passes gain from running side by side on threads?

Usage::

    .venv/bin/python bench/bench_threads.py [TRACE] [--rounds N] [--json]

Default trace: ../shared/traces/kineto/resnet50_v100_workers0.pt.trace.json.gz (the 1x trace of
issue 12). One process loads the trace (no cache) and prepares its context once; the passes
only read it. Then, per pair of passes (the same pass twice, and the kernel pass with the idle
pass, the two long ones ``analyze`` runs side by side), the best of ``--rounds`` (default 7)
wall times of:

- ``sequential``: the two passes one after the other on this thread;
- ``threads``: the two passes started together on two threads, both joined.

``ratio`` = threads / sequential: 0.5 when the two overlap perfectly (two cores), 1.0 when
they run one at a time (the interpreter lock held, or the cores busy). The passes' polars and
numpy calls release the lock only while they compute; on small tables most of a pass is the
Python around ~300 short calls, so the ratio tells how much of the cold run's last ~0.15 s
(after the early scan's answer is taken) threads can hide. Each pass runs once untimed first
(first-call costs). Figures and their reading: docs/benchmarks.md (issue 12).
"""

from __future__ import annotations

import argparse
import json
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from traceforensics.analysis.context import prepare
from traceforensics.analysis.pipeline import ARG_KEYS_READ, EVENT_COLUMNS_READ, PASSES
from traceforensics.ingest import load_path

ROOT = Path(__file__).resolve().parents[1]
DEFAULT_TRACE = ROOT.parent / "shared/traces/kineto/resnet50_v100_workers0.pt.trace.json.gz"
PAIRS = (("kernels", "kernels"), ("idle", "idle"), ("kernels", "idle"))


Pass = Callable[[Any], Any]


def _sequential(ctx: Any, passes: tuple[Pass, Pass]) -> None:
    for run in passes:
        run(ctx)


def _threads(ctx: Any, passes: tuple[Pass, Pass]) -> None:
    started = [threading.Thread(target=run, args=(ctx,)) for run in passes]
    for t in started:
        t.start()
    for t in started:
        t.join()


Order = Callable[[Any, tuple[Pass, Pass]], None]


def _best(how: Order, ctx: Any, passes: tuple[Pass, Pass], rounds: int) -> float:
    best = float("inf")
    for _ in range(rounds):
        t0 = time.perf_counter()
        how(ctx, passes)
        best = min(best, time.perf_counter() - t0)
    return best


def measure(trace: Path, rounds: int) -> list[dict[str, Any]]:
    """One row per pair of passes: both wall times (s) and their ratio."""
    session = load_path(trace, use_cache=False).only(EVENT_COLUMNS_READ, ARG_KEYS_READ)
    ctx = prepare(session)
    for run in PASSES.values():
        run(ctx)
    rows = []
    for a, b in PAIRS:
        pair = (PASSES[a], PASSES[b])
        seq, par = _best(_sequential, ctx, pair, rounds), _best(_threads, ctx, pair, rounds)
        row = {"passes": f"{a}+{b}", "sequential_s": seq, "threads_s": par, "ratio": par / seq}
        rows.append(row)
    return rows


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    ap.add_argument("trace", nargs="?", type=Path, default=DEFAULT_TRACE)
    ap.add_argument("--rounds", type=int, default=7)
    ap.add_argument("--json", action="store_true")
    args = ap.parse_args()
    if not args.trace.exists():
        raise SystemExit(f"{args.trace}: no such trace (../shared/ beside the checkout?)")
    rows = measure(args.trace, args.rounds)
    if args.json:
        print(json.dumps(rows, indent=1))
        return
    for r in rows:
        print(
            f"{r['passes']:16s} one after the other {1e3 * r['sequential_s']:6.1f} ms"
            f"  on two threads {1e3 * r['threads_s']:6.1f} ms  ratio {r['ratio']:.2f}"
        )


if __name__ == "__main__":
    main()
