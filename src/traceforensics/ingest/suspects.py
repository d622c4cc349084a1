"""Checks of a loaded trace that flag what it cannot show (warnings, never errors).

- Graph launches without GPU records: a ``cudaGraphLaunch`` / ``hipGraphLaunch`` /
  ``cuGraphLaunch`` call whose correlation id no GPU row of its rank carries. The graph ran,
  but neither its nodes (node-level tracing) nor a graph-level record were captured, so the GPU
  looks idle while it worked::

      host:    [cudaGraphLaunch corr=9]
      stream:  .......(graph ran here, nothing recorded).......   <- reads as idle

- Impossible GPU rows (``suspect_row_notes``): rows that are exact copies of another (same
  kind, rank, device, stream, start, duration and name: a stream runs one thing at a time, so
  a copy is a writer's or a merger's error and double-counts its time), and rows lasting
  longer than ``ABSURD_FACTOR`` times the rest of the trace put together, or than
  ``ABSURD_DUR_NS`` (a clock or write error: a kernel of 292 years). The figures are left as
  computed; the findings never give back more than their window (``analysis.findings``).
"""

from __future__ import annotations

import polars as pl

from traceforensics.model.schema import BUSY_KINDS
from traceforensics.model.units import fmt_ns

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


#: A GPU row lasting longer than this many times the span of every other row is impossible.
ABSURD_FACTOR = 2
#: A GPU row longer than this (one day, ns) is impossible whatever the rest: no profiler
#: records a day.
ABSURD_DUR_NS = 86_400 * 10**9
_ROW_KEY = ("kind", "rank", "device", "stream", "start_ns", "dur_ns", "name")


def suspect_row_notes(events: pl.DataFrame) -> list[str]:
    """Warnings for impossible GPU rows (module doc): duplicated rows, absurd durations."""
    gpu = events.select(_ROW_KEY).filter(
        pl.col("kind").cast(pl.String).is_in(BUSY_KINDS)
        & pl.col("start_ns").is_not_null()
        & (pl.col("dur_ns") > 0)  # (zero-length rows at one clock tick may share a stamp)
    )
    if gpu.height == 0:
        return []
    out = []
    copies = gpu.height - gpu.unique().height
    if copies:
        out.append(
            f"{copies} of {gpu.height} GPU rows are exact copies of another (same stream, "
            "start, duration and name): the trace was written or merged twice; their time "
            "counts twice in busy and kernel figures; re-export the trace"
        )
    absurd = _absurd_rows(events, gpu)
    if absurd.height:
        longest = absurd.sort("dur_ns", descending=True).row(0, named=True)
        out.append(
            f"{absurd.height} GPU row(s) last longer than the rest of the trace could hold "
            f"(longest: {longest['name']}, {fmt_ns(longest['dur_ns'])}): a clock or write "
            "error; figures that count them are suspect; re-export the trace"
        )
    return out


def _absurd_rows(events: pl.DataFrame, gpu: pl.DataFrame) -> pl.DataFrame:
    """GPU rows longer than ``ABSURD_DUR_NS``, or than ``ABSURD_FACTOR`` x the span of every
    other row of the trace (the two extreme starts and ends, so a row's own times never
    widen the span it is judged against)."""
    timed = events.select("start_ns", (pl.col("start_ns") + pl.col("dur_ns")).alias("end_ns"))
    timed = timed.drop_nulls()
    if timed.height < 3:
        return gpu.filter(pl.col("dur_ns") > ABSURD_DUR_NS)
    starts = timed.get_column("start_ns").bottom_k(2).sort().to_list()
    ends = timed.get_column("end_ns").top_k(2).sort(descending=True).to_list()
    end = pl.col("start_ns") + pl.col("dur_ns")
    other_end = pl.when(end == ends[0]).then(ends[1]).otherwise(ends[0])
    other_start = pl.when(pl.col("start_ns") == starts[0]).then(starts[1]).otherwise(starts[0])
    span = other_end - other_start
    return gpu.filter(
        (pl.col("dur_ns") > ABSURD_DUR_NS) | (pl.col("dur_ns") > ABSURD_FACTOR * span)
    )
