"""The shared analysis core: passes called alone give exactly the same answer as ``analyze()``,
and every GPU op has one launch link, the same for every consumer (issue 9)."""

from __future__ import annotations

from collections import defaultdict
from functools import lru_cache
from typing import Any

import orjson
import polars as pl
import pytest

from tests.conftest import (
    FIXTURES,
    kineto_trace_files,
    nsys_trace_files,
    plain_union,
    shared_trace,
    tree_parents,
)
from traceforensics.analysis import (
    AnalysisOptions,
    analyze,
    analyze_idle,
    analyze_kernels,
    analyze_utilization,
    prepare,
)
from traceforensics.analysis.context import PREPARE_ONLY_COLUMNS
from traceforensics.analysis.devices import device_records
from traceforensics.analysis.export import device_json
from traceforensics.analysis.idle.causes import CAUSE_INDEX
from traceforensics.analysis.kernels.forensics import kernel_links
from traceforensics.analysis.links import LINK_COLUMNS
from traceforensics.ingest import load_path
from traceforensics.model.session import TraceMeta, TraceSession

SHARED = kineto_trace_files() + nsys_trace_files()
ALL = SHARED or ["<../shared/traces absent>"]
#: A second option set, run on a few traces (every option group changes).
OTHER = AnalysisOptions.of(
    window="trace", step_window="annotation", top_gaps=3, top=2, short_kernel_us=25.0, bin_ms=7.0
)
OTHER_TRACES = [
    "kineto/resnet50_v100_workers0.pt.trace.json.gz",
    "hta/ddp_nccl_a100_rank0.json.gz",
    "nsys/NVIDIA__Fuser__report1.sqlite",
]


@lru_cache(maxsize=4)
def _load(rel: str) -> TraceSession:
    return load_path(str(shared_trace(rel)))


def _canon(obj: Any) -> bytes:
    """Byte-exact canonical JSON (NaN and numpy values made comparable)."""
    return orjson.dumps(
        obj, option=orjson.OPT_SORT_KEYS | orjson.OPT_SERIALIZE_NUMPY | orjson.OPT_NON_STR_KEYS
    )


def _idle_json(res: Any) -> bytes:
    return _canon(
        {
            "devices": [vars(d) for d in res.devices],
            "gaps": [g.to_json() for g in res.gaps],
            "steps": [s.to_json() for s in res.steps],
            "step_summary": [s.to_json() for s in res.step_summary],
            "stream_gaps": [s.to_json() for s in res.stream_gaps],
        }
    )


def _patterns_json(pats: Any) -> bytes:
    return _canon(
        [
            {
                "rank": p.rank,
                "device": p.device,
                "timeline": p.timeline.to_json(),
                "pattern": p.pattern.to_json(),
            }
            for p in pats
        ]
    )


def _check_alone_equals_analyze(session: TraceSession, opts: AnalysisOptions) -> None:
    full = analyze(session, opts)
    idle = analyze_idle(session, opts)
    kernels = analyze_kernels(session, opts)
    pats = analyze_utilization(session, opts)
    assert _idle_json(idle) == _idle_json(full.idle)
    assert _canon(kernels.to_json()) == _canon(full.kernels.to_json())
    assert _patterns_json(pats) == _patterns_json(full.patterns)
    records = device_records(prepare(session, opts), idle, kernels, pats)
    assert _canon([device_json(d) for d in records]) == _canon(
        [device_json(d) for d in full.devices]
    )
    # and every window of the MFU step table is a window of the step table
    want = {(s.rank, s.device, s.start_ns, s.dur_ns) for s in full.idle.steps}
    got = {(m.rank, m.device, m.window_start_ns, m.window_ns) for m in full.kernels.mfu_by_step}
    assert got <= want


@pytest.mark.parametrize("rel", ALL)
def test_each_pass_alone_matches_analyze(rel: str) -> None:
    _check_alone_equals_analyze(_load(rel), AnalysisOptions())


@pytest.mark.parametrize("rel", OTHER_TRACES)
def test_each_pass_alone_matches_analyze_other_options(rel: str) -> None:
    _check_alone_equals_analyze(_load(rel), OTHER)


def _check_record_invariants(session: TraceSession, opts: AnalysisOptions) -> None:
    """Independent of the tool's unions: busy is the plain-Python union of the device's work
    inside its window, idle is the rest, and the causes split it exactly."""
    result = analyze(session, opts)
    spans: dict[tuple[int, int], list[tuple[int, int]]] = defaultdict(list)
    for r, d, s, dur in (
        session.events.filter(pl.col("kind").is_in(["kernel", "memcpy", "memset", "cuda_graph"]))
        .select("rank", "device", "start_ns", "dur_ns")
        .iter_rows()
    ):
        spans[(r, d)].append((s, s + dur))
    assert {(d.rank, d.device) for d in result.devices} == set(spans)
    for d in result.devices:
        lo, hi = d.window_start_ns, d.window_start_ns + d.window_ns
        clipped = [(max(s, lo), min(e, hi)) for s, e in spans[(d.rank, d.device)]]
        assert d.busy_ns == sum(e - s for s, e in plain_union(clipped))
        assert d.idle_ns == d.window_ns - d.busy_ns == sum(d.idle_by_cause.values())
        assert min(d.idle_by_cause.values()) >= 0
    for st in result.idle.steps:
        assert st.busy_ns + st.idle_ns == st.dur_ns == st.busy_ns + sum(st.idle_by_cause.values())


@pytest.mark.parametrize("rel", ALL)
def test_device_records_hold_against_a_plain_union(rel: str) -> None:
    _check_record_invariants(_load(rel), AnalysisOptions())


def test_trace_window_with_a_step_pattern_matching_kernel_names() -> None:
    """A user step pattern names host ranges only: GPU work whose name matches it still opens
    and closes the trace window (it used to end the window early: idle != sum of causes)."""
    session = load_path("examples/synthetic_training.pt.trace.json.gz")
    _check_record_invariants(session, AnalysisOptions.of(window="trace", step_pattern="vectorized"))


def test_bundled_example_pass_alone_matches_analyze() -> None:
    """The example where, before issue 9, analyze_gaps alone said 8.77 ms and analyze 8.41."""
    session = load_path("examples/synthetic_training.pt.trace.json.gz")
    _check_alone_equals_analyze(session, AnalysisOptions())
    full = analyze(session)
    (dev,) = full.devices
    assert analyze_idle(session).devices[0].idle_ns == dev.idle_ns == dev.window_ns - dev.busy_ns


# ---------------------------------------------------------------- launch links


def _plain_links(session: TraceSession) -> dict[int, int | None]:
    """The launch rule in plain Python: same pid, then unknown pid, then other; lowest id."""
    ev = session.events
    # per (rank, correlation): the lowest call id of each pid (only those can win)
    calls: dict[tuple[int, int], dict[int | None, int]] = defaultdict(dict)
    for eid, rank, corr, pid in (
        ev.filter((pl.col("kind") == "cuda_api") & pl.col("correlation").is_not_null())
        .select("event_id", "rank", "correlation", "pid")
        .iter_rows()
    ):
        known = calls[(rank, corr)].get(pid)
        calls[(rank, corr)][pid] = eid if known is None else min(known, eid)
    out: dict[int, int | None] = {}
    for eid, rank, corr, pid in (
        ev.filter(
            pl.col("kind").is_in(["kernel", "memcpy", "memset", "cuda_graph"])
            & pl.col("device").is_not_null()
        )
        .select("event_id", "rank", "correlation", "pid")
        .iter_rows()
    ):
        best: tuple[int, int] | None = None
        for cpid, cid in calls[(rank, corr)].items() if corr is not None else ():
            prio = 1 if pid is None or cpid is None else (0 if pid == cpid else 2)
            if best is None or (prio, cid) < best:
                best = (prio, cid)
        out[eid] = best[1] if best else None
    return out


def _check_links(session: TraceSession) -> None:
    ctx = prepare(session)
    work = ctx.work
    # one row per GPU op
    n_gpu = session.events.filter(
        pl.col("kind").is_in(["kernel", "memcpy", "memset", "cuda_graph"])
        & pl.col("device").is_not_null()
    ).height
    assert work.height == n_gpu == work.get_column("event_id").n_unique()
    # the link columns only ``prepare`` reads are dropped from the context's table
    assert set(LINK_COLUMNS) - set(PREPARE_ONLY_COLUMNS) <= set(work.columns)
    assert not set(PREPARE_ONLY_COLUMNS) & set(work.columns)
    # the rule, recomputed independently
    want = _plain_links(session)
    got = dict(work.select("event_id", "api_id").iter_rows())
    assert got == want
    # every consumer reads the same link: the kernel pass, idle attribution (launch timing and
    # thread) and the step detector
    kl = kernel_links(ctx).select("kernel_id", "api_id", "op_id", "api_start_ns")
    mine = work.filter(pl.col("kind") == "kernel").select(
        pl.col("event_id").alias("kernel_id"),
        "api_id",
        "op_id",
        pl.col("launch_start_ns").alias("api_start_ns"),
    )
    assert kl.sort("kernel_id").equals(mine.sort("kernel_id"))
    has_thread = work.get_column("l_thr").is_not_null().to_numpy()
    assert ((ctx.ops.thr >= 0) == has_thread).all()
    # the launching thread's tid, read back through its thread index, is the launch call's own
    call_tid = dict(session.events.select("event_id", "tid").iter_rows())
    for api_id, thr in work.filter(pl.col("l_thr").is_not_null()).select("api_id", "l_thr").rows():
        assert int(ctx.host.thread_tid[thr]) == call_tid[api_id]
    linked = work.get_column("launch_start_ns").fill_null(0).to_numpy()
    assert (ctx.ops.launch_start == linked).all()
    _check_link_details(session, work, want)
    # the blocking-copy rule: exactly the calls linked to device-to-host copies are host_sync
    # among the copy calls (recomputed from the plain-Python links)
    copy_kind = dict(session.events.select("event_id", "copy_kind").iter_rows())
    d2h_calls = {a for g, a in want.items() if a is not None and copy_kind[g] == "d2h"}
    classes = ctx.host.frame.filter(pl.col("kind") == "cuda_api")
    for eid, name, cause in classes.select("event_id", "name", "cause").iter_rows():
        if "memcpy" in str(name).lower():
            want_cause = CAUSE_INDEX["host_sync" if eid in d2h_calls else "memcpy"]
            assert cause == want_cause, (eid, name)


def _check_link_details(session: TraceSession, work: pl.DataFrame, want: dict[int, Any]) -> None:
    """The columns read through each link, recomputed from the event table: the launch call's
    start, end and name, and the launching op: the call's parent in the host tree, or without
    a call the lowest cpu_op of the op's (rank, External id)."""
    ev = session.events.with_columns((pl.col("start_ns") + pl.col("dur_ns")).alias("end_ns"))
    call = {r[0]: r[1:] for r in ev.select("event_id", "start_ns", "end_ns", "name").rows()}
    parent = tree_parents(session)
    ext_op: dict[tuple[int, int], int] = {}
    for eid, rank, x in (
        ev.filter(pl.col("kind") == "cpu_op").select("event_id", "rank", "external_id").rows()
    ):
        if x is not None:
            ext_op[(rank, x)] = min(eid, ext_op.get((rank, x), eid))
    ext = dict(ev.select("event_id", pl.struct("rank", "external_id")).rows())
    cols = ("event_id", "launch_start_ns", "launch_end_ns", "l_name", "op_id")
    for eid, ls, le, name, op in work.select(cols).rows():
        api = want[eid]
        if api is None:
            assert (ls, le, name) == (None, None, None)
            key = ext[eid]
            assert op == ext_op.get((key["rank"], key["external_id"]))
        else:
            assert (ls, le, name) == call[api]
            assert op == parent.get(api)


@pytest.mark.parametrize("rel", ALL)
def test_one_launch_link_per_gpu_op_on_real_traces(rel: str) -> None:
    _check_links(_load(rel))


@pytest.mark.parametrize("name", ["modern.sqlite", "legacy_export_meta.sqlite"])
def test_links_on_colliding_correlation_fixture(name: str) -> None:
    """Two processes whose CUDA correlation ids collide: each GPU op links to its own process."""
    session = load_path(str(FIXTURES / "nsys" / name))
    _check_links(session)
    ctx = prepare(session)
    pids = dict(session.events.select("event_id", "pid").iter_rows())
    linked = ctx.work.filter(pl.col("api_id").is_not_null())
    assert linked.height > 0
    for op, api in linked.select("event_id", "api_id").iter_rows():
        assert pids[api] == pids[op]  # the GPU op's own process (pid from the event table)


def test_blocking_copy_rule_follows_the_links() -> None:
    """pid 1 copies host-to-device and pid 2 device-to-host under the same correlation id: only
    pid 2's call blocks (host_sync); pid 1's stays memcpy."""
    rows = [
        # id, kind, name, start, dur, pid, tid, device, correlation, copy_kind
        (1, "cuda_api", "cudaMemcpyAsync", 0, 50, 1, 1, None, 9, None),
        (2, "cuda_api", "cudaMemcpyAsync", 10, 50, 2, 2, None, 9, None),
        (3, "memcpy", "Memcpy HtoD", 60, 10, 1, None, 0, 9, "h2d"),
        (4, "memcpy", "Memcpy DtoH", 80, 10, 2, None, 1, 9, "d2h"),
    ]
    cols = ["event_id", "kind", "name", "start_ns", "dur_ns", "pid", "tid", "device"]
    frame = pl.DataFrame(rows, schema=[*cols, "correlation", "copy_kind"], orient="row")
    session = TraceSession.from_frames(
        frame.with_columns(pl.lit(0).alias("rank")), TraceMeta(source_format="test")
    )
    ctx = prepare(session)
    cause = dict(ctx.host.frame.select("event_id", "cause").iter_rows())
    assert cause[1] == CAUSE_INDEX["memcpy"] and cause[2] == CAUSE_INDEX["host_sync"]
    _check_links(session)


def test_links_with_negative_event_ids() -> None:
    """Event ids only need to be unique: negative ones link like any other."""
    rows = [
        # id, kind, name, start, dur, pid, tid, device, correlation
        (-9, "cpu_op", "aten::mm", 0, 100, 1, 1, None, None),
        (-8, "cuda_api", "cudaLaunchKernel", 10, 5, 1, 1, None, 7),
        (-7, "cuda_api", "cudaLaunchKernel", 20, 5, 2, 2, None, 7),
        (-1, "kernel", "k", 100, 10, 1, None, 0, 7),
        (-2, "kernel", "k_unlinked", 120, 10, 1, None, 0, 99),
    ]
    cols = ["event_id", "kind", "name", "start_ns", "dur_ns", "pid", "tid", "device"]
    frame = pl.DataFrame(rows, schema=[*cols, "correlation"], orient="row")
    session = TraceSession.from_frames(
        frame.with_columns(pl.lit(0).alias("rank")), TraceMeta(source_format="test")
    )
    links = dict(prepare(session).work.select("event_id", "api_id").rows())
    assert links == {-1: -8, -2: None}
    _check_links(session)


@pytest.mark.parametrize("wide", [0, 1 << 62], ids=["packed", "wide correlation ids"])
def test_link_rule_priorities_and_external_id_fallback(wide: int) -> None:
    """Same pid wins over unknown pid over other pid; among equals the lowest event id; an op
    without a launch call links to the cpu_op of its External id (launching op, no call).
    ``wide``: correlation ids 7 and 8 shifted by it (too wide to pack beside the rank: coded),
    with one call whose id is the low id 0 on another rank, so the span is wide."""
    rows = [
        # id, kind, name, start, dur, pid, tid, device, correlation, external_id
        (1, "cpu_op", "aten::mm", 0, 100, 1, 1, None, None, 50),
        (2, "cuda_api", "cudaLaunchKernel", 10, 5, 1, 1, None, 7, None),
        (3, "cuda_api", "cudaLaunchKernel", 20, 5, 2, 2, None, 7, None),
        (4, "cuda_api", "cudaLaunchKernel", 30, 5, 2, 2, None, 7, None),
        (5, "cuda_api", "cudaLaunchKernel", 40, 5, None, 3, None, 8, None),
        (6, "cuda_api", "cudaLaunchKernel", 45, 5, 1, 1, None, 8, None),
        (10, "kernel", "k_same_pid_2", 100, 10, 2, None, 0, 7, None),
        (11, "kernel", "k_same_pid_1", 120, 10, 1, None, 0, 7, None),
        (12, "kernel", "k_unknown_gpu_pid", 140, 10, None, None, 0, 7, None),
        (13, "kernel", "k_other_pid", 160, 10, 9, None, 0, 7, None),
        (14, "memcpy", "Memcpy HtoD", 180, 10, 1, None, 0, 8, None),
        (15, "kernel", "k_external", 200, 10, None, None, 0, None, 50),
        (16, "kernel", "k_unknown_call_pid", 220, 10, 2, None, 0, 8, None),
    ]
    cols = ["event_id", "kind", "name", "start_ns", "dur_ns", "pid", "tid", "device"]
    frame = pl.DataFrame(
        rows, schema=[*cols, "correlation", "external_id"], orient="row"
    ).with_columns(pl.lit(0).alias("rank"), pl.col("correlation") + wide)
    if wide:
        other_rank = (30, "cuda_api", "cudaLaunchKernel", 5, 1, 1, 1, None, 0, None)
        extra = pl.DataFrame([other_rank], schema=frame.columns[:-1], orient="row")
        frame = pl.concat(
            [frame, extra.with_columns(pl.lit(1).alias("rank"))], how="vertical_relaxed"
        )
    session = TraceSession.from_frames(frame, TraceMeta(source_format="test"))
    ctx = prepare(session)
    links = {e: (a, o) for e, a, o in ctx.work.select("event_id", "api_id", "op_id").iter_rows()}
    assert links[10][0] == 3  # same pid (2): the lower of 3 and 4
    assert links[11] == (2, 1)  # same pid (1), launched under aten::mm
    assert links[12][0] == 2  # GPU pid unknown: every call ties, lowest id
    assert links[13][0] == 2  # no call in pid 9: another pid's, lowest id
    assert links[14][0] == 6  # a memcpy too; same pid (1) beats the call of unknown pid
    assert links[16][0] == 5  # call of unknown pid beats a call in another pid (1)
    assert links[15] == (None, 1)  # External id fallback: launching op, no launch call
    _check_links(session)
