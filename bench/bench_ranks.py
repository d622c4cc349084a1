"""Many ranks (issue 14): ``tf analyze DIR`` on 64 rank files with ``--jobs 1`` and
``--jobs 2``, whole process, wall time and peak memory of the parent and of the process tree.

The job: the ResNet-50 V100 trace (75.7k events, 35 MB of JSON) copied 64 times, each copy a
rank (``"distributedInfo": {"rank": r, "world_size": 64}`` written in at the top; the rest of
the file byte for byte), gzipped at level 1, cached in ``bench/out/ranks64/``.

Each run is a fresh ``tf analyze DIR --json --no-cache --jobs N`` (the ranks loaded and
analysed apart, ``traceforensics.fanout``), wrapped so that the parent writes its own peak
RSS (``RUSAGE_SELF``: the parent alone, its workers not included) at exit; the whole tree's
peak is sampled every 10 ms (``bench_scale.measure``). Runs alternate (``--repeat`` each); the
best wall time and the smallest peaks are reported, with the 1-minute load average before and
after (the machine is shared). Both runs' JSON must be identical, and the event count 64 times
the trace's. ``--joint`` adds the joint path (every rank in one session) for reference, and
checks that its JSON is the same.

    python bench/bench_ranks.py [--ranks 64] [--repeat 2] [--joint] [--json]
"""

from __future__ import annotations

import argparse
import gzip
import json
import os
import sys
import tempfile
from pathlib import Path

from bench_scale import OUT, SOURCE, measure

#: The wrapper: ``tf`` in this process, writing its own peak RSS (bytes) on exit.
WRAP = r"""
import atexit, os, resource, sys
def _peak():
    with open(os.environ["TF_BENCH_PEAK"], "w") as fh:
        fh.write(str(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024))
atexit.register(_peak)
from traceforensics.cli.main import main
main(sys.argv[1:])
"""
#: The joint path for reference: every rank in one session (what ``tf.analyze(DIR)`` does).
JOINT = r"""
import atexit, os, resource, sys
atexit.register(lambda: open(os.environ["TF_BENCH_PEAK"], "w").write(
    str(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024)))
import traceforensics as tf
from traceforensics.report.json_out import dumps
sys.stdout.buffer.write(dumps(tf.analyze(sys.argv[1]).to_json()))
"""


def rank_files(n: int) -> Path:
    """``n`` rank files of the ResNet-50 trace in ``bench/out/ranks{n}/`` (built once)."""
    folder = OUT / f"ranks{n}"
    done = folder / ".complete"
    if done.exists():
        return folder
    folder.mkdir(parents=True, exist_ok=True)
    text = gzip.decompress(SOURCE.read_bytes())
    assert text.lstrip().startswith(b"{")
    head, body = text.split(b"{", 1)
    print(f"writing {n} rank files to {folder} ...", file=sys.stderr)
    for r in range(n):
        info = json.dumps({"rank": r, "world_size": n, "backend": "nccl"}).encode()
        doc = head + b'{\n  "distributedInfo": ' + info + b"," + body
        (folder / f"rank{r:03d}.pt.trace.json.gz").write_bytes(gzip.compress(doc, 1))
    done.touch()
    return folder


def _run(argv: list[str], out: Path) -> tuple[float, int, int]:
    """``(wall s, parent peak bytes, tree peak bytes)`` of one fresh process."""
    with tempfile.NamedTemporaryFile(suffix=".peak") as peak:
        os.environ["TF_BENCH_PEAK"] = peak.name
        wall, tree = measure([sys.executable, "-c", *argv], out)
        parent = int(Path(peak.name).read_text() or 0)
    return wall, parent, max(tree, parent)


def _load() -> float:
    return os.getloadavg()[0]


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--ranks", type=int, default=64)
    ap.add_argument("--repeat", type=int, default=2)
    ap.add_argument("--joint", action="store_true", help="also the joint path (one session)")
    ap.add_argument("--json", action="store_true")
    ns = ap.parse_args()
    if not SOURCE.exists():
        sys.exit(f"no {SOURCE}: keep ../shared/traces beside the repository")
    folder = rank_files(ns.ranks)
    configs = {
        f"--jobs {j}": [WRAP, "analyze", str(folder), "--json", "--no-cache", "--jobs", str(j)]
        for j in (1, 2)
    }
    if ns.joint:
        configs["joint"] = [JOINT, str(folder)]
    load_before = _load()
    runs: dict[str, list[tuple[float, int, int]]] = {k: [] for k in configs}
    docs: dict[str, bytes] = {}
    with tempfile.TemporaryDirectory() as tmp:
        for _ in range(ns.repeat):  # alternate: the machine's drift hits every config
            for name, argv in configs.items():
                out = Path(tmp) / "out.json"
                runs[name].append(_run(argv, out))
                docs[name] = out.read_bytes()
    load_after = _load()
    one = json.loads(docs["--jobs 1"])
    same = docs["--jobs 1"] == docs["--jobs 2"]
    rows = [
        {
            "config": name,
            "wall_s": round(min(w for w, _, _ in r), 2),
            "parent_peak_mb": round(min(p for _, p, _ in r) / 1e6),
            "tree_peak_mb": round(min(t for _, _, t in r) / 1e6),
        }
        for name, r in runs.items()
    ]
    base = rows[0]["wall_s"]
    for row in rows:
        row["time_vs_jobs1"] = round(row["wall_s"] / base, 2)
    if "joint" in docs:  # ranks analysed apart give what one table of all gives
        same_joint: bool | None = json.loads(docs["joint"]) == one
    else:
        same_joint = None
    summary = {
        "ranks": ns.ranks,
        "events": one["event_count"],
        "cpus": os.cpu_count(),
        "load_1min_before": round(load_before, 2),
        "load_1min_after": round(load_after, 2),
        "json_identical_jobs_1_2": same,
        "json_equal_joint": same_joint,
        "rows": rows,
    }
    print(
        f"{ns.ranks} ranks, {one['event_count']:,} events, {os.cpu_count()} CPUs, load "
        f"{load_before:.2f} -> {load_after:.2f}; --jobs 1 and 2 JSON identical: {same}"
        + ("" if same_joint is None else f"; equal to the joint one: {same_joint}")
    )
    for r in rows:
        print(
            f"  {r['config']:<9} {r['wall_s']:7.2f} s ({r['time_vs_jobs1']:.2f}x)  parent peak "
            f"{r['parent_peak_mb']:6} MB  tree peak {r['tree_peak_mb']:6} MB"
        )
    if ns.json:
        print(json.dumps(summary, indent=1))


if __name__ == "__main__":
    main()
