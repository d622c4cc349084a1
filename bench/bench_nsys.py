"""Benchmark: Nsight Systems SQLite ingest vs a plain ``sqlite3`` ``SELECT *`` of the same tables.

Usage: python bench/bench_nsys.py [--kernels N] [--repeat R] [--json] [--keep PATH]

Generates (into a temporary folder, deleted afterwards; ``--keep PATH`` writes it there instead
and reuses it on later runs) an export with N kernel rows (default 2,000,000), one
``cudaLaunchKernel`` runtime row per kernel with the same correlation id, interned names and the
usual metadata tables. Then, each in a fresh child
process so peak memory is not shared:

- ``load``: ``traceforensics.ingest.nsys.load_nsys(path)`` end to end (validated session);
- ``plain``: ``SELECT *`` of the kernel, runtime and string tables into Python lists.

Reports wall and CPU seconds, kernel rows/s, total rows/s, peak RSS (MB), the ratio plain/load
(> 1 means the ingester is faster than merely fetching the rows with ``sqlite3``), which bulk
reader was used and the 1-minute load average (wall times on a shared machine vary with it).
``load`` runs ``--repeat`` times (default 3), each in a fresh process: ``load_seconds`` and the
rates are the best run (like ``timeit``: other processes only ever add time), ``*_median`` the
median run; ``plain`` runs once.
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import sqlite3
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

KERNEL_COLS = (
    "start INTEGER NOT NULL, end INTEGER NOT NULL, deviceId INTEGER NOT NULL, "
    "contextId INTEGER NOT NULL, greenContextId INTEGER, streamId INTEGER NOT NULL, "
    "correlationId INTEGER, globalPid INTEGER, demangledName INTEGER NOT NULL, "
    "shortName INTEGER NOT NULL, mangledName INTEGER, launchType INTEGER, cacheConfig INTEGER, "
    "registersPerThread INTEGER NOT NULL, gridX INTEGER NOT NULL, gridY INTEGER NOT NULL, "
    "gridZ INTEGER NOT NULL, blockX INTEGER NOT NULL, blockY INTEGER NOT NULL, "
    "blockZ INTEGER NOT NULL, staticSharedMemory INTEGER NOT NULL, "
    "dynamicSharedMemory INTEGER NOT NULL, localMemoryPerThread INTEGER NOT NULL, "
    "localMemoryTotal INTEGER NOT NULL, gridId INTEGER NOT NULL, sharedMemoryExecuted INTEGER"
)
RUNTIME_COLS = (
    "start INTEGER NOT NULL, end INTEGER NOT NULL, eventClass INTEGER NOT NULL, "
    "globalTid INTEGER, correlationId INTEGER, nameId INTEGER NOT NULL, "
    "returnValue INTEGER NOT NULL, callchainId INTEGER"
)
N_NAMES = 200
PIDS = (4101, 4102)


def generate(path: Path, kernels: int) -> None:
    """Write a synthetic export with ``kernels`` kernel rows and as many runtime rows (SQL-side)."""
    conn = sqlite3.connect(path)
    conn.execute("PRAGMA journal_mode = OFF")
    conn.execute("PRAGMA synchronous = OFF")
    conn.execute("CREATE TABLE StringIds (id INTEGER PRIMARY KEY, value TEXT NOT NULL)")
    names = [(1, "cudaLaunchKernel_v7000")]
    for i in range(N_NAMES):
        names.append((10 + 2 * i, f"void at::native::kernel_{i}<float, {i % 7}>(int, float*)"))
        names.append((11 + 2 * i, f"kernel_{i}"))
    conn.executemany("INSERT INTO StringIds VALUES (?, ?)", names)
    conn.execute("CREATE TABLE META_DATA_EXPORT (name TEXT, value TEXT)")
    conn.execute("INSERT INTO META_DATA_EXPORT VALUES ('EXPORT_SCHEMA_VERSION', '3.20.3')")
    conn.execute(
        "CREATE TABLE TARGET_INFO_GPU (vmId INTEGER, id INTEGER, name TEXT, totalMemory INTEGER, "
        "memoryBandwidth INTEGER, clockRate INTEGER, smCount INTEGER, computeMajor INTEGER, "
        "computeMinor INTEGER)"
    )
    conn.execute(
        "INSERT INTO TARGET_INFO_GPU VALUES (0, 0, 'GPU 0', 1, 1, 1, 100, 9, 0), "
        "(0, 1, 'GPU 1', 1, 1, 1, 100, 9, 0)"
    )
    conn.execute(f"CREATE TABLE CUPTI_ACTIVITY_KIND_KERNEL ({KERNEL_COLS})")
    conn.execute(f"CREATE TABLE CUPTI_ACTIVITY_KIND_RUNTIME ({RUNTIME_COLS})")
    # i -> process i % 2 (device i % 2), correlation i // 2 + 1 (collides across processes)
    series = (
        f"WITH RECURSIVE s(i) AS (SELECT 0 UNION ALL SELECT i + 1 FROM s WHERE i < {kernels - 1})"
    )
    pid = f"(CASE i % 2 WHEN 0 THEN {PIDS[0]} ELSE {PIDS[1]} END)"
    conn.execute(
        f"{series} INSERT INTO CUPTI_ACTIVITY_KIND_KERNEL SELECT "
        "1000000 + i * 1500, 1000000 + i * 1500 + 1000 + (i % 13) * 10, i % 2, 1, NULL, "
        f"7 + (i % 3), i / 2 + 1, (1 << 48) | ({pid} << 24), 10 + 2 * (i % {N_NAMES}), "
        f"11 + 2 * (i % {N_NAMES}), NULL, 1, 0, 32, 128 + i % 64, 1, 1, 256, 1, 1, 0, 0, 0, 0, "
        "i, 0 FROM s"
    )
    conn.execute(
        f"{series} INSERT INTO CUPTI_ACTIVITY_KIND_RUNTIME SELECT "
        "999000 + i * 1500, 999000 + i * 1500 + 700, 0, "
        f"(1 << 48) | ({pid} << 24) | ({pid} + i % 4), i / 2 + 1, 1, 0, NULL FROM s"
    )
    conn.commit()
    conn.close()


def _peak_mb() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024  # Linux: KiB


def _cpu_seconds() -> float:
    """User + system CPU of this process (all threads): robust to a busy shared machine."""
    usage = resource.getrusage(resource.RUSAGE_SELF)
    return usage.ru_utime + usage.ru_stime


def child(mode: str, path: Path) -> dict[str, Any]:
    if mode == "load":
        from traceforensics.ingest.nsys import load_nsys

        c0, t0 = _cpu_seconds(), time.perf_counter()
        session = load_nsys(path)
        seconds = time.perf_counter() - t0
        rows = session.events.height
    else:
        c0, t0 = _cpu_seconds(), time.perf_counter()
        conn = sqlite3.connect(f"file:{path}?mode=ro", uri=True)
        tables = [
            conn.execute(f"SELECT * FROM {t}").fetchall()
            for t in ("CUPTI_ACTIVITY_KIND_KERNEL", "CUPTI_ACTIVITY_KIND_RUNTIME", "StringIds")
        ]
        seconds = time.perf_counter() - t0
        rows = sum(len(t) for t in tables)
    cpu = _cpu_seconds() - c0
    return {"mode": mode, "seconds": seconds, "cpu": cpu, "rows": rows, "peak_mb": _peak_mb()}


def _has_adbc() -> bool:
    from traceforensics.ingest.nsys.db import adbc_module

    return adbc_module() is not None


def _run_child(mode: str, path: Path) -> dict[str, Any]:
    out = subprocess.run(
        [sys.executable, __file__, "--child", mode, str(path)],
        check=True,
        capture_output=True,
        text=True,
    )
    result: dict[str, Any] = json.loads(out.stdout.strip().splitlines()[-1])
    return result


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--kernels", type=int, default=2_000_000)
    parser.add_argument("--repeat", type=int, default=3, help="load runs (best and median)")
    parser.add_argument("--json", action="store_true")
    parser.add_argument("--keep", type=Path, help="write the generated export here and keep it")
    parser.add_argument("--child", nargs=2, metavar=("MODE", "PATH"), help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        print(json.dumps(child(args.child[0], Path(args.child[1]))))
        return 0
    with tempfile.TemporaryDirectory(prefix="tf-bench-nsys-") as tmp:
        path = args.keep or Path(tmp) / "synthetic.sqlite"
        if not path.exists():
            t0 = time.perf_counter()
            generate(path, args.kernels)
            print(f"generated {path} in {time.perf_counter() - t0:.1f}s", file=sys.stderr)
        loads = sorted(
            (_run_child("load", path) for _ in range(max(1, args.repeat))),
            key=lambda r: float(r["seconds"]),
        )
        plain = _run_child("plain", path)
    load, median = loads[0], loads[len(loads) // 2]
    result = {
        "kernel_rows": args.kernels,
        "runtime_rows": args.kernels,
        "load_runs": len(loads),
        "load_seconds": round(load["seconds"], 3),
        "load_seconds_median": round(median["seconds"], 3),
        "kernel_rows_per_s": round(args.kernels / load["seconds"]),
        "kernel_rows_per_s_median": round(args.kernels / median["seconds"]),
        "total_rows_per_s": round(load["rows"] / load["seconds"]),
        "load_cpu_seconds": round(load["cpu"], 3),
        "load_peak_mb": round(max(r["peak_mb"] for r in loads), 1),
        "plain_select_seconds": round(plain["seconds"], 3),
        "plain_cpu_seconds": round(plain["cpu"], 3),
        "plain_peak_mb": round(plain["peak_mb"], 1),
        "ratio_plain_over_load": round(plain["seconds"] / load["seconds"], 2),
        "reader": "adbc" if _has_adbc() else "sqlite3 group_concat",
        "load_average_1min": round(os.getloadavg()[0], 2),
    }
    if args.json:
        print(json.dumps(result))
    else:
        for key, value in result.items():
            print(f"{key:>24}: {value}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
