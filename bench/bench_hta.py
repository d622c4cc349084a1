"""Side by side with Holistic Trace Analysis (HTA) on the same trace, in one run.

HTA lives in its own virtual environment (``bench/.venv-hta``, created on first use with
``pip install traceinsight==0.6.1``, HTA's current PyPI name) so its pins never touch ours.
For each trace we time, in fresh subprocesses (best of ``--repeat``):

- HTA: ``TraceAnalysis(trace_dir=...)`` (parse) + ``get_idle_time_breakdown()``;
- tf:  ``load_path(..., use_cache=False)`` + ``analyze()`` (summary, gap attribution, kernels);
- tf cached: the same with the session cache warm (a re-run on an unchanged trace: Parquet
  instead of JSON parsing), in a private ``XDG_CACHE_HOME``.

and print both times, the ratio, and both idle totals so the views can be compared
(HTA: per stream, three buckets; tf: per device, by cause).

    python bench/bench_hta.py [--repeat 3] [--json] [TRACE ...]
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
import venv
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
DEFAULT_TRACES = [
    ROOT.parent / "shared/traces/hta/resnet_v100_ns_resolution.json.gz",
    ROOT.parent / "shared/traces/hta/ddp_nccl_a100_rank0.json.gz",
]
HTA_VENV = ROOT / "bench" / ".venv-hta"
HTA_PIN = "traceinsight==0.6.1"

HTA_SCRIPT = r"""
import json, sys, time, warnings, logging
warnings.filterwarnings("ignore"); logging.disable(logging.CRITICAL)
t0 = time.perf_counter()
from hta.trace_analysis import TraceAnalysis
t1 = time.perf_counter()
a = TraceAnalysis(trace_dir=sys.argv[1])
t2 = time.perf_counter()
df = a.get_idle_time_breakdown(visualize=False)[0]
t3 = time.perf_counter()
idle_us = float(df["idle_time"].sum())
print(json.dumps({"import_s": t1 - t0, "parse_s": t2 - t1, "idle_s": t3 - t2,
                  "total_s": t3 - t1, "idle_ns": int(round(idle_us * 1000)),
                  "by_category": {str(k): float(v) * 1000 for k, v in
                                  df.groupby("idle_category")["idle_time"].sum().items()}}))
"""

TF_SCRIPT = r"""
import json, sys, time
t0 = time.perf_counter()
from traceforensics.ingest import load_path
from traceforensics.analysis.pipeline import analyze
t1 = time.perf_counter()
cached = len(sys.argv) > 2
s = load_path(sys.argv[1], use_cache=cached)
t2 = time.perf_counter()
r = analyze(s)
t3 = time.perf_counter()
print(json.dumps({"import_s": t1 - t0, "parse_s": t2 - t1, "idle_s": t3 - t2,
                  "total_s": t3 - t1,
                  "idle_ns": sum(d.idle_ns for d in r.devices)}))
"""


def hta_python() -> Path:
    """Python of the HTA environment, created on first use."""
    py = HTA_VENV / "bin" / "python"
    if not py.exists():
        print(f"creating {HTA_VENV} with {HTA_PIN} ...", file=sys.stderr)
        venv.create(HTA_VENV, with_pip=True)
        subprocess.run([str(py), "-m", "pip", "install", "-q", HTA_PIN], check=True)
    return py


def run_json(cmd: list[str]) -> dict[str, object]:
    env = dict(os.environ, PYTHONWARNINGS="ignore")
    out = subprocess.run(cmd, check=True, capture_output=True, text=True, env=env).stdout
    result: dict[str, object] = json.loads(out.strip().splitlines()[-1])
    return result


def best(runs: list[dict[str, object]]) -> dict[str, object]:
    return min(runs, key=lambda r: float(r["total_s"]))  # type: ignore[arg-type]


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("traces", nargs="*", type=Path)
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--json", action="store_true")
    ns = ap.parse_args()
    traces = ns.traces or [t for t in DEFAULT_TRACES if t.exists()]
    if not traces:
        sys.exit("no traces: pass paths, or keep ../shared/traces beside the repository")
    py = hta_python()
    rows = []
    for trace in traces:
        with tempfile.TemporaryDirectory() as tmp:
            # HTA reads a directory of rank files
            shutil.copy(trace, Path(tmp) / trace.name)
            hta = best([run_json([str(py), "-c", HTA_SCRIPT, tmp]) for _ in range(ns.repeat)])
        ours = best(
            [run_json([sys.executable, "-c", TF_SCRIPT, str(trace)]) for _ in range(ns.repeat)]
        )
        with tempfile.TemporaryDirectory() as cache:
            os.environ["XDG_CACHE_HOME"] = cache
            warm = [sys.executable, "-c", TF_SCRIPT, str(trace), "cached"]
            run_json(warm)  # fills the cache
            cached = best([run_json(warm) for _ in range(ns.repeat)])
            del os.environ["XDG_CACHE_HOME"]
        rows.append(
            {
                "trace": trace.name,
                "hta_s": hta["total_s"],
                "tf_s": ours["total_s"],
                "speedup": float(hta["total_s"]) / float(ours["total_s"]),  # type: ignore[arg-type]
                "tf_cached_s": cached["total_s"],
                "speedup_cached": float(hta["total_s"]) / float(cached["total_s"]),  # type: ignore[arg-type]
                "hta_idle_ns_sum_over_streams": hta["idle_ns"],
                "hta_idle_by_category_ns": hta["by_category"],
                "tf_idle_ns_sum_over_devices": ours["idle_ns"],
            }
        )
    if ns.json:
        print(json.dumps(rows, indent=1))
        return
    print(f"{'trace':40} {'HTA s':>7} {'tf s':>7} {'speedup':>8} {'cached s':>9} {'speedup':>8}")
    for r in rows:
        print(
            f"{r['trace']:40} {r['hta_s']:7.3f} {r['tf_s']:7.3f} {r['speedup']:7.1f}x"
            f" {r['tf_cached_s']:9.3f} {r['speedup_cached']:7.1f}x"
        )
    print("(parse + idle analysis, best of", ns.repeat, "runs each, fresh processes)")


if __name__ == "__main__":
    main()
