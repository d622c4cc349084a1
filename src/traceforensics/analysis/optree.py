"""The host op tree: each host range's parent is the innermost range on its thread still open
at its start, and walks up that tree.

::

    thread:  [aten::linear..........................]
                [aten::addmm..................]
                   [cudaLaunchKernel]            <- launch call, parent = aten::addmm

Only ``cpu_op``/``annotation`` ranges can parent; ``cuda_api`` calls are leaves. Found columnar
(binary lifting, numpy), with a per-thread Python sweep only for threads whose ranges overlap
without nesting (there the sweep's stack order decides). No per-event Python objects on the
common path.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

import numpy as np
import polars as pl

from traceforensics.analysis.intervals import sorted_unique
from traceforensics.model.units import I64, Mask

#: Host kinds that can enclose (parent) other host rows.
HOST_RANGE_KINDS = ("cpu_op", "annotation")
#: Parent-pointer walks stop after this many levels (real stacks are < 50 deep).
MAX_TREE_DEPTH = 256


def host_tree(host: pl.DataFrame) -> pl.DataFrame:
    """Host ranges (cpu_op, annotation) and cuda_api calls of the prepared host table (columns
    ``event_id, kind, name, thr, start_ns, end_ns``, sorted by (thr, start, -end, event id);
    ``thr`` numbers the (rank, pid, tid) threads, which it stands for: 20 bytes per row less
    than keeping them), in that order, with ``parent_id`` (null at top level); kind and name
    keep the event table's enum and categorical types (a tree of 1.4M ranges holds ~85 MB less
    than with strings)."""
    rows = host.filter(pl.col("kind").is_in([*HOST_RANGE_KINDS, "cuda_api"])).select(
        "event_id", "kind", "name", "thr", "start_ns", "end_ns"
    )
    if rows.height == 0:
        return rows.with_columns(pl.lit(None, dtype=pl.Int64).alias("parent_id"))
    parent = _parents(
        rows.get_column("thr").to_numpy().astype(np.int64),
        rows.get_column("start_ns").to_numpy(),
        rows.get_column("end_ns").to_numpy(),
        (rows.get_column("kind") != "cuda_api").to_numpy(),
        rows.get_column("event_id").to_numpy(),
    )
    return rows.with_columns(
        pl.when(pl.Series(parent) >= 0).then(pl.Series(parent)).otherwise(None).alias("parent_id")
    )


def _parents(group: I64, start: I64, end: I64, can_parent: Mask, ids: I64) -> I64:
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
    over a sparse table of range maxima (``_nearest_open``). Proper nesting is then checked
    (each range ends no later than its parent; a partial overlap always breaks this on some
    range of the chain); groups that fail it (overlapping, not nested, ranges) are redone with
    the sweep, whose stack order then decides."""
    n = len(ids)
    out = np.full(n, -1, dtype=np.int64)
    if n == 0:
        return out
    pos = _nearest_open(start, end, can_parent)
    j = pos - 1
    found = (j >= 0) & (group[np.maximum(j, 0)] == group)
    out = np.where(found, ids[np.maximum(j, 0)], -1)
    bad = can_parent & found & (end > end[np.maximum(j, 0)])
    if bad.any():
        for g in sorted_unique(group[bad]).tolist():
            # rows are sorted by group: each group is one contiguous slice
            sl = slice(
                int(np.searchsorted(group, g, "left")), int(np.searchsorted(group, g, "right"))
            )
            out[sl] = _parents_sweep(start[sl], end[sl], can_parent[sl], ids[sl])
    return out


#: Levels of the sparse table kept between recomputations (``_nearest_open``).
LEVEL_STRIDE = 4


def _nearest_open(start: I64, end: I64, can_parent: Mask) -> I64:
    """For each row k, one past the latest earlier can-parent row j with ``end_j > start_k``
    (0 when none), by binary lifting over a sparse table of range maxima: level l holds
    max(end over can-parent rows in [i, i + 2**l)); non-parents never match.

    Memory rule: ends are compared as int32 ranks among the distinct ends, and only every
    ``LEVEL_STRIDE``-th level is kept; the levels between are recomputed from the one below
    while descending. A full int64 table is log2(n) x 8 bytes per row (1.9 GB for 10M
    launch calls); this holds about log2(n) / 4 + 3 levels of 4 bytes."""
    n = len(start)
    ends = sorted_unique(end)
    # rank r of an end: end <= s  <=>  r < (number of distinct ends <= s)
    base = np.where(can_parent, np.searchsorted(ends, end), -1).astype(np.int32)
    s_rank = np.searchsorted(ends, start, side="right").astype(np.int32)
    del ends
    n_levels = n.bit_length()  # levels l with 2**l <= n
    kept = {0: base}
    prev = base
    for lvl in range(1, n_levels):
        half = 1 << (lvl - 1)
        prev = np.maximum(prev[:-half], prev[half:])
        if lvl % LEVEL_STRIDE == 0:
            kept[lvl] = prev
    del prev
    pos = np.arange(n, dtype=np.int64)  # exclusive right edge of the rows left to search
    for first in sorted(kept, reverse=True):
        block_levels = [kept.pop(first)]
        for lvl in range(first + 1, min(first + LEVEL_STRIDE, n_levels)):
            half = 1 << (lvl - 1)
            block_levels.append(np.maximum(block_levels[-1][:-half], block_levels[-1][half:]))
        for lvl in range(len(block_levels) - 1, -1, -1):
            table = block_levels.pop()
            lo = pos - (1 << (first + lvl))
            ok = lo >= 0
            block = table[np.minimum(np.where(ok, lo, 0), len(table) - 1)]
            pos = np.where(ok & (block < s_rank), lo, pos)
    return pos


def _parents_sweep(start: I64, end: I64, can_parent: Mask, ids: I64) -> I64:
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


@dataclass(frozen=True)
class TreeIndex:
    """The op tree as positions: ``ids`` sorted, ``parent[i]`` the position of ``ids[i]``'s
    parent (-1 at top level). Built once per context; walks are then plain indexing."""

    ids: I64
    parent: I64

    @classmethod
    def of(cls, tree: pl.DataFrame) -> TreeIndex:
        ids = tree.get_column("event_id").to_numpy().astype(np.int64)
        order = np.argsort(ids, kind="stable")
        ids = ids[order]
        parent_ids = tree.get_column("parent_id").fill_null(-1).to_numpy()[order]
        index = cls(ids, np.full(ids.size, -1, dtype=np.int64))
        return cls(ids, index.positions(parent_ids.astype(np.int64)))

    def positions(self, q: I64) -> I64:
        """Position of each event id in ``q`` (-1: not in the tree)."""
        q = np.asarray(q, dtype=np.int64)
        if self.ids.size == 0:
            return np.full(q.size, -1, dtype=np.int64)
        pos = np.minimum(np.searchsorted(self.ids, q), self.ids.size - 1)
        out: I64 = np.where((q >= 0) & (self.ids[pos] == q), pos, -1)
        return out

    def mask(self, flag_ids: Iterable[int] | pl.Series) -> Mask:
        """Tree positions whose id is in ``flag_ids``."""
        ids = flag_ids.to_numpy() if isinstance(flag_ids, pl.Series) else list(flag_ids)
        pos = self.positions(np.asarray(ids, dtype=np.int64))
        out = np.zeros(self.ids.size, dtype=bool)
        out[pos[pos >= 0]] = True
        return out


def ancestors_pick(
    index: TreeIndex, start_ids: pl.Series, flag_ids: Iterable[int] | pl.Series
) -> I64:
    """For each id in ``start_ids`` (nullable), the *outermost* ancestor-or-self whose id is in
    ``flag_ids``; -1 when none. Walks parent positions level by level (vectorised)."""
    flagged = index.mask(flag_ids)
    cur = index.positions(start_ids.fill_null(-1).to_numpy().astype(np.int64))
    best = np.full(cur.size, -1, dtype=np.int64)
    rows = np.flatnonzero(cur >= 0)
    pos = cur[rows]
    for _ in range(MAX_TREE_DEPTH):
        if rows.size == 0:
            break
        hit = flagged[pos]
        best[rows[hit]] = index.ids[pos[hit]]
        pos = index.parent[pos]
        live = pos >= 0
        rows, pos = rows[live], pos[live]
    return best
