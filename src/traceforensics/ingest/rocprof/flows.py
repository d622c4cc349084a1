"""Launch links of a rocprof v1 trace, read from its ``DataFlow`` flow events.

v1 writes no correlation id on its events (``tblextr.py`` leaves its ``Index`` column out of
the JSON): the only link between a HIP call and the GPU op it queued is a flow pair with one
``id``, each end on a lane at a µs time::

    CPU HIP API, tid 7:   [hipLaunchKernel ......]          "s" at the call's middle (µs)
                                      \\
    GPU0, tid 1 (stream):              [kernel ....]        "t" at the op's start (µs)

Rule: each flow end lands on the row of its lane (JSON ``pid`` and ``tid``) that began last at
or before the end's time (µs, floored) and has not ended before it; a flow links the API call
its ends landed on to the GPU ops they landed on, whichever end is ``s`` (v2 swaps them when
the clocks disagree). Both get the call's event id as ``correlation``; a GPU op several flows
reach takes the lowest flow id's call. Flows whose ends land on no row, on two calls or on no
call (v1's call-to-``hipStreamSynchronize`` flows) link nothing.
"""

from __future__ import annotations

import polars as pl

#: Kinds a flow end may link: the call, and the GPU rows it queued.
_CALL, _GPU = "cuda_api", ("kernel", "memcpy", "memset", "gpu_sync")


def flow_correlation(rows: pl.DataFrame, flows: pl.DataFrame) -> pl.Series:
    """``correlation`` for ``rows`` (``event_id, kind, jpid, jtid, start_us, end_us``) from
    ``flows`` (``fid, jpid, jtid, ts_us``): the linked call's event id, else null."""
    none = pl.Series("correlation", [None] * rows.height, dtype=pl.Int64)
    if flows.is_empty() or rows.is_empty():
        return none
    lanes = rows.select("event_id", "kind", "jpid", "jtid", "start_us", "end_us").sort(
        "jpid", "jtid", "start_us"
    )
    ends = flows.sort("jpid", "jtid", "ts_us").join_asof(
        lanes,
        left_on="ts_us",
        right_on="start_us",
        by=["jpid", "jtid"],
        strategy="backward",
        check_sortedness=False,
    )
    ends = ends.filter(pl.col("event_id").is_not_null() & (pl.col("ts_us") <= pl.col("end_us")))
    calls = (
        ends.filter(pl.col("kind") == _CALL)
        .group_by("fid")
        .agg(pl.col("event_id").unique().alias("call"))
        .filter(pl.col("call").list.len() == 1)
        .select("fid", pl.col("call").list.first())
    )
    gpu = (
        ends.filter(pl.col("kind").is_in(_GPU))
        .join(calls, on="fid")
        .sort("fid")
        .group_by("event_id", maintain_order=True)
        .agg(pl.col("call").first())
    )
    linked = pl.concat(
        [
            gpu.select("event_id", pl.col("call").alias("correlation")),
            gpu.select(pl.col("call").alias("event_id"), pl.col("call").alias("correlation")),
        ]
    ).unique("event_id")
    return (
        rows.select("event_id")
        .join(linked, on="event_id", how="left", maintain_order="left")
        .get_column("correlation")
        .cast(pl.Int64)
    )
