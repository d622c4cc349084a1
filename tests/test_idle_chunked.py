"""The idle pass attributes gaps in chunks (``windows.CHUNK_GAPS``): the chunk size never changes
a result, and the per-cause sums it accumulates equal a plain-Python computation.

Scenario (``_scenario``): two devices, each fed by its own host thread, hundreds of kernels, each
gap built by one of three recipes whose attribution follows from the rule by hand::

    loader:   GPU ==k==|........................ gap ............|==k'==
              host   [DataLoader __next__ ........][L]
                       s                           tl t2 (queued <= 50 us) e
              [s, tl) data_loading; [tl, e) launch_overhead (call, then GPU pick-up)
    bare:     as loader with no host range: [s, tl) untraced
    queued:   L issued before s; [s, e) gpu_pickup when <= 50 us, else untraced (issue 44)
"""

from __future__ import annotations

import random
from pathlib import Path
from typing import Any

import numpy as np
import polars as pl
import pytest

import synth
from traceforensics.analysis import AnalysisOptions, prepare
from traceforensics.analysis.context import AnalysisContext
from traceforensics.analysis.idle import windows
from traceforensics.analysis.idle.causes import CAUSES, QUEUED_LAUNCH_LATENCY_MAX_NS
from traceforensics.analysis.idle.gaps import IdleAnalysis, analyze_idle
from traceforensics.ingest import load_path
from traceforensics.model.session import TraceMeta, TraceSession

US = 1_000
LOADER = "enumerate(DataLoader)#_SingleProcessDataLoaderIter.__next__"
KERNELS_PER_DEVICE = 240
KERNELS_PER_STEP = 25


Expected = list[list[tuple[int, dict[str, int]]]]


def _scenario(seed: int, *, steps: bool) -> tuple[TraceSession, Expected]:
    """Session and, per device, the start and expected causes of each gap in time order (ns)."""
    rng = random.Random(seed)
    rows: list[dict[str, Any]] = []
    expected: Expected = []
    corr = 0
    for device in (0, 1):
        tid = 10 + device
        gaps: list[tuple[int, dict[str, int]]] = []
        t = 1_000 * US + device * 37 * US  # end of the previous kernel (s of the next gap)
        step_open = t - 500 * US
        for i in range(KERNELS_PER_DEVICE):
            recipe = rng.choice(["loader", "bare", "queued"]) if i else "queued"
            s = t
            if recipe == "queued":
                tl = s - rng.randrange(5, 15) * US  # during the previous kernel
                t2 = tl + 3 * US
                e = s + rng.choice([rng.randrange(1, 50), 50, 51, rng.randrange(52, 400)]) * US
                late: dict[str, int] = {}
            else:
                tl = s + rng.randrange(1, 3_000) * US
                t2 = tl + rng.randrange(1, 8) * US
                e = t2 + rng.randrange(0, 50) * US
                cause = "data_loading" if recipe == "loader" else "untraced"
                late = {cause: tl - s}
                if recipe == "loader":  # starts inside the previous kernel, after its launch
                    rows.append(_host("annotation", LOADER, s - 2 * US, tl, tid))
            corr += 1
            rows.append(_host("cuda_api", "cudaLaunchKernel", tl, t2, tid, corr=corr))
            dur = rng.randrange(20, 200) * US
            rows.append(
                {
                    "kind": "kernel",
                    "name": f"k{i % 7}",
                    "start_ns": e,
                    "dur_ns": dur,
                    "device": device,
                    "stream": 7,
                    "correlation": corr,
                }
            )
            if i:  # the first kernel opens the device window: no gap before it
                over = e - s > QUEUED_LAUNCH_LATENCY_MAX_NS
                queued = {"untraced" if over else "gpu_pickup": e - s}
                gaps.append(
                    (s, queued if recipe == "queued" else {**late, "launch_overhead": e - tl})
                )
            t = e + dur
            if steps and (i + 1) % KERNELS_PER_STEP == 0:
                name = f"ProfilerStep#{i // KERNELS_PER_STEP}"
                rows.append(_host("annotation", name, step_open, t2 + 1, tid))
                step_open = t2 + 1
        expected.append(gaps)
    frame = pl.from_dicts(
        [{"event_id": i, "rank": 0, "pid": 1, "is_comm": False, **r} for i, r in enumerate(rows)],
        infer_schema_length=None,
    )
    return TraceSession.from_frames(frame, TraceMeta(source_format="test")), expected


def _host(
    kind: str, name: str, start: int, end: int, tid: int, corr: int | None = None
) -> dict[str, Any]:
    row: dict[str, Any] = {"kind": kind, "name": name, "start_ns": start, "dur_ns": end - start}
    row["tid"] = tid
    if corr is not None:
        row["correlation"] = corr
    return row


def _idle(ctx: AnalysisContext, chunk: int, monkeypatch: pytest.MonkeyPatch) -> IdleAnalysis:
    monkeypatch.setattr(windows, "CHUNK_GAPS", chunk)
    return analyze_idle(ctx)


def _assert_chunk_free(ctx: AnalysisContext, monkeypatch: pytest.MonkeyPatch) -> IdleAnalysis:
    """The whole idle result (devices, kept gaps with evidence, steps, stream view) for tiny
    chunks equals the one-chunk result; returns that."""
    whole = _idle(ctx, 1 << 40, monkeypatch)
    assert whole.gaps, "scenario has no gaps"
    for chunk in (1, 2, 3, 17):
        got = _idle(ctx, chunk, monkeypatch)
        assert got.devices == whole.devices, chunk
        assert got.gaps == whole.gaps, chunk
        assert got.steps == whole.steps, chunk
        assert got.step_summary == whole.step_summary, chunk
        assert got == whole, chunk
    return whole


@pytest.mark.parametrize("top", [10_000, 7, 0])
def test_chunk_size_changes_nothing_synthetic(top: int, monkeypatch: pytest.MonkeyPatch) -> None:
    session, _ = _scenario(3, steps=True)
    ctx = prepare(session, AnalysisOptions.of(window="device", top_gaps=top))
    whole = _assert_chunk_free(ctx, monkeypatch) if top else None
    if whole is None:  # no kept gap at all: the sums alone
        a, b = _idle(ctx, 1 << 40, monkeypatch), _idle(ctx, 3, monkeypatch)
        assert a == b and not a.gaps
        return
    assert len(whole.steps) >= 2 * (KERNELS_PER_DEVICE // KERNELS_PER_STEP) - 2
    assert len(whole.gaps) == min(top, sum(d.n_gaps for d in whole.devices))


def test_chunk_size_changes_nothing_training_loop(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # the realistic builder: sync drains, dispatch windows, copies, a checkpoint, a stall
    tr = synth.training_loop(8, checkpoint_steps=(2,), loader_stall_steps=(1, 5))
    session = load_path(tr.write_kineto(tmp_path / "t.pt.trace.json"))
    for window in ("trace", "device"):
        ctx = prepare(session, AnalysisOptions.of(window=window, top_gaps=10_000))
        whole = _assert_chunk_free(ctx, monkeypatch)
        assert whole.steps and len(whole.gaps) > 20


def test_sums_equal_plain_python(monkeypatch: pytest.MonkeyPatch) -> None:
    session, expected = _scenario(11, steps=False)
    ctx = prepare(session, AnalysisOptions.of(window="device", top_gaps=10_000))
    res = _idle(ctx, 5, monkeypatch)
    for g, dev in enumerate(res.devices):
        want = dict.fromkeys(CAUSES, 0)
        for _s, gap in expected[g]:
            for c, v in gap.items():
                want[c] += v
        assert dev.idle_by_cause == want
        assert dev.n_gaps == len(expected[g])
        got_gaps = sorted(
            (x for x in res.gaps if (x.rank, x.device) == (dev.rank, dev.device)),
            key=lambda x: x.start_ns,
        )
        assert [x.causes for x in got_gaps] == [
            {c: v for c, v in e.items() if v} for _s, e in expected[g]
        ]


def test_steps_equal_plain_python(monkeypatch: pytest.MonkeyPatch) -> None:
    # tiled step windows run from one step's last kernel end to the next one's: every gap lies
    # wholly inside one step, so a step's causes are the sum of its gaps' expected causes
    session, expected = _scenario(5, steps=True)
    ctx = prepare(session, AnalysisOptions.of(window="device"))
    res = _idle(ctx, 4, monkeypatch)
    work = session.events.filter(pl.col("kind") == "kernel")
    assert len(res.steps) >= 10
    for st in res.steps:
        k = work.filter(pl.col("device") == st.device)
        spans = zip(k["start_ns"].to_list(), (k["start_ns"] + k["dur_ns"]).to_list(), strict=True)
        lo, hi = st.start_ns, st.start_ns + st.dur_ns
        busy = sum(max(0, min(e, hi) - max(s, lo)) for s, e in spans)  # kernels never overlap
        assert st.busy_ns == busy
        assert st.idle_ns == st.dur_ns - busy
        want = dict.fromkeys(CAUSES, 0)
        for s, gap in expected[st.device]:
            if lo <= s < hi:
                for c, v in gap.items():
                    want[c] += v
        assert st.idle_by_cause == want, st.name


def test_longest_matches_a_full_lexsort() -> None:
    rng = np.random.default_rng(0)
    s = np.sort(rng.integers(0, 50, 400)).astype(np.int64)  # many equal starts and lengths
    e = s + rng.integers(1, 6, 400)
    full = np.lexsort((s, -(e - s)))
    for n in (0, 1, 5, 37, 399, 400, 1000, None):
        want = full if n is None else full[: max(n, 0)]
        assert windows.longest(s, e, n).tolist() == want.tolist()


def test_kept_rows_are_the_rows_of_all_gaps(monkeypatch: pytest.MonkeyPatch) -> None:
    session, _ = _scenario(7, steps=False)
    ctx = prepare(session, AnalysisOptions.of(window="device"))
    dev = np.arange(len(ctx.devices), dtype=np.int64)
    monkeypatch.setattr(windows, "CHUNK_GAPS", 1 << 40)
    every = windows.window_gaps(ctx, dev, ctx.window_lo, ctx.window_hi)
    monkeypatch.setattr(windows, "CHUNK_GAPS", 6)
    top = windows.window_gaps(ctx, dev, ctx.window_lo, ctx.window_hi, keep=9)
    assert every.kept.size == every.start.size
    assert np.array_equal(every.by_window, top.by_window)
    assert np.array_equal(every.idle, top.idle) and np.array_equal(every.n_gaps, top.n_gaps)
    assert np.array_equal(top.kept, every.kept[:9])
    assert np.array_equal(top.matrix, every.matrix[:9]) and np.array_equal(top.op, every.op[:9])
    assert np.array_equal(top.parts.tl, every.parts.tl[:9])
    assert np.array_equal(top.parts.waits.wait_end, every.parts.waits.wait_end[:9])
    # the per-window sums are the sums of all rows
    for k in range(dev.size):
        rows = every.matrix[every.win[every.kept] == k]
        assert np.array_equal(rows.sum(axis=0), every.by_window[k])
