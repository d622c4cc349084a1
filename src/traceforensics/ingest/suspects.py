"""Checks of a loaded trace that flag what it cannot show (warnings, never errors).

- Graph launches without GPU records: a ``cudaGraphLaunch`` / ``hipGraphLaunch`` /
  ``cuGraphLaunch`` call whose correlation id no GPU row of its rank carries. The graph ran,
  but neither its nodes (node-level tracing) nor a graph-level record were captured, so the GPU
  looks idle while it worked::

      host:    [cudaGraphLaunch corr=9]
      stream:  .......(graph ran here, nothing recorded).......   <- reads as idle
"""

from __future__ import annotations

import polars as pl

from traceforensics.model.schema import BUSY_KINDS

GRAPH_LAUNCH_RE = r"^(?:cuda|hip|cu)GraphLaunch"


def graph_launch_notes(events: pl.DataFrame) -> list[str]:
    """One warning when some graph launches have no GPU record, naming how many."""
    api = events.select("kind", "rank", "correlation", "name").filter(
        (pl.col("kind") == "cuda_api") & pl.col("correlation").is_not_null()
    )
    # the pattern on each distinct name once (a trace repeats a few names over every call)
    names = api.get_column("name").unique().drop_nulls()
    launches = names.filter(names.cast(pl.String).str.contains(GRAPH_LAUNCH_RE))
    if launches.len() == 0:
        return []
    calls = api.filter(pl.col("name").is_in(launches.implode())).select(
        "rank", "correlation", pl.col("name").cast(pl.String)
    )
    work = (
        events.filter(pl.col("kind").cast(pl.String).is_in(BUSY_KINDS))
        .select("rank", "correlation")
        .drop_nulls()
        .unique()
    )
    missing = calls.join(work, on=["rank", "correlation"], how="anti")
    if missing.height == 0:
        return []
    api = missing.get_column("name").str.extract(r"^((?:cuda|hip|cu)GraphLaunch)").mode()[0]
    return [
        f"{missing.height} of {calls.height} {api} calls have no GPU record: their graphs' work "
        "is missing from the trace, so the GPU reads as idle while it ran them; record graph "
        "kernels (nsys --cuda-graph-trace=node or =graph; a PyTorch profiler with CUDA/HIP "
        "graph kernel tracing)"
    ]
