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

import numpy as np
import polars as pl

from traceforensics.analysis.intervals import unique_inverse
from traceforensics.model.units import I64, Mask

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
    """``work`` (GPU ops with ``event_id, rank, pid, correlation, external_id``) with
    ``LINK_COLUMNS`` added, in its row order: the launch call's event id, pid, start/end (ns),
    name and thread index (its tid: ``HostClasses.thread_tid``), and the launching op's event id.

    ``calls``: the ``cuda_api`` rows with a correlation id (``event_id, rank, correlation, pid,
    start_ns, end_ns, name``); ``ext``: ``rank, external_id, ext_op`` (the lowest cpu_op
    event id per External id); ``tree``: the host op tree (``optree.host_tree``).

    Memory rule: the links are found as positions (sorted keys and ``searchsorted``) and the
    link columns gathered beside ``work``; joining ``work`` itself copied all its columns at
    every join (a 4.9 GB peak at 10M kernels + 10M launch calls)."""
    w_key, c_key = _pair_keys(work, calls)
    c_key, c_pid, c_pid_ok, c_id = _candidates(calls, c_key)
    w_pid, w_pid_ok = _ints(work.get_column("pid"))
    api, has_api = _pick(w_key, w_pid, w_pid_ok, c_key, c_pid, c_pid_ok, c_id)
    del w_key, c_key, c_pid, c_pid_ok, c_id
    at_call = _positions(calls.get_column("event_id"), api, has_api)
    parents = tree.filter(pl.col("kind") == "cuda_api")
    at_parent = _positions(parents.get_column("event_id"), api, has_api)
    of_parent = _gathered(parents.select("parent_id", pl.col("thr").alias("l_thr")), at_parent)
    op_id = of_parent.get_column("parent_id")
    # no launch call: the lowest cpu_op of the op's External id on its rank (old PyTorch traces)
    fallback = (
        work.select("rank", "external_id")
        .with_row_index("_row")
        .filter(pl.Series(~has_api) & pl.col("external_id").is_not_null())
        .join(ext, on=["rank", "external_id"], how="inner")
    )
    op_id = op_id.scatter(fallback.get_column("_row"), fallback.get_column("ext_op"))
    of_call = _gathered(
        calls.select(
            pl.col("event_id").alias("api_id"),
            pl.col("pid").fill_null(-1).alias("l_pid"),
            pl.col("start_ns").alias("launch_start_ns"),
            pl.col("end_ns").alias("launch_end_ns"),
            pl.col("name").alias("l_name"),  # categorical: codes, not 10M copies of a few names
        ),
        at_call,
    )
    return work.hstack(
        [*of_call.get_columns(), of_parent.get_column("l_thr"), op_id.alias("op_id")]
    )


def _ints(col: pl.Series) -> tuple[I64, Mask]:
    """``(values as int64 with 0 for null, is-known mask)``."""
    if not col.null_count():  # (the mask and the fill cost a pass each, for nothing)
        return col.cast(pl.Int64).to_numpy(), np.ones(col.len(), dtype=bool)
    ok: Mask = col.is_not_null().to_numpy()
    values: I64 = col.fill_null(0).cast(pl.Int64).to_numpy()
    return values, ok


def _candidates(calls: pl.DataFrame, key: I64) -> tuple[I64, I64, Mask, I64]:
    """``(key, pid, pid known, call id)`` of the candidates: one per (rank, correlation, pid)
    of ``calls`` (``key``: their ``_pair_keys``), its lowest call id, sorted by key. A sort of
    the calls, not a polars grouping of them (the 10M + 10M rows peak: 4.34-4.38 -> 4.25-4.29
    GB)."""
    pid, pid_ok = _ints(calls.get_column("pid"))
    ids = _ints(calls.get_column("event_id"))[0]
    order = np.lexsort((ids, pid, pid_ok, key))
    key, pid, pid_ok, ids = key[order], pid[order], pid_ok[order], ids[order]
    del order
    first = np.ones(key.size, dtype=bool)  # the first row of each (key, pid known, pid)
    first[1:] = (key[1:] != key[:-1]) | (pid_ok[1:] != pid_ok[:-1]) | (pid[1:] != pid[:-1])
    return key[first], pid[first], pid_ok[first], ids[first]


def _pair_keys(work: pl.DataFrame, calls: pl.DataFrame) -> tuple[I64, I64]:
    """int64 keys of the (rank, correlation) pairs of ``work`` and ``calls``: equal pairs,
    equal keys, in pair order; -1 where ``work`` has no correlation (``calls`` all have one).
    The correlation id sits beside the rank when both fit in 62 bits, else its position among
    the distinct ids does."""
    w_rank, c_rank = _ints(work.get_column("rank"))[0], _ints(calls.get_column("rank"))[0]
    w_corr, w_ok = _ints(work.get_column("correlation"))
    c_corr = _ints(calls.get_column("correlation"))[0]
    corr = np.concatenate([w_corr[w_ok], c_corr])
    if corr.size == 0:
        return np.full(w_corr.size, -1, dtype=np.int64), np.zeros(0, dtype=np.int64)
    r_lo = int(min(w_rank.min(initial=0), c_rank.min(initial=0)))
    r_bits = (int(max(w_rank.max(initial=0), c_rank.max(initial=0))) - r_lo + 1).bit_length()
    lo, span = int(corr.min()), int(corr.max()) - int(corr.min()) + 1
    if span.bit_length() + r_bits <= 62:
        code = corr - lo
    else:  # ids too wide to pack: their codes
        distinct, code = unique_inverse(corr)
        span = distinct.size
    w_code = np.zeros(w_corr.size, dtype=np.int64)
    w_code[w_ok] = code[: int(w_ok.sum())]
    bits = span.bit_length()
    w_key = np.where(w_ok, ((w_rank - r_lo) << bits) | w_code, -1)
    c_key = ((c_rank - r_lo) << bits) | code[int(w_ok.sum()) :]
    return w_key, c_key


def _pick(
    w_key: I64, w_pid: I64, w_pid_ok: Mask, c_key: I64, c_pid: I64, c_pid_ok: Mask, c_id: I64
) -> tuple[I64, Mask]:
    """Rule 1 per op: ``(call id, found)``: among the candidates of its key (one per pid: the
    lowest call id), the one with the lowest (priority, call id), priorities ``SAME_PID`` <
    ``UNKNOWN_PID`` < ``OTHER_PID``. Candidates of one key are contiguous in ``c_key`` order:
    the j-th of every op is looked at together, j = 0, 1, ... (as many rounds as pids share a
    correlation id)."""
    first = np.searchsorted(c_key, w_key, side="left")
    count = np.searchsorted(c_key, w_key, side="right") - first
    count[w_key < 0] = 0
    best_p = np.full(w_key.size, OTHER_PID + 1, dtype=np.int8)
    best = np.full(w_key.size, -1, dtype=np.int64)
    rows, j = np.flatnonzero(count > 0), 0
    while rows.size:
        c = first[rows] + j
        unknown = ~w_pid_ok[rows] | ~c_pid_ok[c]
        same = w_pid[rows] == c_pid[c]
        p = np.where(unknown, UNKNOWN_PID, np.where(same, SAME_PID, OTHER_PID)).astype(np.int8)
        cid = c_id[c]
        better = (p < best_p[rows]) | ((p == best_p[rows]) & (cid < best[rows]))
        best_p[rows[better]], best[rows[better]] = p[better], cid[better]
        j += 1
        rows = rows[count[rows] > j]
    found: Mask = best_p <= OTHER_PID
    return best, found


def _positions(ids: pl.Series, q: I64, known: Mask) -> I64:
    """Row of each id ``q`` in ``ids`` (unique event ids); -1 where it is absent or not
    ``known``."""
    values = ids.cast(pl.Int64).to_numpy()
    order = np.argsort(values, kind="stable")
    ordered = values[order]
    if ordered.size == 0:
        return np.full(q.size, -1, dtype=np.int64)
    i = np.minimum(np.searchsorted(ordered, q), ordered.size - 1)
    out: I64 = np.where(known & (ordered[i] == q), order[i], -1)
    return out


def _gathered(frame: pl.DataFrame, pos: I64) -> pl.DataFrame:
    """``frame``'s rows at ``pos``, every column null where ``pos < 0`` (dtypes kept): one
    gather of all the columns by a nullable index (a null index gathers null)."""
    if frame.height == 0:
        return frame.clear(pos.size)
    index = pl.Series(pos, dtype=pl.Int64)
    absent = pos < 0
    if absent.any():
        index = index.set(pl.Series(absent), None)
    return frame.select(pl.all().gather(index))
