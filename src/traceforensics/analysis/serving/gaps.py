"""The host gap before each iteration and its split by the host ranges present.

Rule (docs/serving.md), per device, iterations in start order:

- the gap of an iteration is ``[a, b)`` (``gap_start_ns``, ``gap_end_ns``): ``a`` the latest
  GPU end of the device's earlier iterations, ``b`` its own first GPU start, or the start of
  its first graph launch call without GPU rows when earlier (Kineto may record a replay
  without its kernels: the GPU is busy from then on, unseen). No gap for the first iteration,
  none for one without GPU work, none when ``b <= a``: its work was queued before the
  previous ended (``queued_ahead``: the engine overlaps scheduling with the GPU);
- ``host_gap_ns``: the device's idle in ``[a, b)`` (the busy union's holes: GPU work run in
  the gap outside every iteration, e.g. vLLM's sampler launched after ``execute_model``, is
  no gap);
- the split: an idle ns covered by a host range of the iteration's process (rank, pid) of
  class ``sampling`` goes to sampling; else ``detokenisation``; else ``scheduler``
  (``engines.GAP_CLASSES``, matched on the function name); else ``other``. A class range
  that holds a whole iteration range wraps it (SGLang's ``run_batch`` around the forward): it
  is no gap work and is left out. The parts sum to ``host_gap_ns`` exactly.
- ``busy_ns``: the device's busy union from the iteration's first GPU start to its last end.

With ``C`` a class union and ``B`` the busy union, idle covered by ``C`` inside ``[a, b)`` is
``|(C ∪ B) ∩ [a,b)| - |B ∩ [a,b)|``: cumulative coverage at ``a`` and ``b``, no loop over gaps.
"""

from __future__ import annotations

import numpy as np
import polars as pl

from traceforensics.analysis.context import AnalysisContext
from traceforensics.analysis.intervals import cumulative, union
from traceforensics.analysis.serving.engines import FUNC_NAME, GAP_CLASSES
from traceforensics.analysis.serving.iterations import host_ranges
from traceforensics.model.units import I64


def _covered(s: I64, e: I64, a: I64, b: I64) -> I64:
    """ns of the sorted disjoint ``[s, e)`` inside each ``[a, b)``."""
    return cumulative(s, e, b) - cumulative(s, e, a)


def _class_unions(
    ctx: AnalysisContext, rank: int, pid: int, its: pl.DataFrame
) -> list[tuple[I64, I64]]:
    """The nested unions of the process's gap-class ranges: sampling, + detokenisation, +
    scheduler; ranges that hold a whole iteration of ``its`` (the process's) left out."""
    rows = host_ranges(ctx).filter((pl.col("rank") == rank) & (pl.col("pid") == pid))
    rows = rows.select(FUNC_NAME.alias("fn"), "start_ns", "end_ns").sort("start_ns")
    # the first iteration starting at or after each range's start: inside it -> a wrapper
    starts = its.select(pl.col("start_ns").alias("it_start"), pl.col("end_ns").alias("it_end"))
    rows = rows.join_asof(
        starts.sort("it_start"), left_on="start_ns", right_on="it_start", strategy="forward"
    ).filter(pl.col("it_end").is_null() | (pl.col("it_end") > pl.col("end_ns")))
    out: list[tuple[I64, I64]] = []
    s_all, e_all = np.zeros(0, np.int64), np.zeros(0, np.int64)
    for _, pattern in GAP_CLASSES:
        hit = rows.filter(pl.col("fn").str.contains(pattern))
        s_all = np.concatenate((s_all, hit.get_column("start_ns").to_numpy().astype(np.int64)))
        e_all = np.concatenate((e_all, hit.get_column("end_ns").to_numpy().astype(np.int64)))
        out.append(union(s_all, e_all) if s_all.size else (s_all, e_all))
    return out


def add_gaps(ctx: AnalysisContext, its: pl.DataFrame) -> pl.DataFrame:
    """``its`` (``iterations.iteration_table``) with ``busy_ns``, ``gap_start_ns``,
    ``gap_end_ns``, ``queued_ahead``, ``host_gap_ns`` and one ``gap_<class>`` column per class
    (rules in the module docstring)."""
    names = [c for c, _ in GAP_CLASSES] + ["other"]
    parts: list[pl.DataFrame] = []
    for (rank, pid, device), grp in its.sort("start_ns").group_by(
        ["rank", "pid", "device"], maintain_order=True
    ):
        n = grp.height
        key = (int(rank), int(device))
        g = ctx.devices.index(key) if key in ctx.devices else -1
        bs, be = ctx.busy.of(g) if g >= 0 else (np.zeros(0, np.int64), np.zeros(0, np.int64))
        has = grp.get_column("gpu_start_ns").is_not_null().to_numpy()
        gs = grp.get_column("gpu_start_ns").fill_null(0).to_numpy().astype(np.int64)
        ge = grp.get_column("gpu_end_ns").fill_null(0).to_numpy().astype(np.int64)
        # a: the latest GPU end of the earlier iterations (-1: none yet)
        run = np.maximum.accumulate(np.where(has, ge, -1)) if n else ge
        a = np.concatenate(([-1], run[:-1])).astype(np.int64)
        has &= a >= 0
        queued = has & (gs <= a)
        untraced = grp.get_column("untraced_graph_ns").fill_null(np.iinfo(np.int64).max)
        end = np.minimum(gs, untraced.to_numpy().astype(np.int64))
        a = np.where(has, a, gs)
        b = np.where(has & (end > a), end, a)
        busy = np.where(ge > gs, _covered(bs, be, gs, np.maximum(ge, gs)), 0)
        gap = (b - a) - _covered(bs, be, a, b)
        cols: dict[str, I64] = {}
        before = np.zeros(n, np.int64)
        for name, (us, ue) in zip(
            names, _class_unions(ctx, int(rank), int(pid), grp), strict=False
        ):
            ms, me = union(np.concatenate((us, bs)), np.concatenate((ue, be)))
            idle_in = _covered(ms, me, a, b) - _covered(bs, be, a, b)
            cols[f"gap_{name}"] = idle_in - before
            before = idle_in
        cols["gap_other"] = gap - before
        parts.append(
            grp.with_columns(
                pl.Series("busy_ns", busy, dtype=pl.Int64),
                pl.Series("gap_start_ns", a, dtype=pl.Int64),
                pl.Series("gap_end_ns", b, dtype=pl.Int64),
                pl.Series("queued_ahead", queued, dtype=pl.Boolean),
                pl.Series("host_gap_ns", gap, dtype=pl.Int64),
                *(pl.Series(k, v, dtype=pl.Int64) for k, v in cols.items()),
            )
        )
    if not parts:
        extra = ("busy_ns", "gap_start_ns", "gap_end_ns", "host_gap_ns")
        zero = [pl.lit(0, dtype=pl.Int64).alias(k) for k in (*extra, *(f"gap_{c}" for c in names))]
        return its.with_columns(*zero, pl.lit(False).alias("queued_ahead"))
    return pl.concat(parts).sort("rank", "start_ns")


__all__ = ["add_gaps"]
