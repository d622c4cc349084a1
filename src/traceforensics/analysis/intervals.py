"""Interval arithmetic on integer-ns intervals, vectorised with numpy.

All functions take/return int64 arrays of starts and ends (end exclusive: ``[start, end)``).

    union:   |====|   |=====|          input  [0,5) [3,8) [12,18)
             |  |======|      |=====|
    result:  |=========|  |=====|      [0,8) [12,18)
"""

from __future__ import annotations

import numpy as np
import numpy.typing as npt
import polars as pl

from traceforensics.model.schema import BUSY_KINDS

I64 = npt.NDArray[np.int64]


def union(starts: I64, ends: I64) -> tuple[I64, I64]:
    """Merge overlapping or touching intervals. Returns sorted, disjoint ``(starts, ends)``.

    Zero-length intervals are dropped (they cover no time).
    """
    s = np.asarray(starts, dtype=np.int64)
    e = np.asarray(ends, dtype=np.int64)
    keep = e > s
    s, e = s[keep], e[keep]
    if s.size == 0:
        return s, e
    order = np.argsort(s, kind="stable")
    s, e = s[order], e[order]
    run_max_end = np.maximum.accumulate(e)
    # a new merged interval starts where the start is beyond every earlier end
    new = np.empty(s.size, dtype=bool)
    new[0] = True
    new[1:] = s[1:] > run_max_end[:-1]
    idx = np.flatnonzero(new)
    out_s = s[idx]
    out_e = np.append(run_max_end[idx[1:] - 1], run_max_end[-1])
    return out_s, out_e.astype(np.int64)


def total(starts: I64, ends: I64) -> int:
    """Total length (ns) of disjoint intervals."""
    return int(np.sum(ends - starts, dtype=np.int64))


def clip(starts: I64, ends: I64, lo: int, hi: int) -> tuple[I64, I64]:
    """Clip disjoint intervals to the window ``[lo, hi)``, dropping empty ones."""
    s = np.maximum(starts, lo)
    e = np.minimum(ends, hi)
    keep = e > s
    return s[keep], e[keep]


def gaps(starts: I64, ends: I64, lo: int, hi: int) -> tuple[I64, I64]:
    """The holes of disjoint sorted intervals inside ``[lo, hi)``.

    window:  [lo ................................ hi)
    busy:        |====|      |=======|
    gaps:    [lo)|    |======|       |===========hi)
    """
    s, e = clip(starts, ends, lo, hi)
    gap_s = np.concatenate(([lo], e)).astype(np.int64)
    gap_e = np.concatenate((s, [hi])).astype(np.int64)
    keep = gap_e > gap_s
    return gap_s[keep], gap_e[keep]


def busy_intervals(events: pl.DataFrame, rank: int, device: int) -> tuple[I64, I64]:
    """Union of kernel, memcpy and memset intervals of one device (all streams)."""
    sub = events.filter(
        pl.col("kind").is_in(list(BUSY_KINDS))
        & (pl.col("rank") == rank)
        & (pl.col("device") == device)
    ).select("start_ns", (pl.col("start_ns") + pl.col("dur_ns")).alias("end_ns"))
    return union(
        sub.get_column("start_ns").to_numpy().astype(np.int64),
        sub.get_column("end_ns").to_numpy().astype(np.int64),
    )
