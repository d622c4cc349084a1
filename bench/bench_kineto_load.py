"""Benchmark: ``load_kineto`` against plain ``gzip`` + ``json.loads`` of the same trace.

Usage::

    .venv/bin/python bench/bench_kineto_load.py [TRACE] [--repeat N] [--json]

Default trace: ../shared/traces/kineto/resnet50_v100_workers0.pt.trace.json.gz (75k events).
Both timings are best-of-N wall times in this process (warm page cache, same interpreter),
the two variants alternating so that load from other processes hits both alike.
Peak memory is measured in a fresh subprocess per variant (``VmHWM`` high-water RSS, minus the
interpreter's own after imports), so the two numbers do not pollute each other.
Acceptance target: ``ratio = load / baseline <= 2``.
"""

from __future__ import annotations

import argparse
import gzip
import json
import resource
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
DEFAULT_TRACE = ROOT.parent / "shared/traces/kineto/resnet50_v100_workers0.pt.trace.json.gz"


def baseline(path: Path) -> int:
    """gunzip + json.loads; returns the number of trace events."""
    data = json.loads(gzip.decompress(path.read_bytes()))
    events = data["traceEvents"] if isinstance(data, dict) else data
    return len(events)


def load(path: Path) -> int:
    """Full ingest into a validated TraceSession; returns its row count."""
    from traceforensics.ingest.kineto import load_kineto

    return load_kineto([path]).events.height


_CHILD = """
import sys
sys.path.insert(0, {bench_dir!r})
import bench_kineto_load as b
import traceforensics.ingest.kineto
before = b.peak_rss_bytes()
getattr(b, {variant!r})(__import__("pathlib").Path({path!r}))
print(b.peak_rss_bytes() - before)
"""


def peak_rss_bytes() -> int:
    """High-water RSS of this process: ``VmHWM`` (reset at exec, unlike ``ru_maxrss``, which a
    child inherits from its parent on Linux), else ``ru_maxrss``."""
    try:
        for line in Path("/proc/self/status").read_text().splitlines():
            if line.startswith("VmHWM:"):
                return int(line.split()[1]) * 1024
    except OSError:
        pass
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024


def _peak_child(variant: str, path: Path) -> int:
    """Peak RSS growth (bytes) of one run of ``variant`` in a fresh interpreter."""
    code = _CHILD.format(bench_dir=str(Path(__file__).parent), variant=variant, path=str(path))
    out = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, check=True
    ).stdout
    return int(out.strip().splitlines()[-1])


def alternating_best(path: Path, repeat: int) -> tuple[float, float, int, int]:
    """Best-of-N of both variants, run alternately so that load from other processes on the
    machine hits both alike."""
    t_base = t_load = float("inf")
    n_events = n_rows = 0
    for _ in range(repeat):
        start = time.perf_counter()
        n_events = baseline(path)
        t_base = min(t_base, time.perf_counter() - start)
        start = time.perf_counter()
        n_rows = load(path)
        t_load = min(t_load, time.perf_counter() - start)
    return t_base, t_load, n_events, n_rows


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("trace", nargs="?", type=Path, default=DEFAULT_TRACE)
    parser.add_argument("--repeat", type=int, default=5, help="best of N runs (default 5)")
    parser.add_argument("--json", action="store_true", help="print one JSON object instead")
    ns = parser.parse_args(argv)
    path: Path = ns.trace
    if not path.exists():
        print(f"{path}: not found (the bench needs ../shared/traces)", file=sys.stderr)
        return 2
    peaks = {v: _peak_child(v, path) for v in ("baseline", "load")}
    load(path)  # warm imports and page cache
    t_base, t_load, n_events, n_rows = alternating_best(path, ns.repeat)
    result = {
        "trace": str(path),
        "events": n_events,
        "rows": n_rows,
        "repeat": ns.repeat,
        "baseline_s": round(t_base, 4),
        "load_s": round(t_load, 4),
        "ratio": round(t_load / t_base, 3),
        "baseline_events_per_s": round(n_events / t_base),
        "load_events_per_s": round(n_events / t_load),
        "baseline_peak_bytes": peaks["baseline"],
        "load_peak_bytes": peaks["load"],
    }
    if ns.json:
        print(json.dumps(result, indent=1))
        return 0
    mib = 1024 * 1024
    print(f"trace: {path.name}  ({n_events} events, {n_rows} table rows, best of {ns.repeat})")
    print(f"{'variant':<24}{'time s':>10}{'events/s':>14}{'peak MiB':>10}")
    print(
        f"{'gunzip + json.loads':<24}{t_base:>10.3f}{result['baseline_events_per_s']:>14,}"
        f"{result['baseline_peak_bytes'] / mib:>10.1f}"
    )
    print(
        f"{'load_kineto':<24}{t_load:>10.3f}{result['load_events_per_s']:>14,}"
        f"{result['load_peak_bytes'] / mib:>10.1f}"
    )
    verdict = "OK" if result["ratio"] <= 2 else "OVER TARGET"
    print(f"ratio load/baseline: {result['ratio']:.3f}  (target <= 2: {verdict})")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
