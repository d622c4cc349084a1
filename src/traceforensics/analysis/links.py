"""Who launched each kernel: kernel -> launch API call -> enclosing host op, and the op tree.

Links (same for Kineto and nsys tables):

1. kernel -> launch call: same ``rank`` and ``correlation`` (CUPTI correlation id); when several
   calls share it, the one in the kernel's ``pid`` wins.
2. launch call -> op: the innermost ``cpu_op``/``annotation`` range open on the call's
   ``(rank, pid, tid)`` at the call's start (for nsys the PyTorch NVTX range that the ingester
   turned into a ``cpu_op``). A kernel without a launch call but with an ``external_id`` links
   to the cpu_op carrying that External id (old Kineto traces).
3. op tree: each host range's parent is the innermost range on the same thread still open at
   its start::

       thread:  [aten::linear..........................]
                   [aten::addmm..................]
                      [cudaLaunchKernel]            <- launch call, parent = aten::addmm
       stream:                 [gemm kernel]        <- kernel -> (correlation) -> call

Only ints and numpy arrays are walked; no per-event objects.
"""

from __future__ import annotations

import numpy as np
import numpy.typing as npt
import polars as pl

HOST_RANGE_KINDS = ("cpu_op", "annotation")
I64 = npt.NDArray[np.int64]


def host_tree(events: pl.DataFrame) -> pl.DataFrame:
    """Host ranges (cpu_op, annotation) and cuda_api calls with ``parent_id`` (innermost
    enclosing cpu_op/annotation on the same thread, null at top level). cuda_api rows are leaves:
    they never parent anything."""
    rows = (
        events.filter(
            pl.col("kind").is_in([*HOST_RANGE_KINDS, "cuda_api"]) & pl.col("tid").is_not_null()
        )
        .select(
            "event_id",
            pl.col("kind").cast(pl.String),
            pl.col("name").cast(pl.String),
            "rank",
            pl.col("pid").fill_null(-1),
            "tid",
            "start_ns",
            (pl.col("start_ns") + pl.col("dur_ns")).alias("end_ns"),
        )
        .sort(
            ["rank", "pid", "tid", "start_ns", "end_ns"],
            descending=[False, False, False, False, True],
        )
    )
    if rows.height == 0:
        return rows.with_columns(pl.lit(None, dtype=pl.Int64).alias("parent_id"))
    new_thread = (
        (pl.col("rank") != pl.col("rank").shift(1))
        | (pl.col("pid") != pl.col("pid").shift(1))
        | (pl.col("tid") != pl.col("tid").shift(1))
    ).fill_null(True)
    parent = _parents(
        rows.select(new_thread.cast(pl.Int64).cum_sum().alias("g")).get_column("g").to_numpy(),
        rows.get_column("start_ns").to_numpy(),
        rows.get_column("end_ns").to_numpy(),
        (rows.get_column("kind") != "cuda_api").to_numpy(),
        rows.get_column("event_id").to_numpy(),
    )
    return rows.with_columns(
        pl.when(pl.Series(parent) >= 0).then(pl.Series(parent)).otherwise(None).alias("parent_id")
    )


def _parents(group: I64, start: I64, end: I64, can_parent: npt.NDArray[np.bool_], ids: I64) -> I64:
    """Parent event id (or -1) of rows sorted by (group, start, -end), as the stack sweep
    ``_parents_sweep`` assigns it, computed columnar.

    When a thread's ranges nest properly (any two are nested or disjoint), the sweep's stack
    holds exactly the ranges still open, so the parent of row k is the *latest* earlier
    can-parent row j of the same group with ``end_j > start_k``::

        j0 [.........................]      open at s_k, earlier
        j1      [........]                   closed before s_k: skipped
        j2                [..........]       open at s_k, latest -> parent of k
        k                     [....]

    That "nearest earlier row with end > s" is found for all rows at once by binary lifting
    over a sparse table of range maxima. Proper nesting is then checked (each range ends no
    later than its parent; a partial overlap always breaks this on some range of the chain);
    groups that fail it (overlapping, not nested, ranges) are redone with the sweep, whose
    stack order then decides."""
    n = len(ids)
    out = np.full(n, -1, dtype=np.int64)
    if n == 0:
        return out
    floor = np.iinfo(np.int64).min
    # level l holds max(end over can-parent rows in [i, i + 2**l)); non-parents never match
    table = [np.where(can_parent, end, floor)]
    while (1 << len(table)) <= n:
        prev, half = table[-1], 1 << (len(table) - 1)
        table.append(np.maximum(prev[:-half], prev[half:]))
    pos = np.arange(n, dtype=np.int64)  # exclusive right edge of the rows left to search
    for lvl in range(len(table) - 1, -1, -1):
        width = 1 << lvl
        lo = pos - width
        ok = lo >= 0
        cand = np.where(ok, lo, 0)
        block = table[lvl][np.minimum(cand, len(table[lvl]) - 1)]
        skip = ok & (block <= start)
        pos = np.where(skip, lo, pos)
    j = pos - 1
    found = (j >= 0) & (group[np.maximum(j, 0)] == group)
    out = np.where(found, ids[np.maximum(j, 0)], -1)
    bad = can_parent & found & (end > end[np.maximum(j, 0)])
    if bad.any():
        for g in np.unique(group[bad]).tolist():
            # rows are sorted by group: each group is one contiguous slice
            sl = slice(
                int(np.searchsorted(group, g, "left")), int(np.searchsorted(group, g, "right"))
            )
            out[sl] = _parents_sweep(start[sl], end[sl], can_parent[sl], ids[sl])
    return out


def _parents_sweep(start: I64, end: I64, can_parent: npt.NDArray[np.bool_], ids: I64) -> I64:
    """Stack sweep over one thread's rows sorted by (start, -end): parent event id or -1."""
    out = [-1] * len(ids)
    stack_end: list[int] = []
    stack_id: list[int] = []
    # plain Python ints and lists: per-row numpy scalar access costs more than the sweep itself
    s_l, e_l, p_l, i_l = start.tolist(), end.tolist(), can_parent.tolist(), ids.tolist()
    for k, s in enumerate(s_l):
        while stack_end and stack_end[-1] <= s:
            stack_end.pop()
            stack_id.pop()
        if stack_id:
            out[k] = stack_id[-1]
        if p_l[k]:
            stack_end.append(e_l[k])
            stack_id.append(i_l[k])
    return np.asarray(out, dtype=np.int64)


def kernel_launches(events: pl.DataFrame, tree: pl.DataFrame | None = None) -> pl.DataFrame:
    """One row per kernel: ``kernel_id, rank, device, stream, start_ns, dur_ns, kname,
    api_id, api_start_ns, api_dur_ns, op_id`` (innermost launching cpu_op/annotation; null when
    unknown)."""
    if tree is None:
        tree = host_tree(events)
    kern = events.filter(pl.col("kind") == "kernel").select(
        pl.col("event_id").alias("kernel_id"),
        "rank",
        "device",
        "stream",
        "start_ns",
        "dur_ns",
        pl.col("name").cast(pl.String).alias("kname"),
        "correlation",
        "external_id",
        pl.col("pid").alias("kpid"),
    )
    api = events.filter(
        (pl.col("kind") == "cuda_api") & pl.col("correlation").is_not_null()
    ).select(
        pl.col("event_id").alias("api_id"),
        "rank",
        "correlation",
        pl.col("pid").alias("apid"),
        pl.col("start_ns").alias("api_start_ns"),
        pl.col("dur_ns").alias("api_dur_ns"),
    )
    joined = (
        kern.join(api, on=["rank", "correlation"], how="left")
        .with_columns(
            (pl.col("kpid").is_not_null() & (pl.col("kpid") == pl.col("apid"))).alias("_same")
        )
        .sort(["kernel_id", "_same"], descending=[False, True])
        .unique("kernel_id", keep="first", maintain_order=True)
    )
    parents = tree.filter(pl.col("kind") == "cuda_api").select(
        pl.col("event_id").alias("api_id"), pl.col("parent_id").alias("op_id")
    )
    joined = joined.join(parents, on="api_id", how="left")
    # fallback: External id straight to a cpu_op on the same rank (old Kineto, no launch row)
    ext = (
        events.filter((pl.col("kind") == "cpu_op") & pl.col("external_id").is_not_null())
        .select("rank", "external_id", pl.col("event_id").alias("_ext_op"))
        .unique(["rank", "external_id"], keep="first")
    )
    joined = joined.join(ext, on=["rank", "external_id"], how="left").with_columns(
        pl.when(pl.col("api_id").is_null())
        .then(pl.col("_ext_op"))
        .otherwise(pl.col("op_id"))
        .alias("op_id")
    )
    return joined.select(
        "kernel_id",
        "rank",
        "device",
        "stream",
        "start_ns",
        "dur_ns",
        "kname",
        "api_id",
        "api_start_ns",
        "api_dur_ns",
        "op_id",
    ).sort("kernel_id")


def ancestors_pick(
    tree: pl.DataFrame, start_ids: pl.Series, flag_ids: set[int] | pl.Series
) -> npt.NDArray[np.int64]:
    """For each id in ``start_ids`` (nullable), the *outermost* ancestor-or-self whose id is in
    ``flag_ids``; -1 when none. Walks parent pointers level by level (vectorised)."""
    ids = tree.get_column("event_id").to_numpy()
    order = np.argsort(ids)
    sorted_ids = ids[order]
    parent_ids = tree.get_column("parent_id").fill_null(-1).to_numpy()[order]
    flagged = np.isin(sorted_ids, np.asarray(list(flag_ids), dtype=np.int64))

    def index_of(q: npt.NDArray[np.int64]) -> npt.NDArray[np.int64]:
        pos = np.searchsorted(sorted_ids, q)
        pos = np.clip(pos, 0, max(len(sorted_ids) - 1, 0))
        ok = (q >= 0) & (len(sorted_ids) > 0)
        ok &= sorted_ids[pos] == q if len(sorted_ids) else ok
        return np.where(ok, pos, -1)

    cur = index_of(start_ids.fill_null(-1).to_numpy().astype(np.int64))
    best = np.full(len(cur), -1, dtype=np.int64)
    for _ in range(256):  # depth bound; real stacks are < 50 deep
        live = cur >= 0
        if not live.any():
            break
        hit = live & flagged[np.where(live, cur, 0)]
        best = np.where(hit, sorted_ids[np.where(live, cur, 0)], best)
        nxt = np.where(live, parent_ids[np.where(live, cur, 0)], -1)
        cur = index_of(nxt)
    return best
