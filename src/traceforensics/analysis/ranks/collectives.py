"""Collectives matched across ranks, and each one's time split into waiting and transfer.

Collective kernels are GPU kernels with ``is_comm`` (``model.comm``). Participants are devices
(``dev``: one per (rank, device)).

Kind (``model.comm.COMM_KINDS``), first found of: the launching op (the innermost of the op
that launched the kernel and its ``OP_DEPTH - 1`` enclosing ops whose name states a collective,
``model.comm.op_kind``: ``nccl:all_to_all``, ``c10d::alltoall_base_``, ``ncclAllReduce``...),
the kernel's ``Collective name`` arg, the kernel name (``model.comm.comm_kind``). The op comes
first because NCCL runs an all-to-all as ``SendRecv`` kernels (and older NCCL names other
collectives' kernels ``SendRecv`` too): the kernel name alone would call it point-to-point.

Matching rule: NCCL issues the collectives of one process group in the same order on every
member, so the k-th collective of a group on one participant is the k-th on every other. The
group is (process group, kind, kernel family): the ``Process Group Name`` arg when the trace
records it (Kineto), else one group per kind and family (``model.comm.CommPattern.family``:
NCCL, DeepEP, custom all-reduce... each keeps its own order). A group is matched when every
participant has it; the first ``min count`` are matched (a longer capture leaves its extra
ones unmatched). Point-to-point (kind ``send_recv``: a ``SendRecv`` kernel under ``c10d::send``
/ ``nccl:recv``, or with no op saying otherwise) involves two ranks, not all: never matched.
All-to-alls are collectives (every rank of the group takes part): matched.

Clock: ranks may be recorded on different clocks (hosts). A collective ends at nearly the same
instant on every participant (the last data arrives everywhere together), so a participant's
clock offset is the median, over its matched collectives, of its end minus that collective's
median end; starts are compared after removing it.

Split of one matched collective::

    rank 0  |===wait====|##transfer##|     launched first: waits for the last rank
    rank 1       |=wait=|##transfer##|
    rank 2              |##transfer##|     arrives last: no wait
                        ^ last start (offset-corrected); all end together

    wait = min(last start - own start, dur),  transfer = dur - wait     (ns)

A matched group whose ends disagree (median end spread over its collectives above
``MAX_END_SPREAD_SHARE`` of their median duration and ``MAX_END_SPREAD_NS``, after the clock
offsets) was not the same collectives on every rank: it is left unmatched, and the offsets are
found again from the groups that agree.

Unmatched collectives (one rank, point-to-point, a group some rank lacks, or a matching whose
ends disagree) get an estimate: transfer = the shortest duration of the same kernel name on the
same participant (the instance that waited least), wait = dur - transfer; flagged ``estimated``.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Final

import polars as pl

from traceforensics.analysis.context import OP_DUR_NS
from traceforensics.analysis.ranks.kinds import (
    comm_family_expr,
    comm_kind_expr,
    op_kind_expr,
    word_kind_expr,
)
from traceforensics.model.comm import POINT_TO_POINT

PG_ARG: Final = "Process Group Name"
#: PyTorch's collective name on ``record_param_comms`` and the kernel (``allreduce``...).
COLLECTIVE_ARG: Final = "Collective name"
#: Ops read for a kernel's kind: its launching op and the ops around it (``nccl:all_to_all`` >
#: ``record_param_comms`` > ``c10d::alltoall_base_``; with NCCL's NVTX ``ncclGroupEnd`` inside).
OP_DEPTH: Final = 4
#: A matching is unreliable when the median spread of the matched collectives' ends (after
#: the clock offsets) exceeds this share of their median duration and ``MAX_END_SPREAD_NS``.
MAX_END_SPREAD_SHARE: Final = 0.25
MAX_END_SPREAD_NS: Final = 50_000


@dataclass
class Collectives:
    """Every collective kernel with its split (``rows``), per-participant clock offsets (ns)
    and how the matching went."""

    rows: pl.DataFrame
    offsets_ns: dict[int, int] = field(default_factory=dict)
    method: str = "estimate"
    matched: int = 0
    notes: list[str] = field(default_factory=list)


def collective_kernels(
    work: pl.DataFrame,
    args: pl.DataFrame,
    devices: pl.DataFrame,
    tree: pl.DataFrame | None = None,
) -> pl.DataFrame:
    """Collective kernels of ``work`` (``AnalysisContext.work``) with ``dev`` (their device's
    index: ``devices``, ``AnalysisContext.device_table``), ``kind`` (``op``: the same),
    ``family``, ``pg``, ``group`` and ``k``: their order within (participant, group), by start.
    ``tree``: the host op tree (``AnalysisContext.tree``) the launching ops are read from;
    without it the kind comes from the kernel's arg and name only."""
    collective = (pl.col("kind") == "kernel") & pl.col("is_comm")
    none = not work.select(collective.any()).item()
    kern = (
        work.lazy()
        .filter(collective)
        .select("rank", "device", "event_id", "name", "start_ns", "end_ns", OP_DUR_NS, "op_id")
        .join(devices.lazy(), on=["rank", "device"], how="left")
    )
    if none:  # (no collective kernel: the args and ops are not even looked at)
        pg, named = _NO_GROUPS, _NO_NAMES
    else:
        pg = _arg(args, PG_ARG).rename({"value": "pg"})
        named = _arg(args, COLLECTIVE_ARG).select(
            "event_id", word_kind_expr(pl.col("value")).alias("arg_kind")
        )
    name = pl.col("name").cast(pl.String)
    kind = pl.coalesce("op_kind", "arg_kind", comm_kind_expr(name), pl.lit("custom"))
    query = (
        _with_op_kind(kern, None if none else tree)
        .join(pg.lazy(), on="event_id", how="left")
        .join(named.lazy(), on="event_id", how="left")
        .with_columns(
            kind.alias("kind"),
            comm_family_expr(name).fill_null("custom").alias("family"),
            pl.col("pg").fill_null(""),
        )
        .with_columns(
            pl.col("kind").alias("op"),
            pl.format("{}|{}|{}", "pg", "kind", "family").alias("group"),
        )
        .drop("op_id", "op_kind", "arg_kind")
        .sort("dev", "start_ns", "event_id")
        .with_columns(pl.int_range(pl.len()).over("dev", "group").alias("k"))
    )
    if none:  # (the query's columns, none of its steps run)
        return pl.DataFrame(schema=query.collect_schema())
    return query.collect(engine="in-memory")


def _arg(args: pl.DataFrame, key: str) -> pl.DataFrame:
    """``event_id, value`` (String, unquoted) of one args key, one row per event."""
    return (
        args.filter(pl.col("key") == key)
        .select("event_id", pl.col("value").cast(pl.String).str.strip_chars('"').alias("value"))
        .unique("event_id", keep="first")
    )


def _with_op_kind(kern: pl.LazyFrame, tree: pl.DataFrame | None) -> pl.LazyFrame:
    """``kern`` with ``op_kind``: the kind the innermost of its launching op and the
    ``OP_DEPTH - 1`` ops enclosing it states (null: none does, or no tree)."""
    if tree is None:
        return kern.with_columns(pl.lit(None, dtype=pl.String).alias("op_kind"))
    # names up the chain first, read for a kind after: the regexes run on a few names per
    # collective kernel, not on every op of the tree
    ops = tree.lazy().select("event_id", pl.col("parent_id").cast(pl.Int64), "name")
    out = kern.with_columns(pl.col("op_id").cast(pl.Int64).alias("_at"))
    found: list[str] = []
    for level in range(OP_DEPTH):  # one join per level up: collective kernels are few
        name = f"_name{level}"
        out = (
            out.join(
                ops.rename({"event_id": "_at", "parent_id": "_up", "name": name}),
                on="_at",
                how="left",
            )
            .with_columns(pl.col("_up").alias("_at"))
            .drop("_up")
        )
        found.append(name)
    said = [op_kind_expr(pl.col(n).cast(pl.String)) for n in found]
    return out.with_columns(pl.coalesce(said).alias("op_kind")).drop("_at", *found)


#: The process groups of no kernel (``collective_kernels`` of a trace without collectives).
_NO_GROUPS = pl.DataFrame(schema={"event_id": pl.Int64, "pg": pl.String})
_NO_NAMES = pl.DataFrame(schema={"event_id": pl.Int64, "arg_kind": pl.String})


def match_collectives(kern: pl.DataFrame) -> Collectives:
    """The split of every collective kernel (module docstring)."""
    if kern.height == 0:  # (nothing to match: each step below would still cost a query)
        rows = kern.with_columns(
            pl.lit(None, dtype=pl.UInt32).alias("upto"), pl.lit(False).alias("matched")
        )
        out = Collectives(rows=_split(rows, {}), method="estimate")
        out.notes.append(ONE_RANK_NOTE)
        return out
    devs = kern.get_column("dev").unique().sort().to_list()
    counts = kern.group_by("group", "dev").agg(pl.len().alias("n"), pl.col("kind").first())
    groups = counts.group_by("group").agg(
        pl.col("dev").n_unique().alias("devs"),
        pl.col("n").min().alias("upto"),
        pl.col("kind").first(),
    )
    matchable = groups.filter(
        (pl.col("devs") == len(devs)) & (len(devs) >= 2) & (pl.col("kind") != POINT_TO_POINT)
    ).select("group", "upto")
    kern = kern.join(matchable, on="group", how="left").with_columns(
        (pl.col("upto").is_not_null() & (pl.col("k") < pl.col("upto"))).alias("matched")
    )
    matched = kern.filter(pl.col("matched"))
    out = Collectives(rows=kern, method="estimate")
    if matched.height:
        offsets = _clock_offsets(matched)
        bad, note = _disagreeing(matched, offsets)
        if len(bad) < matched.get_column("group").n_unique():
            if bad:  # the groups that agree set the clocks
                out.notes.append(note)
                kern = kern.with_columns(pl.col("matched") & ~pl.col("group").is_in(bad))
                matched = kern.filter(pl.col("matched"))
                offsets = _clock_offsets(matched)
            out.offsets_ns = dict(zip(offsets["dev"], offsets["offset_ns"], strict=True))
            out.method = "process group order" if kern["pg"].ne("").any() else "order"
            out.matched = matched.select("group", "k").unique().height
        else:
            out.notes.append(note)
            kern = kern.with_columns(pl.lit(False).alias("matched"))
    out.rows = _split(kern, out.offsets_ns)
    if len(devs) >= 2 and out.matched == 0 and not out.notes and kern.height:
        out.notes.append(
            "no collective was recorded by every rank (point-to-point transfers, or groups "
            "the loaded ranks do not share): waits are estimated per rank"
        )
    if len(devs) < 2:
        out.notes.append(ONE_RANK_NOTE)
    return out


ONE_RANK_NOTE = (
    "one rank only: each collective's wait is estimated from the shortest instance of the same "
    "kernel (the one that waited least)"
)


def _clock_offsets(matched: pl.DataFrame) -> pl.DataFrame:
    """Per participant: the median of (its end - the collective's median end), ns."""
    ends = matched.with_columns(
        (pl.col("end_ns") - pl.col("end_ns").median().over("group", "k")).alias("d")
    )
    return (
        ends.group_by("dev")
        .agg(pl.col("d").median().round(0).cast(pl.Int64).alias("offset_ns"))
        .sort("dev")
    )


def _disagreeing(matched: pl.DataFrame, offsets: pl.DataFrame) -> tuple[list[str], str]:
    """The matched groups whose collectives do not end together once the offsets are removed
    (module docstring), and the note that says so."""
    aligned = matched.join(offsets, on="dev").with_columns(
        (pl.col("end_ns") - pl.col("offset_ns")).alias("e")
    )
    per = (
        aligned.group_by("group", "k")
        .agg((pl.col("e").max() - pl.col("e").min()).alias("spread"), pl.col("dur_ns").median())
        .group_by("group")
        .agg(pl.col("spread", "dur_ns").median())
        .with_columns(pl.col("spread", "dur_ns").cast(pl.Float64).fill_null(0.0))
        .sort("group")
    )
    bad = per.filter(
        (pl.col("spread") > MAX_END_SPREAD_NS)
        & (pl.col("spread") > MAX_END_SPREAD_SHARE * pl.col("dur_ns"))
    )
    if bad.height == 0:
        return [], ""
    groups = bad.get_column("group").to_list()
    if bad.height == per.height:
        spread, dur = (
            float(v or 0) for v in per.select(pl.col("spread", "dur_ns").median()).row(0)
        )
        return groups, (
            f"collectives matched by order end {spread / 1e3:.0f} µs apart (median) against "
            f"{dur / 1e3:.0f} µs durations: the ranks' captures do not hold the same "
            "collectives, so waits are estimated per rank"
        )
    kinds = sorted({g.split("|")[1] for g in groups})
    return groups, (
        f"{len(groups)} of {per.height} collective groups ({', '.join(kinds)}) matched by order "
        "do not end together on every rank: their waits are estimated per rank"
    )


def _split(kern: pl.DataFrame, offsets: dict[int, int]) -> pl.DataFrame:
    """``wait_ns``/``transfer_ns``/``last_dev``/``estimated`` of every collective kernel."""
    off = pl.col("dev").replace_strict(offsets, default=0, return_dtype=pl.Int64)
    kern = kern.with_columns((pl.col("start_ns") - off).alias("aligned_ns"))
    group = ("group", "k")
    last = pl.col("aligned_ns").max().over(group)
    last_dev = pl.col("dev").sort_by("aligned_ns", "dev", descending=[True, False]).first()
    matched_wait = pl.min_horizontal(
        pl.max_horizontal(last - pl.col("aligned_ns"), pl.lit(0)), pl.col("dur_ns")
    )
    # the estimate: the shortest instance of the name on this participant waited least
    estimated_wait = pl.col("dur_ns") - pl.col("dur_ns").min().over("dev", "name")
    wait = pl.when(pl.col("matched")).then(matched_wait).otherwise(estimated_wait)
    return kern.with_columns(
        wait.cast(pl.Int64).alias("wait_ns"),
        pl.when(pl.col("matched")).then(last_dev.over(group)).alias("last_dev"),
        (~pl.col("matched")).alias("estimated"),
    ).with_columns((pl.col("dur_ns") - pl.col("wait_ns")).alias("transfer_ns"))
