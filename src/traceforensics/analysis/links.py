"""The launch linker: one link per GPU op (kernel, memcpy, memset) to the call that launched it
and the host op that made that call. Every pass reads these links from the context.

Rule, for GPU op *g* on rank *r* with CUPTI correlation id *c*::

    host pid 1:  [aten::addmm.........................]
                    [cudaLaunchKernel corr=c]              <- candidate, same pid: wins
    host pid 2:        [cudaLaunchKernel corr=c]           <- candidate, other pid
    stream 7:                  [gemm kernel corr=c, pid 1]

1. Launch call: among ``cuda_api`` rows of rank *r* with correlation *c*, prefer the call in
   g's pid, then a call whose pid (or g's) is unknown, then a call in another pid; among equals
   the lowest event id. Correlation ids repeat across processes and after wrap-around, so the
   candidates are first reduced to one per (rank, correlation, pid): the join cannot explode.
2. Launching op: the innermost ``cpu_op``/``annotation`` enclosing that call (``optree``). An
   op with no launch call but with a Kineto ``External id`` links to the cpu_op of that id on
   the same rank (old PyTorch traces); it then has a launching op but no launch call, so idle
   attribution (which needs the call's timing) treats it as unlaunched.
"""

from __future__ import annotations

import polars as pl

#: Link columns added to every GPU op (null when unknown); ``l_thr`` is the launching thread's
#: index in the context's host table.
LINK_COLUMNS = (
    "api_id",
    "l_pid",
    "launch_start_ns",
    "launch_end_ns",
    "l_name",
    "l_thr",
    "op_id",
)
#: Candidate order of rule 1 (lower wins).
SAME_PID, UNKNOWN_PID, OTHER_PID = 0, 1, 2


def launch_links(
    work: pl.DataFrame, calls: pl.DataFrame, ext: pl.DataFrame, tree: pl.DataFrame
) -> pl.DataFrame:
    """``work`` (GPU ops with ``event_id, rank, pid, correlation, external_id``; row order not
    kept) with ``LINK_COLUMNS`` added: the launch call's event id, pid, start/end (ns), name
    and thread index (its tid: ``HostClasses.thread_tid``), and the launching op's event id.

    ``calls``: the ``cuda_api`` rows with a correlation id (``event_id, rank, correlation, pid,
    start_ns, end_ns, name``); ``ext``: ``rank, external_id, ext_op`` (the lowest cpu_op
    event id per External id); ``tree``: the host op tree (``optree.host_tree``)."""
    cand = calls.group_by("rank", "correlation", "pid").agg(pl.col("event_id").min())
    pick = (
        work.select("event_id", "rank", "correlation", pl.col("pid").alias("g_pid"))
        .drop_nulls("correlation")
        .join(
            cand.rename({"event_id": "api_id", "pid": "a_pid"}),
            on=["rank", "correlation"],
            how="inner",
        )
        .with_columns(
            pl.when(pl.col("g_pid").is_null() | pl.col("a_pid").is_null())
            .then(pl.lit(UNKNOWN_PID))
            .when(pl.col("g_pid") == pl.col("a_pid"))
            .then(pl.lit(SAME_PID))
            .otherwise(pl.lit(OTHER_PID))
            .alias("prio")
        )
        .sort("event_id", "prio", "api_id")
        .unique("event_id", keep="first", maintain_order=True)
        .select("event_id", "api_id")
    )
    detail = calls.select(
        pl.col("event_id").alias("api_id"),
        pl.col("pid").fill_null(-1).alias("l_pid"),
        pl.col("start_ns").alias("launch_start_ns"),
        pl.col("end_ns").alias("launch_end_ns"),
        pl.col("name").alias("l_name"),  # categorical: codes, not 10M copies of a few names
    )
    parents = tree.filter(pl.col("kind") == "cuda_api").select(
        pl.col("event_id").alias("api_id"),
        pl.col("thr").alias("l_thr"),
        pl.col("parent_id").alias("op_id"),
    )
    return (
        work.join(pick, on="event_id", how="left")
        .join(detail, on="api_id", how="left")
        .join(parents, on="api_id", how="left")
        .join(ext, on=["rank", "external_id"], how="left")
        .with_columns(
            pl.when(pl.col("api_id").is_null())
            .then(pl.col("ext_op"))
            .otherwise(pl.col("op_id"))
            .alias("op_id")
        )
        .drop("ext_op")
    )
