"""Per-rank table, per-step slowest rank, and the straggler with its cause.

Blame: in each matched collective (every kind: all-reduce, all-to-all...) the participant that
arrived last (``last_dev``) made every other one wait; it is charged the mean wait of the
others (``blame_ns``) and their total (``wait_total_ns``). Per step (by step number, each
rank's own step windows) the slowest rank is the one charged most: the others' wait for it,
not how often it is last. The figures a report states come from this one quantity: the
straggler's ``waited_for_ns`` is the sum of its charges over the trace, a step's
``slowest_rank_wait_ns`` the sum of the slowest rank's charges in that step.

Straggler: the participant charged most over the whole trace (weighted by the others' wait
over all matched collectives), when the others' mean wait for it in matched collectives
(its ``waited_for_ns``; estimated splits say nothing about whom a rank waited for) is at least
``MIN_WAIT_SHARE`` of their window, it is charged at least
``MIN_BLAME_SHARE`` of all blame, and its cause's excess per step explains at least
``MIN_EXPLAINED`` of the others' wait per step (else jitter alone makes some rank last most
often) unless that wait is ``LARGE_WAIT_SHARE`` of the window or more (then it is named with
cause ``unknown`` if nothing explains it). Its cause: what it spends more time on than the
others' median, per step: each idle cause of docs/causes.md (data loading, host syncs, ...) or
its compute kernels (``slow_gpu``: the same work takes longer on its GPU). The largest excess
wins::

    healthy ranks   |compute|  idle  |##collective (mostly waiting)##|
    straggler       |compute|  data loading (+30 ms)  |#collective#|
                                                 ^ everyone's collective ends here
"""

from __future__ import annotations

from statistics import median
from typing import Final

import polars as pl

from traceforensics.analysis.devices import DeviceRecord
from traceforensics.analysis.idle.causes import ranked_causes
from traceforensics.analysis.idle.gaps import IdleAnalysis
from traceforensics.analysis.intervals import total, union
from traceforensics.analysis.ranks.collectives import Collectives
from traceforensics.analysis.ranks.results import SLOW_GPU, RankRow, StepRow, Straggler

MIN_WAIT_SHARE: Final = 0.02
MIN_BLAME_SHARE: Final = 0.5
MIN_EXPLAINED: Final = 0.5
LARGE_WAIT_SHARE: Final = 0.1


_BLAME_SCHEMA: Final = {
    "dev": pl.Int64,
    "blame_ns": pl.Int64,
    "wait_total_ns": pl.Int64,
    "start_ns": pl.Int64,
}


def blame(coll: Collectives) -> pl.DataFrame:
    """Per matched collective: ``dev`` charged (the last to arrive), ``blame_ns`` (the
    others' mean wait) and ``wait_total_ns`` (their summed wait), with the collective's start
    on that participant."""
    rows = coll.rows.filter(pl.col("matched"))
    if rows.height == 0:
        return pl.DataFrame(schema=_BLAME_SCHEMA)
    per = rows.group_by("group", "k").agg(
        pl.col("last_dev").first().alias("dev"),
        (pl.col("wait_ns").sum() / (pl.len() - 1).clip(lower_bound=1)).alias("blame_ns"),
        pl.col("wait_ns").sum().alias("wait_total_ns"),
        pl.col("start_ns").filter(pl.col("dev") == pl.col("last_dev")).first(),
    )
    return per.select(
        pl.col("dev").cast(pl.Int64),
        pl.col("blame_ns").round(0).cast(pl.Int64),
        pl.col("wait_total_ns").cast(pl.Int64),
        pl.col("start_ns").cast(pl.Int64),
    )


def waits_for(rows: pl.DataFrame, last: int) -> dict[int, int]:
    """Per participant: wall-clock ns (union of waiting heads) spent in the matched
    collectives participant ``last`` arrived last at."""
    mine = rows.filter(pl.col("matched") & (pl.col("last_dev") == last) & (pl.col("dev") != last))
    return {dev: int(v["wait"]) for dev, v in comm_time(mine).items()}


def most_waited_for(rows: pl.DataFrame) -> dict[int, tuple[int, int]]:
    """Per participant that waited in matched collectives: the participant whose late arrival
    it waited on longest (summed wait; ties: the lower index) and that wait as a union (ns)."""
    waited = (
        rows.filter(pl.col("matched") & (pl.col("dev") != pl.col("last_dev")))
        .group_by("dev", "last_dev")
        .agg(pl.col("wait_ns").sum())
        .filter(pl.col("wait_ns") > 0)
        .sort("dev", "wait_ns", "last_dev", descending=[False, True, False])
        .unique("dev", keep="first")
    )
    out = {}
    for dev, last, _ in waited.iter_rows():
        out[int(dev)] = (int(last), waits_for(rows, int(last)).get(int(dev), 0))
    return out


def step_rows(charged: pl.DataFrame, steps: pl.DataFrame) -> list[StepRow]:
    """The slowest rank of each step number (module docstring)."""
    if charged.height == 0 or steps.height == 0:
        return []
    windows = steps.select(
        pl.col("dev").cast(pl.Int64), "rank", "number", "start_ns", "end_ns"
    ).sort("dev", "start_ns")
    placed = (
        charged.sort("dev", "start_ns")
        # both sorted by (dev, start) above: polars cannot check that per group itself
        .join_asof(windows, on="start_ns", by="dev", strategy="backward", check_sortedness=False)
        .filter(pl.col("number").is_not_null() & (pl.col("start_ns") < pl.col("end_ns")))
    )
    per = (
        placed.group_by("number", "rank")
        .agg(pl.col("blame_ns", "wait_total_ns").sum())
        .sort("number", "blame_ns", "rank", descending=[False, True, False])
    )
    out = []
    for number, group in per.group_by("number", maintain_order=True):
        first = group.row(0, named=True)
        total = int(group["blame_ns"].sum())
        late = first["blame_ns"] > 0
        out.append(
            StepRow(
                step=int(number[0]),
                slowest_rank=int(first["rank"]) if late else None,
                others_wait_ns=total,
                slowest_rank_wait_ns=int(first["blame_ns"]) if late else 0,
                slowest_rank_wait_total_ns=int(first["wait_total_ns"]) if late else 0,
            )
        )
    return out


def _per_step(value: int, steps: int) -> float:
    return value / steps if steps else float(value)


def step_medians(idle: IdleAnalysis) -> dict[tuple[int, int], dict[str, float]]:
    """Per (rank, device) with steps: each idle cause's median ns per step."""
    by_dev: dict[tuple[int, int], list[dict[str, int]]] = {}
    for st in idle.steps:
        by_dev.setdefault((st.rank, st.device), []).append(st.idle_by_cause)
    return {
        key: {c: float(median(s.get(c, 0) for s in rows)) for c in {c for s in rows for c in s}}
        for key, rows in by_dev.items()
    }


def find_straggler(
    rows: list[RankRow],
    charged: pl.DataFrame,
    devs: list[tuple[int, int]],
    step_idle: dict[tuple[int, int], dict[str, float]],
) -> Straggler | None:
    """The straggler and its cause, or None when the ranks arrive together."""
    if len(rows) < 2 or charged.height == 0:
        return None
    totals = charged.group_by("dev").agg(pl.col("blame_ns", "wait_total_ns").sum())
    top = totals.sort("blame_ns", "dev", descending=[True, False]).row(0, named=True)
    all_blame = int(totals["blame_ns"].sum())
    rank, device = devs[int(top["dev"])]
    me = next(r for r in rows if (r.rank, r.device) == (rank, device))
    others = [r for r in rows if r is not me]
    mean_wait = sum(r.comm_wait_ns for r in others) / len(others)
    mean_window = sum(r.window_ns for r in others) / len(others) or 1
    # the tests read the others' wait for it in matched collectives: an estimated split (a
    # collective not matched across ranks) says nothing about whom they waited for
    waited = int(top["blame_ns"])
    if not all_blame or waited < MIN_WAIT_SHARE * mean_window:
        return None
    if int(top["blame_ns"]) < MIN_BLAME_SHARE * all_blame:
        return None
    cause, excess, evidence = _cause(me, others, step_idle)
    # jitter also makes some rank last most often: a straggler's own excess must explain
    # the others' wait, unless the wait is large whatever its cause
    wait_per_step = waited / max(me.steps, 1)
    if excess < MIN_EXPLAINED * wait_per_step and waited < LARGE_WAIT_SHARE * mean_window:
        return None
    share = me.last_arrivals / charged.height
    evidence.insert(
        0,
        f"the other ranks wait {waited / 1e6:.2f} ms each for rank {rank} "
        f"({waited / all_blame:.0%} of their waiting in matched collectives): it arrives last "
        f"at {me.last_arrivals} of {charged.height} matched collectives",
    )
    return Straggler(
        rank,
        device,
        cause,
        excess,
        int(mean_wait),
        share,
        evidence,
        waited_for_ns=waited,
        waited_for_total_ns=int(top["wait_total_ns"]),
        wait_share=waited / all_blame,
        last_arrivals=me.last_arrivals,
        matched_collectives=charged.height,
    )


def _cause(
    me: RankRow, others: list[RankRow], step_idle: dict[tuple[int, int], dict[str, float]]
) -> tuple[str, int, list[str]]:
    """``(cause, excess ns per step, evidence)``: the largest per-step excess over the others'
    median among the idle causes and the compute time. A cause's idle per step is its median
    over the rank's steps (a first step cut by the window does not dilute it), else its total
    over the window."""
    steps = me.steps

    def idle_of(row: RankRow, cause: str) -> float:
        per = step_idle.get((row.rank, row.device))
        if per is not None:
            return per.get(cause, 0.0)
        return _per_step(row.idle_by_cause.get(cause, 0), row.steps)

    idle_excess = {
        cause: round(idle_of(me, cause) - median(idle_of(r, cause) for r in others))
        for cause in me.idle_by_cause
    }
    ordered = ranked_causes(idle_excess)
    best_idle = ordered[0] if ordered else ("unknown", 0)
    mine_compute = _per_step(me.compute_ns, steps)
    theirs_compute = median(_per_step(r.compute_ns, r.steps) for r in others)
    if mine_compute - theirs_compute > best_idle[1]:
        ratio = mine_compute / theirs_compute if theirs_compute else 0.0
        return (
            SLOW_GPU,
            round(mine_compute - theirs_compute),
            [
                f"its compute kernels take {mine_compute / 1e6:.2f} ms/step "
                f"against {theirs_compute / 1e6:.2f} ms/step on the other ranks (x{ratio:.2f}): "
                "a slower or throttled GPU (check clocks and temperature with tf monitor)"
            ],
        )
    cause, ns = best_idle
    if ns <= 0:
        return "unknown", 0, ["no idle cause or compute excess explains its lateness"]
    mine = idle_of(me, cause)
    return (
        cause,
        ns,
        [
            f"{cause} idle {mine / 1e6:.2f} ms/step against "
            f"{(mine - ns) / 1e6:.2f} ms/step (median) on the other ranks"
        ],
    )


def comm_time(rows: pl.DataFrame) -> dict[int, dict[str, int | bool]]:
    """Per participant (``dev``): ``comm``, the union of its collective kernels (ns; the device
    record's ``comm_ns``), ``wait``, the union of their waiting heads ``[start, start +
    wait_ns)``, ``transfer`` = comm - wait, and ``est`` (some split estimated).

    Unions, not sums: collectives on two streams at once (NCCL runs groups side by side) wait
    and move data in the same wall-clock ns; a sum would count those ns twice and claim more
    waiting than the window holds."""
    out: dict[int, dict[str, int | bool]] = {}
    for (dev,), part in rows.group_by("dev"):
        start = part["start_ns"].to_numpy()
        comm = total(*union(start, start + part["dur_ns"].to_numpy()))
        wait = total(*union(start, start + part["wait_ns"].to_numpy()))
        est = bool(part["estimated"].any())
        out[int(dev)] = {"comm": comm, "wait": wait, "transfer": comm - wait, "est": est}
    return out


def rank_rows(
    records: list[DeviceRecord],
    coll: Collectives,
    charged: pl.DataFrame,
    steps: pl.DataFrame,
    devs: list[tuple[int, int]],
) -> list[RankRow]:
    """One ``RankRow`` per device record; ``charged``: ``blame(coll)`` (one row per matched
    collective, charged to the participant that arrived last). Its communication figures are
    wall-clock ns (``comm_time``)."""
    comm = comm_time(coll.rows)
    last_counts = dict(charged.group_by("dev").len().iter_rows())
    per_step = steps.group_by("dev").agg(
        pl.len().alias("n"), (pl.col("end_ns") - pl.col("start_ns")).median().alias("p50")
    )
    step_of = {int(d): (int(n), p50) for d, n, p50 in per_step.iter_rows()}
    index = {rd: g for g, rd in enumerate(devs)}
    out = []
    for rec in records:
        g = index.get((rec.rank, rec.device), -1)
        n_steps, p50 = step_of.get(g, (0, None))
        c = comm.get(g)
        out.append(
            RankRow(
                rank=rec.rank,
                device=rec.device,
                step_time_ns_median=None if p50 is None else int(p50),
                steps=n_steps,
                window_ns=rec.window_ns,
                busy_ns=rec.busy_ns,
                idle_ns=rec.idle_ns,
                idle_by_cause=dict(rec.idle_by_cause),
                top_cause=rec.top_cause,
                compute_ns=rec.busy_by_kind.get("kernel", 0),
                comm_ns=int(c["comm"]) if c else 0,
                comm_wait_ns=int(c["wait"]) if c else 0,
                comm_transfer_ns=int(c["transfer"]) if c else 0,
                comm_estimated=bool(c["est"]) if c else False,
                last_arrivals=int(last_counts.get(g, 0)),
                clock_offset_ns=int(coll.offsets_ns.get(g, 0)),
                mfu=rec.mfu,
            )
        )
    return out
