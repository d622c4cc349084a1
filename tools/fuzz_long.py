"""Long fuzz profile (issue 10): many cases per family, each family in its own process.

    python tools/fuzz_long.py --cases 1000 --jobs 2 [--timeout 60] [--json out.json]

Each case is one ``tools/fuzz_cases.py`` input run through ``tf`` in-process (the CLI entry
point, so exit codes and stderr are what a user sees) under a per-case time limit
(``signal.alarm``). A family's process reports its outcome tally, the slowest case and its
peak RSS (``ru_maxrss``); any case that is not ``ok``/``refused`` is listed with its seed so
``fuzz_runs.build_case(family, seed, folder)`` rebuilds it. Exit status 1 when any case failed
or a family's peak RSS passed ``--max-rss-mb`` (an OOM in the making). ``make fuzz-long``.
Figures of the last run: docs/reliability.md.
"""

from __future__ import annotations

import argparse
import contextlib
import io
import json
import resource
import signal
import sys
import tempfile
import time
from collections import Counter
from concurrent.futures import ProcessPoolExecutor
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))
import fuzz_cases
import fuzz_runs


class CaseTimeoutError(Exception):
    pass


def _alarm(_signum: int, _frame: Any) -> None:
    raise CaseTimeoutError


def run_case(family: str, seed: int, timeout_s: int) -> tuple[str, str, float]:
    """``(outcome, stderr, seconds)`` of one case."""
    from traceforensics.cli.main import main

    with tempfile.TemporaryDirectory(prefix="tf-fuzz-") as tmp:
        folder = Path(tmp)
        case = fuzz_runs.build_case(family, seed, folder)
        before = fuzz_runs.watch(case)
        err, out = io.StringIO(), io.TextIOWrapper(io.BytesIO())  # --json writes bytes
        code, t0 = 0, time.perf_counter()
        signal.signal(signal.SIGALRM, _alarm)
        signal.alarm(timeout_s)
        try:
            with (
                fuzz_runs.applied(case),
                contextlib.redirect_stderr(err),
                contextlib.redirect_stdout(out),
            ):
                main(case.argv)
        except SystemExit as exc:
            code = exc.code if isinstance(exc.code, int) else 1
        except CaseTimeoutError:
            return "timeout", "", time.perf_counter() - t0
        finally:
            signal.alarm(0)
        seconds = time.perf_counter() - t0
        outcome = fuzz_cases.verdict(code, err.getvalue())
        outcome = fuzz_runs.check_after(case, before) or outcome
        fuzz_runs.unlock(folder)
        return outcome, err.getvalue().strip()[:300], seconds


def run_family(family: str, cases: int, timeout_s: int) -> dict[str, Any]:
    tally: Counter[str] = Counter()
    failures: list[dict[str, Any]] = []
    slowest = (0.0, -1)
    t0 = time.perf_counter()
    for seed in range(cases):
        outcome, err, seconds = run_case(family, seed, timeout_s)
        tally[outcome] += 1
        slowest = max(slowest, (seconds, seed))
        if outcome not in ("ok", "refused"):
            failures.append({"seed": seed, "outcome": outcome, "stderr": err})
    return {
        "family": family,
        "cases": cases,
        "outcomes": dict(tally),
        "failures": failures,
        "slowest_case_s": round(slowest[0], 3),
        "slowest_seed": slowest[1],
        "wall_s": round(time.perf_counter() - t0, 1),
        "peak_rss_mb": round(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024, 1),
    }


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--cases", type=int, default=900, help="cases per family")
    parser.add_argument("--jobs", type=int, default=2)
    parser.add_argument("--timeout", type=int, default=60, help="seconds per case")
    parser.add_argument("--max-rss-mb", type=float, default=2048, help="fail above this peak")
    parser.add_argument("--json", type=Path, help="write the full report here")
    parser.add_argument("--family", action="append", choices=fuzz_runs.ALL_FAMILIES)
    args = parser.parse_args()
    families = args.family or fuzz_runs.ALL_FAMILIES
    with ProcessPoolExecutor(max_workers=args.jobs) as pool:
        reports = list(
            pool.map(run_family, families, [args.cases] * len(families),
                     [args.timeout] * len(families))
        )  # fmt: skip
    for r in reports:
        print(
            f"{r['family']:14} {r['cases']:5} cases  {r['outcomes']}  slowest "
            f"{r['slowest_case_s']} s (seed {r['slowest_seed']})  peak RSS {r['peak_rss_mb']} MB"
        )
        for f in r["failures"][:5]:
            print(f"    seed {f['seed']}: {f['outcome']}: {f['stderr'][:160]}")
    if args.json:
        args.json.write_text(json.dumps(reports, indent=2))
    too_big = [r["family"] for r in reports if r["peak_rss_mb"] > args.max_rss_mb]
    if too_big:
        print(f"peak RSS above {args.max_rss_mb} MB: {', '.join(too_big)}")
    return 1 if too_big or any(r["failures"] for r in reports) else 0


if __name__ == "__main__":
    raise SystemExit(main())
