"""Idle pieces (``analysis.idle.pieces``): every gap split by cause and placed in time.

Checked on every shared trace and on generated ones (stall scenarios, a training loop, drawn
trace shapes, GPU-only and GPU-less traces): per device the pieces sum per cause exactly to
``analyze_idle``'s ``idle_by_cause``; within each gap they tile it, the gaps being found here
independently (a plain sorted union of the GPU rows, ``conftest.plain_union``); no gap needs
the fallback layout. A hand-built trace pins WHERE causes lie.
"""

from __future__ import annotations

import dataclasses
import itertools
import tempfile
from functools import lru_cache
from pathlib import Path

import numpy as np
import polars as pl
import pytest
from hypothesis import given

import shapes
import synth
from synth_scenarios import DATALOADER_RANGE
from tests.conftest import (
    drawn_shapes_settings,
    kineto_trace_files,
    nsys_trace_files,
    plain_union,
    shared_trace,
)
from traceforensics.analysis import AnalysisOptions, prepare
from traceforensics.analysis.context import AnalysisContext
from traceforensics.analysis.idle.attribution import Parts
from traceforensics.analysis.idle.causes import CAUSES
from traceforensics.analysis.idle.gaps import analyze_idle
from traceforensics.analysis.idle.pieces import SCHEMA, idle_pieces, place_gaps
from traceforensics.analysis.idle.windows import window_gaps
from traceforensics.ingest import load_path
from traceforensics.model.session import TraceSession

SHARED = [*kineto_trace_files(), *nsys_trace_files(), "hta/job128_sampled"]
GPU_KINDS = ["kernel", "memcpy", "memset", "cuda_graph"]
Key = tuple[int, int]


@lru_cache(maxsize=2)
def _load(rel: str) -> TraceSession:
    return load_path(shared_trace(rel))


def _gaps(session: TraceSession, ctx: AnalysisContext) -> dict[Key, list[tuple[int, int]]]:
    """Per device, its gaps inside its window from a plain union of its GPU rows."""
    rows = session.events.filter(pl.col("kind").is_in(GPU_KINDS))
    spans: dict[Key, list[tuple[int, int]]] = {}
    for r, d, s, dur in rows.select("rank", "device", "start_ns", "dur_ns").iter_rows():
        spans.setdefault((r, d), []).append((s, s + dur))
    out: dict[Key, list[tuple[int, int]]] = {}
    for g, key in enumerate(ctx.devices):
        lo, hi = int(ctx.window_lo[g]), int(ctx.window_hi[g])
        t, gaps = lo, []
        for s, e in plain_union(spans.get(key, [])):
            if s > t and t < hi:
                gaps.append((t, min(s, hi)))
            t = max(t, e)
        if t < hi:
            gaps.append((t, hi))
        out[key] = gaps
    return out


def check(session: TraceSession, options: AnalysisOptions | None = None) -> pl.DataFrame:
    """Every contract of ``idle_pieces`` on ``session``; returns the frame."""
    ctx = prepare(session, options)
    df = idle_pieces(ctx)
    assert df.schema == pl.Schema(SCHEMA)
    rows = df.rows()
    assert rows == sorted(rows, key=lambda r: (r[0], r[1], r[3]))
    bad = [r for r in rows if not r[6]]
    assert not bad, f"{len(bad)} pieces laid out by the fallback, e.g. {bad[:3]}"
    assert all(r[4] > 0 and r[5] in CAUSES for r in rows)
    # per device and cause: exactly the idle pass's split
    sums: dict[tuple[int, int, str], int] = {}
    for r, d, _g, _s, dur, c, _p in rows:
        sums[(r, d, c)] = sums.get((r, d, c), 0) + dur
    idle = analyze_idle(ctx)
    for dev in idle.devices:
        for c, ns in dev.idle_by_cause.items():
            assert sums.pop((dev.rank, dev.device, c), 0) == ns, (dev.rank, dev.device, c)
    assert not sums, f"pieces on no device of the idle pass: {sums}"
    # per gap: the pieces tile it, with no two neighbours of one cause left unmerged
    by_gap: dict[tuple[int, int, int], list[tuple[int, int, str]]] = {}
    for r, d, g, s, dur, c, _p in rows:
        by_gap.setdefault((r, d, g), []).append((s, s + dur, c))
    expected = _gaps(session, ctx)
    got = {k: [(g, p[-1][1]) for (r, d, g), p in by_gap.items() if (r, d) == k] for k in expected}
    assert got == expected
    for pieces in by_gap.values():
        for (_a, b, c), (a2, _b2, c2) in itertools.pairwise(pieces):
            assert a2 == b and c2 != c
    for (_r, _d, g), pieces in by_gap.items():
        assert pieces[0][0] == g
    return df


@pytest.mark.parametrize("rel", SHARED)
def test_shared_traces(rel: str) -> None:
    df = check(_load(rel))
    if rel.endswith(("cpu_only_rank34.json.gz", "_no_cuda.sqlite")):
        assert df.is_empty()


def _write_load(tr: synth.SynthTrace, fmt: str, tmp: Path) -> tuple[TraceSession, int]:
    """Write, load back: the session and what the tables add to a builder time."""
    if fmt == "kineto":
        return load_path(tr.write_kineto(tmp / "t.pt.trace.json")), tr.base_ns
    return load_path(tr.write_nsys(tmp / "t.sqlite")), 0


@pytest.mark.parametrize("fmt", shapes.FORMATS)
@pytest.mark.parametrize("cause", synth.STALL_CAUSES)
def test_stall_scenarios(cause: str, fmt: str, tmp_path: Path) -> None:
    tr = synth.stall_scenario(cause, 2_000_000)
    session, _ = _write_load(tr, fmt, tmp_path)
    df = check(session)
    assert df.filter(pl.col("cause") == cause).height >= 1  # the stall is placed somewhere


@pytest.mark.parametrize("fmt", shapes.FORMATS)
def test_training_loop_with_sync_drains(fmt: str, tmp_path: Path) -> None:
    session, _ = _write_load(synth.training_loop(steps=4), fmt, tmp_path)
    df = check(session, AnalysisOptions.of(window="trace"))
    assert {"host_sync", "data_loading"} <= set(df.get_column("cause"))


@pytest.mark.parametrize("fmt", shapes.FORMATS)
def test_gpu_only_and_gpu_less(fmt: str, tmp_path: Path) -> None:
    tr = synth.training_loop(steps=2)
    tr.events = [e for e in tr.events if e.device is not None]  # no host event at all
    df = check(_write_load(tr, fmt, tmp_path)[0])
    assert df.height > 0 and set(df.get_column("cause")) == {"untraced"}
    cpu = synth.SynthTrace()
    cpu.cpu_range("aten::mm", 1_000, 5_000)
    (tmp_path / "cpu").mkdir()
    df = check(_write_load(cpu, fmt, tmp_path / "cpu")[0])
    assert df.is_empty() and df.schema == pl.Schema(SCHEMA)


@pytest.mark.parametrize("fmt", shapes.FORMATS)
def test_where_the_causes_lie(fmt: str, tmp_path: Path) -> None:
    """A DataLoader range [100 µs, 600 µs) on the launching thread inside the gap
    [20 µs, 810 µs): ``data_loading`` is exactly that range, untraced around it, then the
    launch call and pick-up of k2 (launch_overhead) to the gap end."""
    tr = synth.SynthTrace()
    tr.launch("k1", 0, 4_000, 10_000, 10_000)
    tr.cpu_range(DATALOADER_RANGE, 100_000, 500_000, kind="annotation")
    tr.launch("k2", 800_000, 4_000, 810_000, 10_000)
    session, off = _write_load(tr, fmt, tmp_path)
    df = check(session, AnalysisOptions.of(window="device"))
    got = [(s - off, s - off + d, c) for s, d, c in df.select("start_ns", "dur_ns", "cause").rows()]
    assert got == [
        (20_000, 100_000, "untraced"),
        (100_000, 600_000, "data_loading"),
        (600_000, 800_000, "untraced"),
        (800_000, 810_000, "launch_overhead"),
    ]


@drawn_shapes_settings(60)
@given(shape=shapes.shapes())
def test_drawn_shapes(shape: shapes.Shape) -> None:
    opts = AnalysisOptions.of(**shape.options)
    for fmt in shapes.FORMATS:  # the same drawn timeline in both formats
        one = dataclasses.replace(shape, fmt=fmt)
        with tempfile.TemporaryDirectory(prefix="tf-pieces-") as tmp:
            check(load_path(one.write(Path(tmp))), opts)


def test_fallback_when_the_rule_is_not_followed(tmp_path: Path) -> None:
    """Gaps whose parts disagree with their matrix row (here: a queued cause changed behind
    the rule's back) are laid out from the row, unplaced, still tiling the gap exactly; the
    others are untouched. Also: the ``each_chunk`` hook leaves ``window_gaps`` unchanged."""
    session, _ = _write_load(synth.training_loop(steps=3), "kineto", tmp_path)
    ctx = prepare(session)
    devs = np.arange(len(ctx.devices), dtype=np.int64)
    chunks: list[tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray, Parts]] = []
    hooked = window_gaps(
        ctx, devs, ctx.window_lo, ctx.window_hi, keep=5,
        each_chunk=lambda g, s, e, op, mat, p: chunks.append((s, e, op, mat, p)),
    )  # fmt: skip
    plain = window_gaps(ctx, devs, ctx.window_lo, ctx.window_hi, keep=5)
    assert np.array_equal(hooked.by_window, plain.by_window)
    assert np.array_equal(hooked.matrix, plain.matrix)
    (s, e, op, mat, parts), = chunks  # fmt: skip
    gap, start, end, cause, placed = place_gaps(ctx, s, e, op, mat, parts)
    assert placed.all()
    tampered = dataclasses.replace(parts, qcause=parts.qcause.copy())
    hit = np.flatnonzero(parts.wait_end < e)[:3]  # gaps with queued time
    assert hit.size
    tampered.qcause[hit] = CAUSES.index("io")
    gap, start, end, cause, placed = place_gaps(ctx, s, e, op, mat, tampered)
    assert set(gap[~placed].tolist()) == set(hit.tolist())
    for i in range(s.size):
        m = gap == i
        assert start[m][0] == s[i] and end[m][-1] == e[i]
        assert np.array_equal(start[m][1:], end[m][:-1])
        assert (
            np.bincount(cause[m], weights=end[m] - start[m], minlength=len(CAUSES))
            .astype(np.int64)
            .tolist()
            == mat[i].tolist()
        )
