"""The work size of each step, read from the trace (``work_size``'s sources, in its order).

Per step of one device (windows ``[lo, hi)``, ns), the first source giving a value in a kept
step decides the unit (``work_size`` documents the rule; this module reads it):

1. ``tokens``: ``aten::embedding``'s index input (``Input Dims[1]``) element count, lookups
   into one table (same weight dims) summed per step, the largest table's sum.
2. the batch copied to the device: the innermost ``aten::to`` / ``aten::_to_copy`` /
   ``aten::copy_`` among the launching op of a host-to-device memcpy and the two ops above
   it, first input (``copied``: the loader's side, which may run a step ahead).
3. failing copies, the step's first operator with a tensor input of rank >= 2 that launches
   work on the device: that input (the first of rank >= 2, so an ``addmm``'s bias ``[N]``
   is skipped for its input ``[B, N]``).
4. ``h2d_bytes``: bytes copied host-to-device in the step (``copied``); a step without a copy
   has no value (null), not 0.

Sources 2 and 3 read one tensor per step (``batch``): an integer tensor of rank 2
(``Input type``; without types, a copy of 8 bytes per element: int64 ids) gives ``tokens``
(its element count, the step's largest); otherwise the step's largest tensor of rank >= 2
(failing that of rank 1) gives ``samples`` (its leading dim) when its trailing dims are the
same in every kept step, else ``elements`` (its element count: ``[8, T, 80]`` with T varying
is no fixed batch). Shapes are parsed once per distinct arg text, not once per event.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from dataclasses import dataclass
from functools import cached_property
from typing import Any, Final

import numpy as np
import orjson
import polars as pl

from traceforensics.analysis.busy import COMMUNICATION, KERNEL, MEMSET
from traceforensics.analysis.context import AnalysisContext
from traceforensics.analysis.intervals import cumulative, union
from traceforensics.model.schema import ARG_INPUT_DIMS, ARG_INPUT_TYPE
from traceforensics.model.units import I64, Mask

#: Embedding lookups (index input: ``Input Dims[1]``) and the copy ops of the batch.
EMBEDDING_OPS: Final = ("aten::embedding",)
COPY_OPS: Final = ("aten::to", "aten::_to_copy", "aten::copy_")
#: Without types, a copy moving this many bytes per element is read as int64 ids.
ID_ITEMSIZE: Final = 8
_SHAPE_COLS: Final = {
    "event_id": pl.Int64,
    "thr": pl.Int64,
    "start_ns": pl.Int64,
    "end_ns": pl.Int64,
    "name": pl.String,
    "ndim0": pl.Int64,
    "numel0": pl.Int64,
    "lead0": pl.Int64,
    "dims0": pl.String,
    "tail0": pl.String,
    "int0": pl.Boolean,
    "numel1": pl.Int64,
    "dims1": pl.String,
}
_DIMS_KEYS: Final = ("pos0", "ndim0", "numel0", "lead0", "dims0", "tail0", "numel1", "dims1")


@dataclass(frozen=True)
class StepSizes:
    """One device's work per step (aligned with its steps; None: unknown), the batch dims
    text per step, and whether the values come from the batch's copies (``copied``)."""

    unit: str | None
    values: list[int | None]
    shapes: list[str | None]
    copied: bool = False


class OpShapes:
    """The shapes of the session's host operators (``op_shapes``), read once per
    ``step_work`` call: ``named`` (embedding lookups and copies: first input) first;
    ``every`` operator (first input of rank >= 2) only when a device needs the
    first-operator source (300k operators at 1M events). ``int_types``: the ``Input type``
    texts of integer tensors (token ids)."""

    def __init__(self, ctx: AnalysisContext, int_types: tuple[str, ...]) -> None:
        self.ctx, self.int_types = ctx, int_types

    @cached_property
    def named(self) -> pl.DataFrame:
        return op_shapes(self.ctx, self.int_types, (*EMBEDDING_OPS, *COPY_OPS))

    @cached_property
    def every(self) -> pl.DataFrame:
        return op_shapes(self.ctx, self.int_types, None, matrix=True)


def op_shapes(
    ctx: AnalysisContext,
    int_types: tuple[str, ...],
    names: tuple[str, ...] | None = None,
    *,
    matrix: bool = False,
) -> pl.DataFrame:
    """Host operators named ``names`` (None: every ``ns::op``) with ``Input Dims``: thread,
    span and, of their batch input (the first; with ``matrix`` the first of rank >= 2), the
    rank, element count, leading dim, dims text, trailing dims text and whether it is integer
    (null without ``Input type``), and the second input's count and dims."""
    h = ctx.host.frame
    if h.height == 0 or ctx.args.height == 0:
        return pl.DataFrame(schema=_SHAPE_COLS)
    name = pl.col("name").cast(pl.String)
    ops = h.filter(
        (pl.col("kind") == "cpu_op")
        & (name.is_in(names) if names is not None else name.str.contains("::"))
    ).select("event_id", "thr", "start_ns", "end_ns", name)
    # the args of these operators only (the side table holds ~1 row per event)
    args = ops.select("event_id").join(ctx.args, on="event_id")
    key, val = pl.col("key").cast(pl.String), pl.col("value").cast(pl.String)
    dims = args.filter(key == ARG_INPUT_DIMS).select("event_id", val.alias("d"))
    types = args.filter(key == ARG_INPUT_TYPE).select("event_id", val.alias("t"))
    ops = ops.join(dims, on="event_id").join(types, on="event_id", how="left")
    d_rows = [{"d": t, **_dims_row(t, matrix)} for t in ops.get_column("d").unique()]
    d_schema: dict[str, Any] = {"d": pl.String, "pos0": pl.Int64}
    d_schema |= {k: _SHAPE_COLS[k] for k in _DIMS_KEYS[1:]}
    t_texts = ops.get_column("t").drop_nulls().unique()
    t_rows = [{"t": t, "ints": _type_row(t, int_types)} for t in t_texts]
    t_schema: dict[str, Any] = {"t": pl.String, "ints": pl.List(pl.Boolean)}
    return (
        ops.join(pl.DataFrame(d_rows, schema=d_schema), on="d", how="left")
        .join(pl.DataFrame(t_rows, schema=t_schema), on="t", how="left")
        .filter(pl.col("ndim0").is_not_null())
        .with_columns(int0=pl.col("ints").list.get(pl.col("pos0"), null_on_oob=True))
        .select(list(_SHAPE_COLS))
        .cast(_SHAPE_COLS)  # type: ignore[arg-type]
    )


def _tensor(v: Any) -> list[int] | None:
    """A tensor's dims from one ``Input Dims`` entry (None: not a plain tensor shape)."""
    if isinstance(v, list) and all(isinstance(x, int) for x in v):
        return [int(x) for x in v]
    return None


def _loads(text: str) -> list[Any]:
    """An arg's JSON list ([] when it is not one)."""
    try:
        parsed = orjson.loads(text)
    except orjson.JSONDecodeError:
        return []
    return parsed if isinstance(parsed, list) else []


def _dims_row(text: str, matrix: bool) -> dict[str, Any]:
    got = [_tensor(v) for v in _loads(text)]
    if matrix:  # the first input of rank >= 2 (a bias [N] or a scalar is no batch)
        pos = next((i for i, t in enumerate(got) if t is not None and len(t) >= 2), None)
    else:
        pos = 0 if got and got[0] else None  # a scalar ([]) is no batch
    t0 = got[pos] if pos is not None else None
    t1 = (got[1:2] or [None])[0] or None
    return {
        "pos0": pos,
        "ndim0": len(t0) if t0 else None,
        "numel0": int(np.prod(t0)) if t0 else None,
        "lead0": t0[0] if t0 else None,
        "dims0": " x ".join(map(str, t0)) if t0 else None,
        "tail0": " x ".join(map(str, t0[1:])) if t0 else None,
        "numel1": int(np.prod(t1)) if t1 else None,
        "dims1": " x ".join(map(str, t1)) if t1 else None,
    }


def _type_row(text: str, int_types: tuple[str, ...]) -> list[bool | None]:
    """Per input: integer or not (None: no type text)."""
    return [t in int_types if isinstance(t, str) and t else None for t in _loads(text)]


def step_sizes(
    ctx: AnalysisContext, g: int, lo: I64, hi: I64, kept: Mask, shapes: OpShapes
) -> StepSizes:
    """The work per step of device ``g`` (steps ``[lo, hi)``, in the caller's order) from
    the first source giving a value in a kept step (module docstring)."""
    a, b = int(ctx.dev_lo[g]), int(ctx.dev_hi[g])
    gstep = step_of(ctx.ops.start[a:b], lo, hi)
    work = (
        ctx.work.slice(a, b - a)
        .select("copy_kind", "bytes", "op_id")
        .with_columns(pl.Series("step", gstep))
    )
    h2d = work.filter((pl.col("copy_kind") == "h2d") & (pl.col("step") >= 0))

    def launched(ops: pl.DataFrame) -> pl.DataFrame:
        got = ops.with_columns(pl.Series("step", _launched_step(ctx, a, b, gstep, ops)))
        return got.filter(pl.col("step") >= 0)

    keep = pl.Series(np.flatnonzero(kept).astype(np.int64))
    for unit, rows, copied in _sources(ctx, launched, shapes, h2d, keep):
        if rows.filter(pl.col("step").is_in(keep.implode())).height:
            got = {int(k): (int(v), sh) for k, v, sh in rows.select("step", "v", "sh").iter_rows()}
            vals = [got[k][0] if k in got else None for k in range(lo.size)]
            dims = [got[k][1] if k in got else None for k in range(lo.size)]
            return StepSizes(unit, vals, dims, copied)
    return StepSizes(None, [None] * lo.size, [None] * lo.size)


def _sources(
    ctx: AnalysisContext,
    launched: Callable[[pl.DataFrame], pl.DataFrame],
    shapes: OpShapes,
    h2d: pl.DataFrame,
    keep: pl.Series,
) -> Iterator[tuple[str, pl.DataFrame, bool]]:
    """Each source's (unit, ``step, v, sh`` rows: one per step, copied), in the order they
    are tried, each computed only when the ones before gave way; ``launched`` adds each
    operator's step and drops those that launched nothing on the device."""
    ops = launched(shapes.named)
    lookups = (
        ops.filter(pl.col("name").is_in(EMBEDDING_OPS) & pl.col("numel1").is_not_null())
        .group_by("step", "dims0")  # lookups into one table add up within a step
        .agg(pl.col("numel1").sum().alias("v"), pl.col("dims1").first().alias("sh"))
    )
    yield "tokens", _first_by(lookups, "v").select("step", "v", "sh"), False
    # the copy op of each h2d memcpy: the innermost copy op among its launching op and the
    # two ops above it (aten::to > aten::_to_copy > aten::copy_ > cudaMemcpyAsync)
    parent = ctx.tree.select("event_id", "parent_id")
    lv = h2d.with_row_index("row").select("row", "step", "bytes", pl.col("op_id").alias("id0"))
    for i in (1, 2):
        lv = lv.join(parent, left_on=f"id{i - 1}", right_on="event_id", how="left").rename(
            {"parent_id": f"id{i}"}
        )
    copies = ops.filter(pl.col("name").is_in(COPY_OPS)).drop("step")
    cand = lv.unpivot(["id0", "id1", "id2"], index=["row", "step", "bytes"], value_name="id")
    batch = (
        cand.join(copies, left_on="id", right_on="event_id")
        .sort("row", "variable")
        .unique("row", keep="first")
        .with_columns(pl.coalesce("int0", pl.col("bytes") == pl.col("numel0") * ID_ITEMSIZE))
    )
    yield (*_batch(batch, keep), True)
    first = (
        launched(shapes.every)
        .filter(~pl.col("name").is_in(COPY_OPS))
        .sort("step", "start_ns", "event_id")
        .unique("step", keep="first")
    )
    yield (*_batch(first, keep), False)
    # a step without a copy of known size has no value (null: unknown), not 0 bytes
    bytes_ = h2d.drop_nulls("bytes").group_by("step").agg(pl.col("bytes").sum().alias("v"))
    yield "h2d_bytes", bytes_.filter(pl.col("v") > 0).with_columns(sh=pl.lit(None, pl.String)), True


def _first_by(rows: pl.DataFrame, *by: str) -> pl.DataFrame:
    """Per step, the row first by ``by`` descending."""
    return rows.sort(["step", *by], descending=[False, *[True] * len(by)]).unique(
        "step", keep="first"
    )


def _batch(rows: pl.DataFrame, keep: pl.Series) -> tuple[str, pl.DataFrame]:
    """One tensor per step (module docstring): ``tokens`` when any row is an integer tensor
    of rank 2, else ``samples`` or, when the trailing dims differ between kept steps,
    ``elements``."""
    tok = (pl.col("ndim0") == 2) & pl.col("int0").fill_null(False)
    ids = rows.filter(tok)
    if ids.height:
        return "tokens", _first_by(ids, "numel0").select("step", v="numel0", sh="dims0")
    best = _first_by(rows.with_columns(multi=pl.col("ndim0") >= 2), "multi", "numel0")
    tails = best.filter(pl.col("step").is_in(keep.implode())).get_column("tail0").n_unique()
    unit, v = ("elements", "numel0") if tails > 1 else ("samples", "lead0")
    return unit, best.select("step", v=v, sh="dims0")


def exposed_copy_ns(ctx: AnalysisContext, g: int, lo: I64, hi: I64) -> tuple[I64, bool]:
    """Per step window ``[lo, hi)`` of device ``g``: ns of host-to-device copy time (the
    union of its h2d memcpy rows) that no other GPU work (kernels, communication, memsets)
    overlaps, i.e. ``|copies ∪ others| - |others|`` in the window; and whether any of its
    h2d copies reads pageable host memory."""
    a, b = int(ctx.dev_lo[g]), int(ctx.dev_hi[g])
    w = ctx.work.slice(a, b - a).select(
        (pl.col("copy_kind") == "h2d").fill_null(False).alias("h2d"),
        (pl.col("src_mem") == "pageable").fill_null(False).alias("pageable"),
    )
    m = w.get_column("h2d").to_numpy()
    pageable = bool((m & w.get_column("pageable").to_numpy()).any())
    if not m.any():
        return np.zeros(lo.size, dtype=np.int64), pageable
    cs, ce = union(ctx.ops.start[a:b][m], ctx.ops.end[a:b][m])
    parts = [ctx.busy.kind(g, c) for c in (KERNEL, COMMUNICATION, MEMSET)]
    os_, oe = union(np.concatenate([p[0] for p in parts]), np.concatenate([p[1] for p in parts]))
    us, ue = union(np.concatenate([cs, os_]), np.concatenate([ce, oe]))

    def inside(s: I64, e: I64) -> I64:
        return cumulative(s, e, hi) - cumulative(s, e, lo)

    out: I64 = inside(us, ue) - inside(os_, oe)
    return out, pageable


def step_of(start: I64, lo: I64, hi: I64) -> I64:
    """Index (into ``lo``/``hi``) of the step window holding each start; -1 for none. Windows
    may come in any order; overlapping ones give the later-starting window."""
    order = np.argsort(lo, kind="stable")
    s_lo, s_hi = lo[order], hi[order]
    k = np.searchsorted(s_lo, start, side="right") - 1
    kc = np.maximum(k, 0)
    inside = (k >= 0) & (start < s_hi[kc]) if s_lo.size else np.zeros(start.size, dtype=bool)
    out: I64 = np.where(inside, order[kc] if s_lo.size else -1, -1).astype(np.int64)
    return out


def _launched_step(ctx: AnalysisContext, a: int, b: int, gstep: I64, ops: pl.DataFrame) -> I64:
    """Per host op of ``ops``: the step of the first GPU op of rows ``[a, b)`` launched on its
    thread inside ``[start, end)`` (packed (thread, time) keys, one sort); -1 for none."""
    thr = ctx.ops.thr[a:b]
    has = thr >= 0
    out = np.full(ops.height, -1, dtype=np.int64)
    if not has.any() or ops.height == 0:
        return out
    sh, t0 = ctx.shift, ctx.t0_ns
    keys = (thr[has] << sh) | (ctx.ops.launch_start[a:b][has] - t0)
    order = np.argsort(keys, kind="stable")
    keys, steps = keys[order], gstep[has][order]
    o_thr = ops.get_column("thr").to_numpy().astype(np.int64)
    ks = (o_thr << sh) | (ops.get_column("start_ns").to_numpy().astype(np.int64) - t0)
    ke = (o_thr << sh) | (ops.get_column("end_ns").to_numpy().astype(np.int64) - t0)
    i = np.searchsorted(keys, ks, side="left")
    ic = np.minimum(i, keys.size - 1)
    hit = (i < keys.size) & (keys[ic] < ke)
    out[hit] = steps[ic[hit]]
    return out
