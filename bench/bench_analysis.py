"""Benchmark: analysis time after load, this tree against a baseline commit, side by side.

Usage::

    .venv/bin/python bench/bench_analysis.py [TRACE] [--repeat N] [--rounds R]
        [--baseline REF] [--json]

Default trace: ../shared/traces/kineto/resnet50_v100_workers0.pt.trace.json.gz (75k events).
Default baseline: ``8c7a4c8``, the last commit before the shared analysis context (issue 9);
``--baseline none`` measures this tree alone.

The baseline is checked out into a temporary ``git worktree`` and both sides run in fresh child
processes with the same Python and packages, alternating for ``--rounds`` rounds (default 5) so
that load on a shared machine hits both alike. In each child: load the trace once (no cache), one
untimed ``analyze`` (first-call imports, polars' thread pool), then the best of ``--repeat``
(default 10) wall times of ``analysis.pipeline.analyze(session)`` with default options: what
``tf analyze`` adds after loading. Figures: the best over all rounds per side; ``speedup`` =
baseline / this tree (target for issue 9: >= 2). The load time is reported for scale.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
DEFAULT_TRACE = ROOT.parent / "shared/traces/kineto/resnet50_v100_workers0.pt.trace.json.gz"
DEFAULT_BASELINE = "8c7a4c8"

# Runs in a child process, against whichever ``src`` is first on PYTHONPATH. Uses only
# ``ingest.load_path`` and ``analysis.pipeline.analyze``, which both trees have.
CHILD = r"""
import json, sys, time
from traceforensics.analysis.pipeline import analyze
from traceforensics.ingest import load_path
t0 = time.perf_counter()
session = load_path(sys.argv[1])
load_s = time.perf_counter() - t0
result = analyze(session)
best = float("inf")
for _ in range(int(sys.argv[2])):
    t0 = time.perf_counter()
    analyze(session)
    best = min(best, time.perf_counter() - t0)
idle = sum(d.idle_ns for d in (getattr(result, "devices", None) or result.summary.devices))
print(json.dumps({"analyze_s": best, "load_s": load_s, "events": session.events.height,
                  "idle_ns": idle}))
"""


def run_child(src: Path, trace: Path, repeat: int) -> dict[str, float]:
    env = dict(os.environ, PYTHONPATH=str(src))
    out = subprocess.run(
        [sys.executable, "-c", CHILD, str(trace), str(repeat)],
        env=env,
        capture_output=True,
        text=True,
        check=True,
    )
    result: dict[str, float] = json.loads(out.stdout.strip().splitlines()[-1])
    return result


def measure(trace: Path, baseline: str, rounds: int, repeat: int) -> dict[str, dict[str, float]]:
    """Best child result per side (``current``, and ``baseline`` unless it is ``none``)."""
    sides = {"current": ROOT / "src"}
    best: dict[str, dict[str, float]] = {}
    with tempfile.TemporaryDirectory(prefix="tf-bench-") as tmp:
        wt = Path(tmp) / "baseline"
        git = ["git", "-C", str(ROOT), "worktree"]
        if baseline != "none":
            subprocess.run(
                [*git, "add", "--detach", str(wt), baseline], check=True, capture_output=True
            )
            sides = {"baseline": wt / "src", **sides}
        try:
            for _ in range(max(rounds, 1)):
                for name, src in sides.items():
                    r = run_child(src, trace, max(repeat, 1))
                    if name not in best or r["analyze_s"] < best[name]["analyze_s"]:
                        best[name] = r
        finally:
            if baseline != "none":
                subprocess.run(
                    [*git, "remove", "--force", str(wt)], check=False, capture_output=True
                )
    return best


def summary(
    trace: Path, args: argparse.Namespace, best: dict[str, dict[str, float]]
) -> dict[str, object]:
    cur = best["current"]
    out: dict[str, object] = {
        "trace": trace.name,
        "events": int(cur["events"]),
        "repeat": args.repeat,
        "rounds": args.rounds,
        "load_s": round(cur["load_s"], 4),
        "analyze_s": round(cur["analyze_s"], 4),
    }
    if "baseline" in best:
        base = best["baseline"]
        out |= {
            "baseline": args.baseline,
            "baseline_analyze_s": round(base["analyze_s"], 4),
            "speedup": round(base["analyze_s"] / cur["analyze_s"], 2),
            "same_idle_ns": base["idle_ns"] == cur["idle_ns"],
        }
    return out


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("trace", nargs="?", default=str(DEFAULT_TRACE))
    ap.add_argument("--repeat", type=int, default=10, help="analyze() runs per child; best kept")
    ap.add_argument("--rounds", type=int, default=5, help="alternating child runs per side")
    ap.add_argument("--baseline", default=DEFAULT_BASELINE, help="git ref, or 'none'")
    ap.add_argument("--json", action="store_true", help="print one JSON object")
    args = ap.parse_args(argv)
    trace = Path(args.trace)
    if not trace.exists():
        print(f"{trace}: not found (the default needs ../shared/traces)", file=sys.stderr)
        return 2
    out = summary(trace, args, measure(trace, args.baseline, args.rounds, args.repeat))
    if args.json:
        print(json.dumps(out))
        return 0
    print(f"{out['trace']}: {out['events']} events (load {out['load_s']} s)")
    if "speedup" in out:
        print(f"  baseline {args.baseline}: analyze() {out['baseline_analyze_s']:.4f} s")
    print(f"  this tree:        analyze() {out['analyze_s']:.4f} s")
    if "speedup" in out:
        print(f"  speedup {out['speedup']}x (target >= 2), same idle total: {out['same_idle_ns']}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
