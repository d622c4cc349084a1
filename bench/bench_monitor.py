"""Benchmark ``tf monitor``: a 7-day, 1 s, 8-GPU nvidia-smi log (4.84 M rows), parse + analyze.

Generates the log in a temporary directory (vectorised, polars CSV writer), then runs the
monitor command end to end in a child process and reports wall seconds and the child's peak
resident memory (``ru_maxrss``). Targets: < 60 s, well under 2 GB.

    .venv/bin/python bench/bench_monitor.py [--days 7] [--gpus 8] [--keep DIR]
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np
import polars as pl

START = "2025-03-21 00:00:00"
TARGET_S = 60.0
TARGET_MIB = 2048.0


def make_log(path: Path, days: int, gpus: int, seed: int = 0) -> int:
    """Write the log; returns the number of rows. GPU g is tidal with a (60 + 10 g) s period;
    GPU 0 throttles (thermal) for an hour on day 1."""
    rng = np.random.default_rng(seed)
    n = days * 86_400
    t = np.arange(n, dtype=np.int64)
    frames = []
    base = pl.datetime_range(
        pl.lit(START).str.to_datetime(),
        pl.lit(START).str.to_datetime() + pl.duration(seconds=n - 1),
        "1s",
        eager=True,
    ).dt.strftime("%Y/%m/%d %H:%M:%S.000")
    for g in range(gpus):
        period = 60 + 10 * g
        util = np.where((t % period) < period * 2 // 3, 95.0, 3.0) + rng.normal(0, 2.5, n)
        util = np.clip(util, 0, 100)
        clock = np.where(util >= 20, 1980.0, 345.0 + util * 30) + rng.normal(0, 8, n)
        temp = 40 + 0.32 * util + rng.normal(0, 1, n)
        mask = np.zeros(n, dtype=np.int64)
        if g == 0:
            w = slice(86_400, 86_400 + 3600)
            clock[w] = np.where(util[w] >= 20, 1425.0, clock[w])
            temp[w] = 88.0
            mask[w] = 0x20
        frames.append(
            pl.DataFrame(
                {
                    "timestamp": base,
                    " index": np.full(n, g, dtype=np.int32),
                    " utilization.gpu [%]": util.round(0).astype(np.int32),
                    " memory.used [MiB]": (40_000 + rng.normal(0, 4, n)).round(0).astype(np.int32),
                    " clocks.sm [MHz]": clock.round(0).astype(np.int32),
                    " clocks.max.sm [MHz]": np.full(n, 1980, dtype=np.int32),
                    " temperature.gpu": temp.round(0).astype(np.int32),
                    " power.draw [W]": (70 + 5.3 * util + rng.normal(0, 6, n)).round(2),
                    " power.limit [W]": np.full(n, 700.0),
                    " clocks_throttle_reasons.active": pl.Series(mask).map_elements(
                        lambda m: f"0x{m:016x}", return_dtype=pl.String
                    )
                    if n < 1000
                    else pl.Series(np.char.add("0x", np.char.zfill(np.char.mod("%x", mask), 16))),
                }
            )
        )
    # nvidia-smi prints one row per GPU per tick: interleave by time
    frame = (
        pl.concat(frames)
        .with_row_index("_i")
        .with_columns((pl.col("_i") % n).alias("_t"))
        .sort("_t", "_i")
        .drop("_i", "_t")
    )
    frame.write_csv(path)
    return frame.height


# The child reports its own peak RSS: ru_maxrss survives exec, so a child forked from a parent
# that still held the generated data would report the parent's memory. Generation therefore
# runs in its own child too, and this parent stays small.
CHILD = (
    "import resource, sys; from traceforensics.cli.monitor import monitor_command; "
    "monitor_command.main([sys.argv[1], '--json'], standalone_mode=False); "
    "print(f'MAXRSS_KIB {resource.getrusage(resource.RUSAGE_SELF).ru_maxrss}', file=sys.stderr)"
)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--days", type=int, default=7)
    ap.add_argument("--gpus", type=int, default=8)
    ap.add_argument("--keep", type=Path, default=None, help="write the log here and keep it")
    ap.add_argument("--generate-only", type=Path, default=None, help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.generate_only is not None:
        rows = make_log(args.generate_only, args.days, args.gpus)
        print(rows)
        return
    with tempfile.TemporaryDirectory() as tmp:
        path = (args.keep or Path(tmp)) / "smi_7d.csv"
        path.parent.mkdir(parents=True, exist_ok=True)
        t0 = time.perf_counter()
        gen = subprocess.run(
            [
                sys.executable,
                __file__,
                "--days",
                str(args.days),
                "--gpus",
                str(args.gpus),
                "--generate-only",
                str(path),
            ],
            capture_output=True,
            text=True,
            check=True,
        )
        rows = int(gen.stdout.strip())
        gen_s = time.perf_counter() - t0
        size_mib = path.stat().st_size / 2**20
        print(f"generated {rows:,} rows ({size_mib:.0f} MiB) in {gen_s:.1f} s")
        t0 = time.perf_counter()
        proc = subprocess.run(
            [sys.executable, "-c", CHILD, str(path)], capture_output=True, text=True, check=False
        )
        wall = time.perf_counter() - t0
        if proc.returncode != 0:
            print(proc.stderr, file=sys.stderr)
            sys.exit(1)
        peak_mib = int(proc.stderr.split("MAXRSS_KIB")[-1].split()[0]) / 1024
        report = json.loads(proc.stdout)
        pats = [
            (g["gpu"], g["pattern"], g["period_s"], len(g["throttle_episodes"]))
            for g in report["gpus"]
        ]
        print(f"tf monitor (parse + analyze + JSON): {wall:.1f} s, peak RSS {peak_mib:.0f} MiB")
        print(f"per GPU (gpu, pattern, period_s, throttle episodes): {pats}")
        ok = wall < TARGET_S and peak_mib < TARGET_MIB
        print(f"target < {TARGET_S:.0f} s and < {TARGET_MIB:.0f} MiB: {'met' if ok else 'MISSED'}")


if __name__ == "__main__":
    main()
