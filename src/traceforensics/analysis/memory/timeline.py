"""One device's allocated and reserved bytes over time: the peak, when, and the op then.

Rules (``peak_of``), on one device's ``memory_rows`` in time order (totals after each event):

- ``peak_allocated_bytes`` = the largest ``total_allocated``; ``peak_at_ns`` = the time of the
  first event that reaches it. ``peak_reserved_bytes`` = the largest ``total_reserved`` (at
  ``peak_reserved_at_ns``, first reached).
- ``reserved_at_peak_bytes``: ``total_reserved`` after the peak event, and
  ``fragmentation_bytes`` = that minus ``peak_allocated_bytes`` (>= 0 for a caching allocator;
  0 where reserved is not known).
- ``peak_op``: the innermost host ``cpu_op`` of the peak event's (rank, pid, tid) covering its
  time (``start_ns <= t <= end_ns``; the latest start wins, then the shortest): the op that
  was running when the allocation was made. An event with no thread (nsys) takes the thread
  and start of the runtime call of the same (rank, pid, ``correlation``). None when no op
  covers it.

``series`` (``downsample``): at most ``MAX_POINTS`` points for a figure; a long series keeps,
per time bucket, the event with the most allocated bytes (peaks survive).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Final

import numpy as np
import polars as pl

from traceforensics.model.session import TraceSession

MAX_POINTS: Final = 4000


@dataclass
class Peak:
    """The peak of one device (module docstring). Bytes and ns."""

    peak_allocated_bytes: int
    peak_at_ns: int
    peak_reserved_bytes: int
    peak_reserved_at_ns: int
    reserved_at_peak_bytes: int
    fragmentation_bytes: int
    peak_op: str | None


def peak_of(rows: pl.DataFrame, session: TraceSession) -> Peak:
    """The peak of one device's non-empty memory rows (sorted by time)."""
    alloc = rows.get_column("total_allocated").to_numpy()
    res = rows.get_column("total_reserved").to_numpy()
    t = rows.get_column("start_ns").to_numpy()
    i, j = int(np.argmax(alloc)), int(np.argmax(res))  # argmax: the first maximum
    at = rows.row(i, named=True)
    reserved_at = int(res[i])
    return Peak(
        peak_allocated_bytes=int(alloc[i]),
        peak_at_ns=int(t[i]),
        peak_reserved_bytes=int(res[j]),
        peak_reserved_at_ns=int(t[j]),
        reserved_at_peak_bytes=reserved_at,
        fragmentation_bytes=max(reserved_at - int(alloc[i]), 0),
        peak_op=_op_at(session, at, int(t[i])),
    )


def _op_at(session: TraceSession, at: dict[str, Any], t: int) -> str | None:
    """The innermost cpu_op covering ``t`` on the thread of memory row ``at`` (or of its
    runtime call, by correlation); None when none."""
    ev = session.events
    rank, pid, tid = at["rank"], at["pid"], at["tid"]
    if tid is None and pid is not None and at["correlation"] is not None:
        call = ev.filter(
            (pl.col("kind") == "cuda_api")
            & (pl.col("rank") == rank)
            & (pl.col("pid") == pid)
            & (pl.col("correlation") == at["correlation"])
        )
        if call.height:
            tid, t = call.item(0, "tid"), int(call.item(0, "start_ns"))
    if pid is None or tid is None:
        return None
    ops = ev.filter(
        (pl.col("kind") == "cpu_op")
        & (pl.col("rank") == rank)
        & (pl.col("pid") == pid)
        & (pl.col("tid") == tid)
        & (pl.col("start_ns") <= t)
        & (pl.col("start_ns") + pl.col("dur_ns") >= t)
    )
    if ops.height == 0:
        return None
    best = ops.sort(["start_ns", "dur_ns"], descending=[True, False]).row(0, named=True)
    return str(best["name"])


def downsample(rows: pl.DataFrame) -> pl.DataFrame:
    """``start_ns, total_allocated, total_reserved`` of at most ``MAX_POINTS`` events: all of
    them, or per equal time bucket the one with the most allocated bytes (first such)."""
    cols = rows.select("start_ns", "total_allocated", "total_reserved")
    if cols.height <= MAX_POINTS:
        return cols
    t0, t1 = int(cols.item(0, "start_ns")), int(cols.item(-1, "start_ns"))
    width = max((t1 - t0) // MAX_POINTS + 1, 1)
    bucket = ((pl.col("start_ns") - t0) // width).alias("_b")
    return (
        cols.with_row_index("_i")
        .with_columns(bucket)
        .sort(["_b", "total_allocated", "_i"], descending=[False, True, False])
        .unique("_b", keep="first", maintain_order=True)
        .sort("_i")
        .select("start_ns", "total_allocated", "total_reserved")
    )
