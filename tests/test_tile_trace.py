"""``tools/tile_trace.py`` (issue 12): a trace tiled N times in time has exactly N times the busy
time, kernels and copies of the original, its steps renumbered and its ids unique per copy."""

from __future__ import annotations

import gzip
import json
import sys
from pathlib import Path

import polars as pl
import pytest

from tests.conftest import ROOT, shared_trace
from traceforensics import load
from traceforensics.analysis import analyze

sys.path.insert(0, str(ROOT / "tools"))
import tile_trace

EXAMPLE = ROOT / "examples" / "synthetic_training.pt.trace.json.gz"


def _tiled(src: Path, copies: int, dst: Path) -> Path:
    doc = tile_trace.tile(tile_trace._read(src), copies)
    dst.write_text(json.dumps(doc))
    return dst


@pytest.mark.parametrize(
    ("src", "copies"),
    [(EXAMPLE, 3), ("hta/ddp_nccl_a100_rank0.json.gz", 2)],
)
def test_tiled_trace_is_n_times_the_original(tmp_path: Path, src: Path | str, copies: int) -> None:
    path = src if isinstance(src, Path) else shared_trace(src)
    one = load(path, use_cache=False)
    many = load(_tiled(path, copies, tmp_path / "tiled.json"), use_cache=False)
    a, b = analyze(one).devices, analyze(many).devices
    assert [d.busy_ns * copies for d in a] == [d.busy_ns for d in b]
    assert [d.kernel_count * copies for d in a] == [d.kernel_count for d in b]
    assert [d.memcpy_count * copies for d in a] == [d.memcpy_count for d in b]
    # every link survives: the same share of kernels has a launch call in each copy
    ev = many.events
    corr = ev.filter(pl.col("kind") == "cuda_api").get_column("correlation").drop_nulls()
    assert (
        corr.n_unique()
        == copies
        * one.events.filter(pl.col("kind") == "cuda_api")
        .get_column("correlation")
        .drop_nulls()
        .n_unique()
    )
    steps_one = analyze(one).idle.steps
    steps_many = analyze(many).idle.steps
    assert len(steps_many) == copies * len(steps_one)
    assert len({s.name for s in steps_many}) == len(steps_many)  # renumbered, unique


def test_cli_writes_gzip(tmp_path: Path) -> None:
    import subprocess

    dst = tmp_path / "t.json.gz"
    tool = ROOT / "tools" / "tile_trace.py"
    subprocess.run([sys.executable, str(tool), str(EXAMPLE), str(dst), "--copies", "2"], check=True)
    doc = json.loads(gzip.decompress(dst.read_bytes()))
    orig = json.loads(gzip.decompress(EXAMPLE.read_bytes()))
    timed = [e for e in orig["traceEvents"] if e.get("ph") != "M"]
    meta = [e for e in orig["traceEvents"] if e.get("ph") == "M"]
    assert len(doc["traceEvents"]) == len(meta) + 2 * len(timed)
