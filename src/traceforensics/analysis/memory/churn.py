"""Allocation churn per step, and the allocator's calls with the GPU idle around them.

Steps (``host_step_ranges``): the host step ranges of each rank, found as every step view
finds them (``steps.first_step_ranges``: the user's pattern, else ``ProfilerStep#N``, else
names like a step), a range starting inside an earlier kept one dropped. Memory events are
recorded on the host, so the host range of a step (not its device span) holds its mallocs.

Churn of a step (``step_churn``): the ``[memory]`` events of the device whose time is in
``[start_ns, end_ns)`` of a step of its rank: ``mallocs`` (``Bytes`` > 0) and their bytes,
``frees`` (``Bytes`` < 0) and their bytes (positive). An event outside every step counts in
no step.

Allocator calls (``allocator_calls``): the host rows the idle classifier put in the
``memory_management`` class (``ctx.host``: ``cudaMalloc``/``cudaFree``/``hipMalloc``/
``cuMemAlloc`` ..., ``empty_cache`` and caching-allocator ranges); they are not classified
again here. ``gpu_idle_ns`` of a call: the time of the call during which its device was idle
inside the analysis window (an overlap; the idle pass's ``memory_management`` time is the
attribution, the sum that counts).
"""

from __future__ import annotations

import numpy as np
import polars as pl

from traceforensics.analysis.cause_table import CAUSE_INDEX, MEMORY_MANAGEMENT
from traceforensics.analysis.context import AnalysisContext
from traceforensics.analysis.idle.windows import full_causes, window_gaps
from traceforensics.analysis.intervals import cumulative, holes, union
from traceforensics.analysis.one_off import one_off_windows
from traceforensics.analysis.steps import first_step_ranges

#: Idle spans kept for the figure (``idle_spans``): the first this many merged calls.
MAX_SPANS = 2000
#: Columns of one step's churn (``step_churn``); bytes are positive.
#: Driver calls of the virtual-memory API that expandable segments (and other VMM allocators)
#: use: any of them in a rank's trace shows such an allocator in use (``vmm_calls``).
VMM_CALLS = (
    *("cuMemCreate", "cuMemMap", "cuMemUnmap", "cuMemRelease", "cuMemSetAccess"),
    *("cuMemAddressReserve", "cuMemAddressFree", "hipMemCreate", "hipMemMap"),
)
CHURN_COLUMNS = ("step", "start_ns", "end_ns", "mallocs", "malloc_bytes", "frees", "free_bytes")


def host_step_ranges(ctx: AnalysisContext) -> pl.DataFrame:
    """``rank, name, start_ns, end_ns`` of the kept host step ranges (module docstring)."""
    ev = ctx.session.events
    # the kind (an Enum) compared with literals directly: no cast of the whole column
    ranges = ev.filter(pl.col("kind").is_in(["annotation", "cpu_op"])).select(
        "rank",
        pl.col("name").cast(pl.String),
        "start_ns",
        (pl.col("start_ns") + pl.col("dur_ns")).alias("end_ns"),
    )
    found = first_step_ranges(ranges, ctx.options.steps.pattern)
    if found.height == 0:
        return found.select("rank", "name", "start_ns", "end_ns")
    found = found.sort(["rank", "start_ns", "end_ns"], descending=[False, False, True])
    before = pl.col("end_ns").cum_max().shift(1).over("rank")
    return found.filter(before.is_null() | (pl.col("start_ns") >= before)).select(
        "rank", "name", "start_ns", "end_ns"
    )


def step_churn(rows: pl.DataFrame, steps: pl.DataFrame) -> pl.DataFrame:
    """Per step of ``steps`` (one rank's), the churn of ``rows`` (one device's memory rows,
    sorted by time): ``CHURN_COLUMNS``, in step order; a step with no event has zeros."""
    st = steps.sort("start_ns").with_row_index("_i")
    t = rows.get_column("start_ns").to_numpy()
    b = rows.get_column("bytes").to_numpy()
    s0, s1 = st.get_column("start_ns").to_numpy(), st.get_column("end_ns").to_numpy()
    idx = np.searchsorted(s0, t, side="right") - 1
    inside = (idx >= 0) & (t < s1[np.maximum(idx, 0)])
    n = st.height
    at, bb = idx[inside], b[inside]
    mall, free = bb > 0, bb < 0
    return st.select(
        pl.col("name").alias("step"),
        "start_ns",
        "end_ns",
        pl.Series("mallocs", np.bincount(at[mall], minlength=n)[:n], pl.Int64),
        pl.Series("malloc_bytes", np.bincount(at[mall], bb[mall], minlength=n)[:n], pl.Int64),
        pl.Series("frees", np.bincount(at[free], minlength=n)[:n], pl.Int64),
        pl.Series("free_bytes", np.bincount(at[free], -bb[free], minlength=n)[:n], pl.Int64),
    )


def allocator_calls(ctx: AnalysisContext) -> pl.DataFrame:
    """``rank, name, start_ns, end_ns`` of every host row of the ``memory_management``
    class, sorted by (rank, start)."""
    frame = ctx.host.frame
    mine = frame.filter(pl.col("cause") == CAUSE_INDEX[MEMORY_MANAGEMENT]).select(
        "event_id", pl.col("name").cast(pl.String), "start_ns", "end_ns"
    )
    ranks = ctx.session.events.select("event_id", "rank")
    return (
        mine.join(ranks, on="event_id", how="left")
        .select("rank", "name", "start_ns", "end_ns")
        .sort("rank", "start_ns")
    )


def gpu_idle_during(ctx: AnalysisContext, g: int, calls: pl.DataFrame) -> pl.Series:
    """Per call of ``calls``, the ns of ``[start_ns, end_ns)`` in device ``g``'s window during
    which the device was not busy (Int64, named ``gpu_idle_ns``)."""
    lo, hi = int(ctx.window_lo[g]), int(ctx.window_hi[g])
    s = np.clip(calls.get_column("start_ns").to_numpy(), lo, hi)
    e = np.clip(calls.get_column("end_ns").to_numpy(), lo, hi)
    bs, be = ctx.busy.of(g)
    busy = cumulative(bs, be, e) - cumulative(bs, be, s) if s.size else np.zeros(0, np.int64)
    return pl.Series("gpu_idle_ns", np.maximum(e - s - busy, 0), pl.Int64)


def idle_spans(ctx: AnalysisContext, g: int, calls: pl.DataFrame) -> list[tuple[int, int]]:
    """The ``(start_ns, end_ns)`` spans in which device ``g`` was idle inside its window while
    an allocator call of ``calls`` ran (calls merged first: an ``empty_cache`` range and the
    ``cudaFree`` inside it count once), for the figure; the first ``MAX_SPANS`` merged calls."""
    lo, hi = int(ctx.window_lo[g]), int(ctx.window_hi[g])
    s = np.clip(calls.get_column("start_ns").to_numpy(), lo, hi)
    e = np.clip(calls.get_column("end_ns").to_numpy(), lo, hi)
    us, ue = union(s[e > s], e[e > s])
    bs, be = ctx.busy.of(g)
    out: list[tuple[int, int]] = []
    for a, b in zip(us[:MAX_SPANS].tolist(), ue[:MAX_SPANS].tolist(), strict=True):
        hs, he = holes(bs, be, a, b)
        out += zip(hs.tolist(), he.tolist(), strict=True)
    return out


def outermost(calls: pl.DataFrame) -> pl.DataFrame:
    """``calls`` (sorted by rank, start) without the calls inside an earlier one of their rank
    (ending no later than a call that started no later): nested calls count once."""
    if calls.height == 0:
        return calls
    calls = calls.sort(["rank", "start_ns", "end_ns"], descending=[False, False, True])
    before = pl.col("end_ns").cum_max().shift(1).over("rank")
    return calls.filter(before.is_null() | (pl.col("end_ns") > before))


def union_ns(calls: pl.DataFrame) -> int:
    """The ns of the union of the calls' ``[start_ns, end_ns)`` (overlaps counted once)."""
    s, e = calls.get_column("start_ns").to_numpy(), calls.get_column("end_ns").to_numpy()
    keep = e > s
    us, ue = union(s[keep], e[keep])
    return int((ue - us).sum())


def steady_allocator_idle(ctx: AnalysisContext, g: int, total_ns: int) -> int:
    """The device's ``memory_management`` idle outside its one-off windows (the steady state
    the idle findings use: ``findings.steady``): ``total_ns`` minus the idle of that cause in
    the windows of ``analysis.one_off`` (never below 0)."""
    win = one_off_windows(ctx, g)
    if win.lo.size == 0:
        return total_ns
    wg = window_gaps(ctx, np.full(win.lo.size, g, dtype=np.int64), win.lo, win.hi, keep=0)
    one_off = full_causes(wg.by_window.sum(axis=0)).get(MEMORY_MANAGEMENT, 0)
    return total_ns - min(one_off, total_ns)


def vmm_calls(ctx: AnalysisContext) -> dict[int, int]:
    """Rank -> the number of its host calls of the virtual-memory API (``VMM_CALLS``)."""
    ev = ctx.session.events
    api = ev.filter(pl.col("kind") == "cuda_api")  # driver/runtime calls only
    hit = api.filter(pl.col("name").cast(pl.String).str.contains(f"^(?:{'|'.join(VMM_CALLS)})"))
    counts = hit.group_by("rank").len()
    return {int(r): int(n) for r, n in counts.iter_rows()}
