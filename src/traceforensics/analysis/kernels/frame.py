"""The kernel frame of the kernels pass: one row per kernel, in kernel (event) id order, read
from the context's linked GPU ops (``ctx.work``), and the op-tree walk its parts share.

Memory rules (a trace of millions of kernels; every Int64 column is 8 bytes a kernel):

- the kernel rows are found once as positions into ``ctx.work`` (``kernel_positions``) and each
  column a part needs is gathered from there in one step: no filtered copy of the wide GPU-op
  table, then a sorted copy of it;
- names stay categorical (4 bytes a kernel); columns that join a name or an op's figures are
  computed one column at a time, never by joining onto the whole frame;
- a column that is null for every kernel (no op with FLOPs, no optimizer) is built as a null
  column, which holds no memory until written.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from typing import Final

import polars as pl

from traceforensics.analysis.context import OP_DUR_NS, AnalysisContext
from traceforensics.analysis.engines import engine_for
from traceforensics.analysis.optree import ancestors_pick
from traceforensics.model.memory import nulls_as_constants, release_free_memory
from traceforensics.model.units import I64

#: ``kernel_links`` columns and the ``ctx.work`` expression each is read from (after the
#: gather, so a derived column is computed over kernels only).
LINK_COLUMNS: Final[dict[str, pl.Expr]] = {
    "kernel_id": pl.col("event_id"),
    "rank": pl.col("rank"),
    "device": pl.col("device"),
    "stream": pl.col("stream"),
    "start_ns": pl.col("start_ns"),
    "dur_ns": OP_DUR_NS,
    "kname": pl.col("name"),
    "api_id": pl.col("api_id"),
    "api_start_ns": pl.col("launch_start_ns"),
    "api_dur_ns": pl.col("launch_end_ns") - pl.col("launch_start_ns"),
    "op_id": pl.col("op_id"),
}
#: What the kernels pass keeps for every kernel (short kernels gather their launch columns).
PASS_COLUMNS: Final = ("rank", "device", "start_ns", "dur_ns", "kname", "op_id")
NO_LAUNCHING_OP: Final = "(no launching op)"


def kernel_positions(ctx: AnalysisContext) -> I64:
    """Rows of ``ctx.work`` that are kernels, in kernel (event) id order."""
    kernel = pl.col("kind") == "kernel"
    rows = ctx.work.select(
        pl.int_range(pl.len(), dtype=pl.Int64)
        .filter(kernel)
        .sort_by(pl.col("event_id").filter(kernel))
        .alias("row")
    )
    out: I64 = rows.get_column("row").to_numpy()
    return out


def kernel_links(
    ctx: AnalysisContext, pos: I64 | None = None, columns: Sequence[str] = tuple(LINK_COLUMNS)
) -> pl.DataFrame:
    """One row per kernel from the context's linked GPU ops, in kernel id order: ``kernel_id,
    rank, device, stream, start_ns, dur_ns, kname, api_id, api_start_ns, api_dur_ns, op_id``
    (``columns`` of them; ``pos``: ``kernel_positions(ctx)`` when already computed)."""
    pos = kernel_positions(ctx) if pos is None else pos
    return link_sources(ctx, pos, columns).select(LINK_COLUMNS[c].alias(c) for c in columns)


def link_sources(ctx: AnalysisContext, pos: I64, columns: Sequence[str]) -> pl.DataFrame:
    """The ``ctx.work`` columns that the link ``columns`` are read from, at ``pos``; a part
    that needs a derived column evaluates ``LINK_COLUMNS[name]`` on them where it is used."""
    sources = sorted({n for c in columns for n in LINK_COLUMNS[c].meta.root_names()})
    return ctx.work.select(pl.col(sources).gather(pos))


def kernel_frame(ctx: AnalysisContext, pos: I64) -> pl.DataFrame:
    """``PASS_COLUMNS`` of the kernels at ``pos``, with ``launching_op`` (the name of the op
    that launched the kernel, ``NO_LAUNCHING_OP`` when none) and ``norm_name``
    (``normalize_kernel_name`` of ``kname``, null when the kernel has no name), both
    categorical."""
    kl = nulls_as_constants(kernel_links(ctx, pos, PASS_COLUMNS))
    names = ctx.tree.select(pl.col("event_id").alias("op_id"), pl.col("name").alias("launching_op"))
    launching = lookup(kl.get_column("op_id"), names).fill_null(NO_LAUNCHING_OP)
    uniq = kl.get_column("kname").unique().drop_nulls()
    mapping = pl.DataFrame(
        {
            "kname": uniq,
            "norm_name": pl.Series(
                [normalize_kernel_name(n) for n in uniq.cast(pl.String).to_list()],
                dtype=pl.String,
            ).cast(pl.Categorical),
        }
    )
    return kl.hstack([launching, lookup(kl.get_column("kname"), mapping)])


def lookup(keys: pl.Series, table: pl.DataFrame) -> pl.Series:
    """For each of ``keys`` (in order) the second column of ``table`` on the row whose first
    column equals it; null when none (or the key is null). A left join run by the streaming
    engine: only the keys and the looked-up column are held (an in-memory join also builds
    and keeps a hash table of the whole of ``table``)."""
    key, value = table.columns
    return (
        keys.alias(key)
        .to_frame()
        .lazy()
        .join(table.lazy(), on=key, how="left", maintain_order="left")
        .collect(engine=engine_for(keys.len()))
        .get_column(value)
    )


def normalize_kernel_name(name: str) -> str:
    """Drop the ``void`` return type, the parameter list and anonymous namespaces."""
    s = re.sub(r"^void\s+", "", name.strip())
    if s.endswith(")"):
        depth = 0
        for i in range(len(s) - 1, -1, -1):
            depth += s[i] == ")"
            depth -= s[i] == "("
            if depth == 0:
                s = s[:i].rstrip() or s
                break
    s = re.sub(r"\s+", " ", s.replace("(anonymous namespace)::", ""))
    return s if len(s) <= 200 else s[:199] + "…"


def outermost_flagged(
    ctx: AnalysisContext, op_ids: pl.Series, flag_ids: pl.Series, name: str
) -> pl.Series:
    """Int64 ``name``: for each op id (nullable) its outermost ancestor-or-self in
    ``flag_ids`` (``optree.ancestors_pick``); null when none. No flagged op: a null column,
    without walking the tree."""
    if flag_ids.len() == 0:
        return pl.Series(name, dtype=pl.Int64).extend_constant(None, op_ids.len())
    picked = pl.Series(name, ancestors_pick(ctx.tree_index, op_ids, flag_ids))
    release_free_memory()  # the walk's numpy arrays (glibc heap), garbage now
    return picked.replace(-1, None).cast(pl.Int64)
