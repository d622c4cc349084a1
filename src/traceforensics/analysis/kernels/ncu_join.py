"""Measured figures for the trace's kernels: an Nsight Compute report (``ingest.ncu``) joined
to the kernels of the analysed trace, by name and launch order.

Join rule:

- process: the report's launches of one (``Process ID``, ``Device``) only, the one with the
  most launches (ties: the first in ``ID`` order): ``ncu --target-processes all`` puts every
  process's launches in one ``ID`` order, and numbering them together would pair rank 1's
  launches with rank 0's. The others are counted (``launches_left_out``) and warned of;
- names: a report name that spells more than the bare function (template arguments, a
  namespace, an argument list: ``--print-kernel-base demangled``) is joined on its full name
  (``full_name``: no ``void``, no argument list, no spaces, ``(anonymous namespace)`` and
  ``<unnamed>`` alike), so kernels that share a function name but not its template arguments
  (ResNet's six ``vectorized_elementwise_kernel<...>``) stay apart; a bare name (ncu's default
  ``function`` base) on ``bound.base_name``. A base name some of whose report names are not
  spelled the same in the trace falls back to the base name for all its report launches;
- order: each (rank, device) of the trace is matched alone. On a device the launches of a key
  are numbered 0, 1, ... in start order (then event id); the report's launches of the key are
  numbered the same in ``ID`` order. Report launch k is device launch ``k + offset``: the
  offset (per device and key) is the one whose pairs agree on grid and block most often,
  kept at 0 unless another agrees strictly more often (``--launch-skip``, a trace that starts
  at another step); ties go to the smallest shift. Where the counts differ the pairs that
  fall inside both sides are kept, the rest stays unmatched;
- shapes: where both sides carry grid and block (ncu's ``Grid Size``/``Block Size``, the
  trace's ``grid``/``block``), a pair whose grid or block differ is dropped and counted in
  ``shape_mismatches`` (launch k is then not the same work);
- none of the report's base names on any device: ``NcuMismatchError`` (an ``InputError``).

Figures: the means over the matched launches of each trace kernel name (``ncu.kernels``,
the top ``options.kernels.top`` kernels by total time per device) and of each op row
(``ops[]``: kernels charged to the op as the FLOPs model charges them, the outermost op with
a FLOPs model; rows keyed on op, shapes, dtype, rank and device). Class:
``bound.bound_class(sm_pct, mem_pct or dram_pct)``. A kernel or op without a matched launch,
or whose measured class is ``unknown`` (the report lacks the SM or the memory figure), keeps
the roofline estimate, ``source = "estimate"`` (with the measured figures it has, if any).
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import replace
from typing import Final

import polars as pl

from traceforensics.analysis.context import AnalysisContext
from traceforensics.analysis.kernels.bound import balanced, base_name, bound_class, small_grid
from traceforensics.analysis.kernels.frame import kernel_links, outermost_flagged
from traceforensics.analysis.kernels.results import (
    KernelAnalysis,
    KernelBoundRow,
    NcuFigures,
    NcuJoin,
    OpRow,
)
from traceforensics.analysis.kernels.throughput import kernel_dtype, op_costs
from traceforensics.model.errors import InputError

#: Figures averaged over the matched launches (``ingest.ncu.NCU_SCHEMA``'s measured columns).
FIGURES: Final = (
    "duration_ns",
    "sm_pct",
    "mem_pct",
    "dram_pct",
    "achieved_occupancy_pct",
    "theoretical_occupancy_pct",
    "waves_per_sm",
)
#: Names of the report listed when nothing matches, and in ``unmatched_names``.
NAMES_SHOWN: Final = 10


class NcuMismatchError(InputError):
    """No kernel of the Nsight Compute report is in the trace; ``names``: the report's first
    base names. ``line(report, trace)`` is the one line naming both files."""

    def __init__(self, names: list[str]) -> None:
        self.names = names
        super().__init__(self.line("the Nsight Compute report", "the trace"))

    def line(self, report: str, trace: str) -> str:
        shown = ", ".join(self.names) or "(none)"
        return (
            f"{report}: no kernel of it is in {trace}: first names {shown}; profile the same "
            "program (ncu --csv, its -k/--launch-skip select a subset) or give its trace"
        )


def with_ncu(ctx: AnalysisContext, kernels: KernelAnalysis, ncu: pl.DataFrame) -> KernelAnalysis:
    """``kernels`` with the report's measured figures on its ops and top kernels (module
    docstring). Raises ``NcuMismatchError`` when no report kernel is in the trace."""
    trace = _trace_kernels(ctx)
    report, process, device = _one_process(ncu)
    report = report.with_columns(
        _base(report.get_column("kernel")).alias("base"),
        _full(report.get_column("kernel")).alias("full"),
    ).filter(pl.col("base").is_not_null() & (pl.col("base") != ""))
    names = report.get_column("base").unique(maintain_order=True)
    common = names.filter(names.is_in(trace.get_column("base").unique().implode()))
    if common.len() == 0:
        raise NcuMismatchError([str(n) for n in names.head(NAMES_SHOWN).to_list()])
    pairs, shifted = _pairs(trace, _keyed(report, trace))
    same = _same_shape(pairs)
    mismatches = int((~same).sum())
    pairs = pairs.filter(same)
    # the ops with a FLOPs model (Python over distinct shapes: once for both uses)
    costs = op_costs(ctx.cpu_ops, ctx.args, ctx.tree).filter(pl.col("flops").is_not_null())
    ops = _op_figures(ctx, costs, kernels.ops, pairs)
    top = _top_rows(ctx, costs, trace, pairs, ops)
    unmatched = names.filter(~names.is_in(common.implode())).head(NAMES_SHOWN).to_list()
    join = NcuJoin(
        launches=ncu.height,
        matched=pairs.select("ncu_id").n_unique() if pairs.height else 0,
        shape_mismatches=mismatches,
        kernels_covered=sum(r.source == "ncu" for r in top),
        unmatched_names=[str(n) for n in unmatched],
        kernels=top,
        process_id=process,
        report_device=device,
        launches_left_out=ncu.height - report.height,
        shifted=shifted,
    )
    return replace(kernels, ops=ops, ncu=join)


def _one_process(ncu: pl.DataFrame) -> tuple[pl.DataFrame, int | None, int | None]:
    """The report's launches of its busiest (process, device) and that pair (module
    docstring; null ids: one group)."""
    keys = [c for c in ("process_id", "device") if c in ncu.columns]
    if not keys or ncu.height == 0:
        return ncu, None, None
    groups = (
        ncu.group_by(keys, maintain_order=True)
        .agg(pl.len().alias("n"), pl.col("ncu_id").min().alias("first"))
        .sort(["n", "first"], descending=[True, False])
    )
    best = groups.row(0, named=True)
    if groups.height == 1:
        return ncu, best.get("process_id"), best.get("device")
    pick = pl.lit(True)
    for k in keys:
        pick = pick & pl.col(k).eq_missing(pl.lit(best[k], dtype=ncu.schema[k]))
    return ncu.filter(pick), best.get("process_id"), best.get("device")


def full_name(name: str) -> str:
    """A kernel's name as both ncu (``--print-kernel-base demangled``) and the tracers spell
    it: no leading ``void``, no argument list, no whitespace, ``(anonymous namespace)`` and
    ``<unnamed>`` both ``{anon}``; template arguments and namespaces kept."""
    text = name.replace("(anonymous namespace)", "{anon}").replace("<unnamed>", "{anon}")
    text = _SPACE.sub(" ", text.strip()).removeprefix("void ")
    depth = 0
    for i, c in enumerate(text):
        if c == "<":
            depth += 1
        elif c == ">":
            depth = max(depth - 1, 0)
        elif c == "(" and depth == 0:
            text = text[:i]
            break
    return text.replace(" ", "")


_SPACE: Final = re.compile(r"\s+")


def _base(names: pl.Series) -> pl.Series:
    """``base_name`` of each name, computed once per distinct name."""
    return _per_name(names, base_name)


def _full(names: pl.Series) -> pl.Series:
    """``full_name`` of each name, computed once per distinct name."""
    return _per_name(names, full_name)


def _per_name(names: pl.Series, rule: Callable[[str], str]) -> pl.Series:
    uniq = names.cast(pl.String).unique().drop_nulls().to_list()
    table = dict(zip(uniq, (rule(n) for n in uniq), strict=True))
    return names.cast(pl.String).replace_strict(table, default=None, return_dtype=pl.String)


def _keyed(report: pl.DataFrame, trace: pl.DataFrame) -> pl.DataFrame:
    """``report`` with ``by`` (``full`` or ``base``: the trace column its name joins on) and
    ``key`` (module docstring: full names where every report name of the base is spelled
    the same in the trace)."""
    fulls = trace.get_column("full").unique().implode()
    spelled = report.with_columns(
        ((pl.col("full") != pl.col("base")) & pl.col("full").is_in(fulls)).alias("_f"),
        (pl.col("full") == pl.col("base")).alias("_bare"),
    )
    by_full = spelled.group_by("base").agg((pl.col("_f").all() & ~pl.col("_bare").any()).alias("f"))
    out = spelled.join(by_full, on="base", how="left", maintain_order="left")
    return out.with_columns(
        pl.when("f").then(pl.lit("full")).otherwise(pl.lit("base")).alias("by"),
        pl.when("f").then("full").otherwise("base").alias("key"),
    ).drop("_f", "_bare", "f")


def _pairs(trace: pl.DataFrame, report: pl.DataFrame) -> tuple[pl.DataFrame, int]:
    """The (trace launch, report launch) pairs of every device and key, at each group's
    offset (module docstring), and how many groups were shifted."""
    out: list[pl.DataFrame] = []
    shifted = 0
    for by in ("base", "full"):
        rep = report.filter(pl.col("by") == by).drop(
            "kernel", "base", "full", "by", "process_id", "device", strict=False
        )
        if rep.height == 0:
            continue
        rep = _numbered(rep, ["key"], ["ncu_id"]).with_columns(_code("grid", "block"))
        tr = _numbered(
            trace.with_columns(pl.col(by).alias("key")),
            ["rank", "device", "key"],
            [
                "start_ns",
                "kernel_id",
            ],
        ).with_columns(_code("tgrid", "tblock"))
        offsets = _offsets(tr, rep)
        shifted += int((offsets.get_column("offset") != 0).sum())
        keys = ["rank", "device", "key"]
        moved = (
            rep.drop("code")
            .join(offsets, on="key")
            .with_columns((pl.col("k") + pl.col("offset")).alias("k"))
        )
        out.append(tr.drop("code").join(moved.drop("offset"), on=[*keys, "k"], how="inner"))
    return (pl.concat(out, how="vertical_relaxed") if out else _empty_pairs(trace)), shifted


def _empty_pairs(trace: pl.DataFrame) -> pl.DataFrame:
    return trace.head(0).with_columns(
        pl.lit(None, pl.Int64).alias("ncu_id"),
        pl.lit(None, pl.String).alias("grid"),
        pl.lit(None, pl.String).alias("block"),
    )


def _code(grid: str, block: str) -> pl.Expr:
    """A launch's shape as one text (ncu's thousands separators dropped), null unless both
    grid and block are known."""
    return pl.concat_str(_sizes(grid), _sizes(block), separator="|").alias("code")


def _sizes(col: str) -> pl.Expr:
    # ncu writes "(1,024, 1, 1)": ", " between the sizes, "," inside a number; the trace's
    # columns are already "1024, 1, 1"
    sizes = pl.col(col).str.strip_chars("() ").str.split(", ")
    return sizes.list.eval(pl.element().str.replace_all(",", "").str.strip_chars()).list.join(", ")


#: Pairs of launches with the same shape compared at most when the offsets are voted: the
#: shapes shared by the fewest launches (the ones that place a launch best) vote first.
VOTE_PAIRS_MAX: Final = 5_000_000


def _offsets(tr: pl.DataFrame, rep: pl.DataFrame) -> pl.DataFrame:
    """Per (rank, device, key) of the trace that the report holds: ``offset``, the shift
    whose pairs agree on grid and block most often (0 unless another agrees strictly more
    often; ties: the smallest shift, then the earlier)."""
    keys = ["rank", "device", "key"]
    groups = tr.select(keys).unique().join(rep.select("key").unique(), on="key")
    t = tr.filter(pl.col("code").is_not_null()).select(*keys, "code", pl.col("k").alias("tk"))
    r = rep.filter(pl.col("code").is_not_null()).select("key", "code", "k")
    if t.height == 0 or r.height == 0:
        return groups.with_columns(pl.lit(0, pl.Int64).alias("offset"))
    sizes = (
        t.group_by(*keys, "code")
        .len("nt")
        .join(r.group_by("key", "code").len("nr"), on=["key", "code"])
        .with_columns((pl.col("nt").cast(pl.Int64) * pl.col("nr")).alias("cost"))
        .sort("cost", *keys, "code")
        .filter(pl.col("cost").cum_sum() <= VOTE_PAIRS_MAX)
        .select(*keys, "code")
    )
    votes = (
        t.join(sizes, on=[*keys, "code"])
        .join(r, on=["key", "code"])
        .group_by(*keys, (pl.col("tk") - pl.col("k")).cast(pl.Int64).alias("offset"))
        .len("votes")
    )
    at_zero = votes.filter(pl.col("offset") == 0).select(*keys, pl.col("votes").alias("zero"))
    best = (
        votes.sort(["votes", pl.col("offset").abs(), "offset"], descending=[True, False, False])
        .group_by(keys, maintain_order=True)
        .first()
        .join(at_zero, on=keys, how="left")
        .filter(pl.col("votes") > pl.col("zero").fill_null(0))
        .select(*keys, "offset")
    )
    return groups.join(best, on=keys, how="left").with_columns(pl.col("offset").fill_null(0))


def _numbered(frame: pl.DataFrame, by: list[str], order: list[str]) -> pl.DataFrame:
    """``frame`` with ``k``: each row's number among the rows of its ``by`` group, in
    ``order`` (0 first)."""
    return frame.sort(order).with_columns(pl.int_range(pl.len()).over(by).alias("k"))


def _trace_kernels(ctx: AnalysisContext) -> pl.DataFrame:
    """The trace's kernels: ``kernel_id, rank, device, start_ns, dur_ns, kname, op_id, base,
    full`` and ``tgrid``/``tblock`` (text such as ``64, 1, 1``; null where not recorded)."""
    cols = ("kernel_id", "rank", "device", "start_ns", "dur_ns", "kname", "op_id")
    kl = kernel_links(ctx, None, cols).with_columns(pl.col("kname").cast(pl.String))
    kl = kl.with_columns(
        _base(kl.get_column("kname")).alias("base"), _full(kl.get_column("kname")).alias("full")
    )
    events = ctx.session.events.filter(pl.col("kind") == "kernel")
    for side in ("grid", "block"):
        text = pl.lit(None, dtype=pl.String)
        if side in events.columns:  # (``tf analyze`` keeps only the columns it reads)
            text = pl.col(side).cast(pl.List(pl.String)).list.join(", ")
        shapes = events.select(pl.col("event_id").alias("kernel_id"), text.alias("t" + side))
        kl = kl.join(shapes, on="kernel_id", how="left", maintain_order="left")
    return kl


def _same_shape(pairs: pl.DataFrame) -> pl.Series:
    """Per pair: False where both sides carry a grid (block) and they differ."""
    ok = pl.lit(True)
    for ours, theirs in (("tgrid", "grid"), ("tblock", "block")):
        t = _sizes(theirs)
        ok = ok & (pl.col(ours).is_null() | pl.col(theirs).is_null() | (pl.col(ours) == t))
    return pairs.select(ok.alias("same")).get_column("same")


def _figures(frame: pl.DataFrame, keys: list[str]) -> dict[tuple[object, ...], NcuFigures]:
    """Per ``keys`` group of matched ``frame`` rows, the mean figures (class included)."""
    if frame.height == 0:
        return {}
    agg = frame.group_by(keys).agg(
        pl.col("ncu_id").n_unique().alias("launches"), *(pl.col(f).mean() for f in FIGURES)
    )
    out: dict[tuple[object, ...], NcuFigures] = {}
    for row in agg.iter_rows(named=True):  # one row per kernel name or op: not per event
        mem = row["mem_pct"] if row["mem_pct"] is not None else row["dram_pct"]
        dur = row["duration_ns"]
        out[tuple(row[k] for k in keys)] = NcuFigures(
            launches=int(row["launches"]),
            duration_ns=None if dur is None else round(dur),
            sm_pct=row["sm_pct"],
            mem_pct=row["mem_pct"],
            dram_pct=row["dram_pct"],
            achieved_occupancy_pct=row["achieved_occupancy_pct"],
            theoretical_occupancy_pct=row["theoretical_occupancy_pct"],
            waves_per_sm=row["waves_per_sm"],
            bound=bound_class(row["sm_pct"], mem),
            balanced=balanced(row["sm_pct"], mem),
            small_grid=small_grid(row["waves_per_sm"]),
        )
    return out


def _charged(ctx: AnalysisContext, costs: pl.DataFrame, kern: pl.DataFrame) -> pl.DataFrame:
    """``kern`` with ``op``, ``shapes`` and ``dtype`` of the op its FLOPs are charged to (the
    outermost op of ``costs``, the ops with known FLOPs: ``throughput.charge_flops``'s rule;
    an op without a recorded dtype takes the one its kernel's name spells, as there); null
    where none."""
    picked = outermost_flagged(ctx, kern.get_column("op_id"), costs.get_column("op_id"), "fop")
    ops = costs.select(
        pl.col("op_id").alias("fop"), pl.col("op").cast(pl.String), "shapes", "dtype"
    )
    out = kern.with_columns(picked).join(ops, on="fop", how="left", maintain_order="left")
    spelled = kernel_dtype(pl.col("kname")).cast(pl.String)
    first = spelled.drop_nulls().first().over("fop")
    return out.with_columns(
        pl.when(pl.col("fop").is_null())
        .then(None)
        .otherwise(pl.coalesce(pl.col("dtype").cast(pl.String), first))
        .alias("dtype")
    )


def _op_figures(
    ctx: AnalysisContext, costs: pl.DataFrame, ops: list[OpRow], pairs: pl.DataFrame
) -> list[OpRow]:
    """``ops`` with ``ncu`` set where some of the op's kernels were measured (an op row is
    matched on op, shapes, dtype, rank and device) and ``source = "ncu"`` where the measured
    class is known."""
    if not ops or pairs.height == 0:
        return ops
    keys = ["op", "shapes", "dtype", "rank", "device"]
    measured = _figures(_charged(ctx, costs, pairs), keys)
    out: list[OpRow] = []
    for o in ops:
        got = measured.get((o.op, o.shapes, o.dtype, o.rank, o.device))
        # a measured class "unknown" (no SM or memory figure) is no class: the estimate stays
        source = "estimate" if got is None or got.bound == "unknown" else "ncu"
        out.append(o if got is None else replace(o, source=source, ncu=got))
    return out


def _top_rows(
    ctx: AnalysisContext,
    costs: pl.DataFrame,
    trace: pl.DataFrame,
    pairs: pl.DataFrame,
    ops: list[OpRow],
) -> list[KernelBoundRow]:
    """Each device's top kernels by total time, measured or with their op's estimate."""
    n = max(ctx.options.kernels.top, 1)
    top = (
        trace.group_by("rank", "device", "kname")
        .agg(pl.len().alias("count"), pl.col("dur_ns").sum().alias("total_ns"))
        .sort(["total_ns", "count", "kname"], descending=[True, True, False])
        .group_by("rank", "device", maintain_order=True)
        .head(n)
    )
    measured = _figures(pairs, ["rank", "device", "kname"])
    wanted = trace.join(top.select("rank", "device", "kname"), on=["rank", "device", "kname"])
    estimate = _estimates(ctx, costs, wanted, ops)
    out: list[KernelBoundRow] = []
    for r, d, name, count, total in top.iter_rows():
        got = measured.get((r, d, name))
        known = got is not None and got.bound != "unknown"
        out.append(
            KernelBoundRow(
                rank=int(r),
                device=int(d),
                name=str(name),
                count=int(count),
                total_ns=int(total),
                source="ncu" if known and got is not None else "estimate",
                bound=got.bound if known and got is not None else estimate.get((r, d, name)),
                ncu=got,
            )
        )
    return out


def _estimates(
    ctx: AnalysisContext, costs: pl.DataFrame, kern: pl.DataFrame, ops: list[OpRow]
) -> dict[tuple[object, ...], str]:
    """Per (rank, device, kernel name): the roofline ``bound`` of the op row that holds most
    of the name's kernel time (none without a FLOPs model)."""
    if kern.height == 0 or not ops:
        return {}
    bounds = pl.DataFrame(
        [(o.op, o.shapes, o.dtype, o.rank, o.device, o.bound) for o in ops if o.bound],
        schema={
            "op": pl.String,
            "shapes": pl.String,
            "dtype": pl.String,
            "rank": pl.Int32,
            "device": pl.Int32,
            "bound": pl.String,
        },
        orient="row",
    )
    keyed = _charged(ctx, costs, kern).cast({"rank": pl.Int32, "device": pl.Int32})
    rows = (
        keyed.join(
            bounds, on=["op", "shapes", "dtype", "rank", "device"], how="inner", nulls_equal=True
        )
        .group_by("rank", "device", "kname", "bound")
        .agg(pl.col("dur_ns").sum())
        .sort(["dur_ns", "bound"], descending=[True, False])
        .group_by("rank", "device", "kname", maintain_order=True)
        .first()
    )
    return {(r, d, k): str(b) for r, d, k, b, _ in rows.iter_rows()}
