"""Benchmark: idle-gap analysis time against trace load time (one run each).

Usage::

    .venv/bin/python bench/bench_analysis.py [TRACE] [--json]

Default trace: ../shared/traces/kineto/resnet50_v100_workers0.pt.trace.json.gz (75k events).
Loads the trace once (``load_path``, no cache), then runs ``analyze_gaps`` once on the loaded
session; both are wall times in this process. Acceptance target: ``ratio = analysis / load < 1``
(the analysis adds less than loading takes). One run each, so the figure carries the noise of a
shared machine; rerun when in doubt.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
DEFAULT_TRACE = ROOT.parent / "shared/traces/kineto/resnet50_v100_workers0.pt.trace.json.gz"


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("trace", nargs="?", default=str(DEFAULT_TRACE))
    ap.add_argument("--json", action="store_true", help="print one JSON object")
    args = ap.parse_args(argv)
    path = Path(args.trace)
    if not path.exists():
        print(f"{path}: not found (the default needs ../shared/traces)", file=sys.stderr)
        return 2

    from traceforensics.analysis.gaps import analyze_gaps
    from traceforensics.ingest import load_path

    t0 = time.perf_counter()
    session = load_path(path)
    t1 = time.perf_counter()
    res = analyze_gaps(session)
    t2 = time.perf_counter()
    out = {
        "trace": path.name,
        "events": session.events.height,
        "gaps": sum(d.n_gaps for d in res.devices),
        "load_s": round(t1 - t0, 4),
        "analysis_s": round(t2 - t1, 4),
        "ratio": round((t2 - t1) / (t1 - t0), 3),
    }
    if args.json:
        print(json.dumps(out))
    else:
        print(
            f"{out['trace']}: {out['events']} events, {out['gaps']} gaps; load {out['load_s']} s,"
            f" analysis {out['analysis_s']} s, ratio {out['ratio']} (target < 1)"
        )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
