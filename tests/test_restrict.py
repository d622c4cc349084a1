"""Analysing part of a trace (issue 11, item 8): ``--steps RANGE`` and ``--from``/``--to``. The
figures of the part are recomputed here from the raw events with plain Python (the step ranges
read by name, the GPU work clipped to the part and unioned by hand)."""

from __future__ import annotations

import json
import re
from pathlib import Path

import polars as pl
import pytest

from tests.conftest import plain_union, run_cli, shared_trace
from traceforensics import load
from traceforensics.analysis import analyze
from traceforensics.analysis.idle.gaps import analyze_idle
from traceforensics.analysis.options import AnalysisOptions

RESNET = "kineto/resnet50_v100_workers0.pt.trace.json.gz"
GPU = ("kernel", "memcpy", "memset", "cuda_graph")


def _busy_in(events: pl.DataFrame, lo: int, hi: int) -> tuple[int, int, int]:
    """(window start, window length, busy) of device 0's GPU work clipped to [lo, hi)."""
    spans = [
        (max(s, lo), min(s + d, hi))
        for s, d in events.filter(
            pl.col("kind").cast(pl.String).is_in(GPU) & (pl.col("device") == 0)
        )
        .select("start_ns", "dur_ns")
        .iter_rows()
        if min(s + d, hi) > max(s, lo)
    ]
    spans = [(s, e) for s, e in spans if e > s]
    first, last = min(s for s, _ in spans), max(e for _, e in spans)
    return first, last - first, sum(e - s for s, e in plain_union(spans))


def _step_spans(events: pl.DataFrame) -> dict[int, tuple[int, int]]:
    out = {}
    for name, s, d in (
        events.filter(pl.col("name").cast(pl.String).str.starts_with("ProfilerStep#"))
        .select(pl.col("name").cast(pl.String), "start_ns", "dur_ns")
        .iter_rows()
    ):
        out[int(re.findall(r"\d+", name)[-1])] = (s, s + d)
    return out


@pytest.mark.parametrize("steps", ["7:8", "9:", ":6", "8"])
def test_steps_range_is_the_steps_span(steps: str) -> None:
    session = load(shared_trace(RESNET), use_cache=False)
    spans = _step_spans(session.events)
    a, _, b = steps.partition(":")
    first = int(a) if a else min(spans)
    last = int(b) if b else (int(a) if ":" not in steps else max(spans))
    lo, hi = spans[first][0], spans[last][1]
    (dev,) = analyze(session, AnalysisOptions.of(steps=steps)).devices
    start, window, busy = _busy_in(session.events, lo, hi)
    assert (dev.window_start_ns, dev.window_ns, dev.busy_ns) == (start, window, busy)
    assert sum(dev.idle_by_cause.values()) == dev.idle_ns


def test_time_range_and_a_pass_alone() -> None:
    session = load(shared_trace(RESNET), use_cache=False)
    t0 = int(session.events["start_ns"].min())  # type: ignore[arg-type]
    opts = AnalysisOptions.of(start_ns=200_000_000, end_ns=450_000_000)
    result = analyze(session, opts)
    (dev,) = result.devices
    assert (dev.window_start_ns, dev.window_ns, dev.busy_ns) == _busy_in(
        session.events, t0 + 200_000_000, t0 + 450_000_000
    )
    alone = analyze_idle(session, opts)  # the same part, cut the same way
    assert alone.devices[0].idle_by_cause == dev.idle_by_cause
    assert result.session.events.height < session.events.height


def test_cli_flags_and_refusals(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path = shared_trace(RESNET)
    code, out, err = run_cli(
        ["analyze", "--no-cache", "--json", "--from", "0.2s", "--to", "450ms", str(path)], capsys
    )
    assert code == 0, err
    whole = load(path, use_cache=False)
    t0 = int(whole.events["start_ns"].min())  # type: ignore[arg-type]
    d = json.loads(out)["devices"][0]
    assert (d["window_start_ns"], d["window_ns"], d["busy_ns"]) == _busy_in(
        whole.events, t0 + 200_000_000, t0 + 450_000_000
    )
    bad = {
        ("--steps", "2:3"): "no step in that range; the trace has steps 5 to 10",
        ("--steps", "x"): "not a step range",
        ("--steps", "6:5"): "the range is empty",
        ("--from", "1x"): "not a time",
        ("--from", "9s"): "selects no event",
    }
    for (flag, value), words in bad.items():
        code, out, err = run_cli(["analyze", "--no-cache", flag, value, str(path)], capsys)
        lines = err.strip().splitlines()
        assert code == 2 and out == "" and len(lines) == 1, err
        assert words in lines[0] and ";" in lines[0], lines[0]
