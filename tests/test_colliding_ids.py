"""Correlation and External ids shared by many events (issue 10): real traces reuse them across
processes and after wrap-around. A trace where 20 000 launches, kernels and operators share one
id used to make the launch join quadratic (400M rows: the process aborted allocating)."""

from __future__ import annotations

import json
from pathlib import Path

import polars as pl

from tests.test_analysis_core import _check_links
from traceforensics.analysis import analyze
from traceforensics.ingest import load_path

N = 20_000


def _colliding_trace(path: Path) -> Path:
    events = []
    for i in range(N):
        ts = i * 10.0
        args = {"correlation": 1, "External id": 1}
        events += [
            {"ph": "X", "cat": "cpu_op", "name": "aten::mm", "pid": 1, "tid": 1, "ts": ts,
             "dur": 4.0, "args": {"External id": 1}},
            {"ph": "X", "cat": "cuda_runtime", "name": "cudaLaunchKernel", "pid": 1, "tid": 1,
             "ts": ts, "dur": 2.0, "args": args},
            {"ph": "X", "cat": "kernel", "name": "k", "pid": 0, "tid": 7, "ts": ts + 5, "dur": 3.0,
             "args": {**args, "device": 0, "stream": 7}},
        ]  # fmt: skip
    doc = {"traceEvents": events, "deviceProperties": [{"id": 0, "name": "NVIDIA H100 80GB HBM3"}]}
    path.write_text(json.dumps(doc))
    return path


def test_one_id_shared_by_every_event(tmp_path: Path) -> None:
    session = load_path(_colliding_trace(tmp_path / "collide.json"))
    assert session.events.filter(pl.col("kind") == "kernel").height == N
    _check_links(session)  # one link per kernel, by the rule (lowest call id among equals)
    (dev,) = analyze(session).devices
    assert dev.kernel_count == N
    assert dev.idle_ns == sum(dev.idle_by_cause.values()) == dev.window_ns - dev.busy_ns
