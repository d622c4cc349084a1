"""Long profile of the generative trace-shape suite (issue 43): many drawn shapes per layout.

    python tools/shapes_long.py [--examples 20000] [--jobs 2] [--seed 43] [--json out.json]

``--examples`` (default ``TF_SHAPE_EXAMPLES`` or 20,000) are split over the four layouts
(Kineto / nsys, single file / rank directory), each layout in its own process. Every example
is checked by ``shapes_check.problems`` (the fast profile's invariants, ``tests/
test_trace_shapes.py``); every ``--full-every``-th one also runs each pass alone and ``tf
analyze`` in-process. An example never stops the run: it is tallied ``ok``, ``violation``
(an invariant broke), ``internal_error`` (an exception escaped) or ``timeout`` (over
``--timeout`` s), and the first failures of each layout are kept with their drawn timeline.
Exit 1 when any example was not ``ok``. ``make fuzz-long`` runs it; figures of the last run:
docs/reliability.md.
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import sys
import tempfile
import time
import traceback
from collections import Counter
from concurrent.futures import ProcessPoolExecutor
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))
from hypothesis import HealthCheck, given, seed, settings

import shapes
import shapes_check

LAYOUTS = [(fmt, rank_dir) for fmt in shapes.FORMATS for rank_dir in (False, True)]
_KEEP = 5  # failures kept per layout


class ExampleTimeoutError(Exception):
    pass


def _alarm(_signum: int, _frame: Any) -> None:
    raise ExampleTimeoutError


def run_layout(
    fmt: str,
    rank_dir: bool,
    examples: int,
    rng_seed: int,
    full_every: int,
    timeout_s: int,
    progress: Path | None = None,
) -> dict[str, Any]:
    """Draw ``examples`` shapes of one layout; the tally, failures and timings (also written
    to ``progress`` every 250 examples, so a long run's figures so far can be read)."""
    tally: Counter[str] = Counter()
    failures: list[dict[str, Any]] = []
    slowest = [0.0]
    signal.signal(signal.SIGALRM, _alarm)
    t0 = time.perf_counter()

    @seed(rng_seed)
    @settings(
        max_examples=examples,
        deadline=None,
        database=None,
        suppress_health_check=list(HealthCheck),
    )
    @given(shape=shapes.shapes(fmt=fmt, rank_dir=rank_dir))
    def case(shape: shapes.Shape) -> None:
        n = sum(tally.values())
        full = n % full_every == 0
        start = time.perf_counter()
        signal.alarm(timeout_s)
        try:
            with tempfile.TemporaryDirectory(prefix="tf-shape-") as tmp:
                found = shapes_check.problems(shape, Path(tmp), cli=full, alone=full)
            outcome = "violation" if found else "ok"
        except ExampleTimeoutError:
            outcome, found = "timeout", [f"over {timeout_s} s"]
        except Exception:  # an escaped exception is what this run counts: keep it, go on
            outcome, found = "internal_error", traceback.format_exc().splitlines()[-3:]
        finally:
            signal.alarm(0)
        slowest[0] = max(slowest[0], time.perf_counter() - start)
        tally[outcome] += 1
        if outcome != "ok" and len(failures) < _KEEP:
            failures.append({"outcome": outcome, "problems": found, "shape": shape.describe()})
        if progress is not None and sum(tally.values()) % 250 == 0:
            progress.write_text(json.dumps(report()))

    def report() -> dict[str, Any]:
        return {
            "format": fmt,
            "rank_dir": rank_dir,
            "examples": sum(tally.values()),
            "outcomes": dict(tally),
            "failures": failures,
            "slowest_example_s": round(slowest[0], 3),
            "wall_s": round(time.perf_counter() - t0, 1),
        }

    case()
    return report()


def _progress_file(folder: Path | None, fmt: str, rank_dir: bool) -> Path | None:
    return None if folder is None else folder / f"{fmt}-{'ranks' if rank_dir else 'file'}.json"


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    default = int(os.environ.get("TF_SHAPE_EXAMPLES", "20000"))
    parser.add_argument("--examples", type=int, default=default, help="in all, >= 20,000")
    parser.add_argument("--jobs", type=int, default=2)
    parser.add_argument("--seed", type=int, default=43)
    parser.add_argument("--full-every", type=int, default=10, help="passes alone + CLI")
    parser.add_argument("--timeout", type=int, default=60, help="seconds per example")
    parser.add_argument("--json", type=Path, help="write the full report here")
    parser.add_argument("--progress", type=Path, help="folder: each layout's figures so far")
    args = parser.parse_args()
    each = max(args.examples // len(LAYOUTS), 1)
    t0 = time.perf_counter()
    with ProcessPoolExecutor(max_workers=args.jobs) as pool:
        futures = [
            pool.submit(
                run_layout, fmt, rd, each, args.seed, args.full_every, args.timeout,
                _progress_file(args.progress, fmt, rd),
            )
            for fmt, rd in LAYOUTS
        ]  # fmt: skip
        reports = [f.result() for f in futures]
    wall = round(time.perf_counter() - t0, 1)
    for r in reports:
        layout = f"{r['format']} {'rank dir' if r['rank_dir'] else 'file'}"
        print(
            f"{layout:16} {r['examples']:6} examples  {r['outcomes']}  slowest "
            f"{r['slowest_example_s']} s  wall {r['wall_s']} s"
        )
        for f in r["failures"]:
            print(f"    {f['outcome']}: {' | '.join(f['problems'])[:300]}")
    print(f"total {sum(r['examples'] for r in reports)} examples, wall {wall} s")
    if args.json:
        args.json.write_text(json.dumps({"wall_s": wall, "layouts": reports}, indent=2))
    return 1 if any(set(r["outcomes"]) - {"ok"} for r in reports) else 0


if __name__ == "__main__":
    sys.exit(main())
