"""Collectives matched across ranks, and each one's time split into waiting and transfer.

Collective kernels are GPU kernels with ``is_comm`` (``model.comm``). Participants are devices
(``dev``: one per (rank, device)).

Matching rule: NCCL issues the collectives of one process group in the same order on every
member, so the k-th collective of a group on one participant is the k-th on every other. The
group is the ``Process Group Name`` arg when the trace records it (Kineto), else one group per
collective op; the op (``AllReduce``, ``AllGather``...) is read from the kernel name. A
(group, op) is matched when every participant has it; the first ``min count`` are matched
(a longer capture leaves its extra ones unmatched). Point-to-point ops (``SendRecv``,
``Send``, ``Recv``) involve two ranks, not all: never matched.

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

Unmatched collectives (one rank, point-to-point, a group some rank lacks, or a matching whose
ends disagree) get an estimate: transfer = the shortest duration of the same kernel name on the
same participant (the instance that waited least), wait = dur - transfer; flagged ``estimated``.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Final

import polars as pl

from traceforensics.analysis.context import OP_DUR_NS

#: The collective op in a kernel name (NCCL/RCCL spelling), case-insensitive.
OP_RE: Final = (
    r"(?i)(AllReduce|AllGather|ReduceScatter|AllToAll|Broadcast|SendRecv|Send|Recv|Reduce)"
)
POINT_TO_POINT: Final = ("SendRecv", "Send", "Recv")
PG_ARG: Final = "Process Group Name"
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
    work: pl.DataFrame, args: pl.DataFrame, devices: pl.DataFrame
) -> pl.DataFrame:
    """Collective kernels of ``work`` (``AnalysisContext.work``) with ``dev`` (their device's
    index: ``devices``, ``AnalysisContext.device_table``), ``op`` and ``group``, and ``k``:
    their order within (participant, group, op), by start."""
    collective = (pl.col("kind") == "kernel") & pl.col("is_comm")
    none = not work.select(collective.any()).item()
    kern = (
        work.lazy()
        .filter(collective)
        .select("rank", "device", "event_id", "name", "start_ns", "end_ns", OP_DUR_NS)
        .join(devices.lazy(), on=["rank", "device"], how="left")
    )
    pg = (
        _NO_GROUPS  # (no collective kernel: the args are not even looked at)
        if none
        else args.filter(pl.col("key") == PG_ARG)
        .select("event_id", pl.col("value").cast(pl.String).str.strip_chars('"').alias("pg"))
        .unique("event_id", keep="first")
    )
    op = pl.col("name").cast(pl.String).str.extract(OP_RE, 1).fill_null("other")
    query = (
        kern.join(pg.lazy(), on="event_id", how="left")
        .with_columns(op.alias("op"), pl.col("pg").fill_null(""))
        .with_columns(pl.format("{}|{}", "pg", "op").alias("group"))
        .sort("dev", "start_ns", "event_id")
        .with_columns(pl.int_range(pl.len()).over("dev", "group").alias("k"))
    )
    if none:  # (the query's columns, none of its steps run)
        return pl.DataFrame(schema=query.collect_schema())
    return query.collect(engine="in-memory")


#: The process groups of no kernel (``collective_kernels`` of a trace without collectives).
_NO_GROUPS = pl.DataFrame(schema={"event_id": pl.Int64, "pg": pl.String})


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
    counts = kern.group_by("group", "dev").agg(pl.len().alias("n"), pl.col("op").first())
    groups = counts.group_by("group").agg(
        pl.col("dev").n_unique().alias("devs"),
        pl.col("n").min().alias("upto"),
        pl.col("op").first(),
    )
    matchable = groups.filter(
        (pl.col("devs") == len(devs)) & (len(devs) >= 2) & ~pl.col("op").is_in(POINT_TO_POINT)
    ).select("group", "upto")
    kern = kern.join(matchable, on="group", how="left").with_columns(
        (pl.col("upto").is_not_null() & (pl.col("k") < pl.col("upto"))).alias("matched")
    )
    matched = kern.filter(pl.col("matched"))
    out = Collectives(rows=kern, method="estimate")
    if matched.height:
        offsets = _clock_offsets(matched)
        ok, note = _consistent(matched, offsets)
        if ok:
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


def _consistent(matched: pl.DataFrame, offsets: pl.DataFrame) -> tuple[bool, str]:
    """Whether the matched collectives end together once the offsets are removed."""
    aligned = matched.join(offsets, on="dev").with_columns(
        (pl.col("end_ns") - pl.col("offset_ns")).alias("e")
    )
    per = aligned.group_by("group", "k").agg(
        (pl.col("e").max() - pl.col("e").min()).alias("spread"), pl.col("dur_ns").median()
    )
    spread, dur = (float(v or 0) for v in per.select(pl.col("spread", "dur_ns").median()).row(0))
    if spread > MAX_END_SPREAD_NS and spread > MAX_END_SPREAD_SHARE * dur:
        return False, (
            f"collectives matched by order end {spread / 1e3:.0f} µs apart (median) against "
            f"{dur / 1e3:.0f} µs durations: the ranks' captures do not hold the same "
            "collectives, so waits are estimated per rank"
        )
    return True, ""


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
