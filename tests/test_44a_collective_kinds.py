"""Issue 44: a collective's kind comes from its launching op first (NCCL runs all-to-alls, and
older NCCL other collectives, as ``SendRecv`` kernels), then its ``Collective name`` arg, then
its kernel name; all-to-alls are matched across ranks, true point-to-point never; a group whose
ends disagree is left unmatched without losing the groups that agree; a rank whose waiting
dominates its communication is pointed at the rank it waits for even when no job straggler is
named."""

from __future__ import annotations

import json
from dataclasses import replace
from pathlib import Path

import polars as pl

import synth_ranks
from synth_ranks_sim import JobSpec
from traceforensics.analysis.findings.stragglers import straggler_findings
from traceforensics.analysis.pipeline import analyze
from traceforensics.analysis.ranks.collectives import collective_kernels, match_collectives
from traceforensics.ingest import load_path

SENDRECV = "ncclKernel_SendRecv_RING_SIMPLE_Sum_int8_t(ncclDevComm*, unsigned long, ncclWork*)"
ALLREDUCE = "ncclKernel_AllReduce_RING_LL_Sum_float(ncclDevComm*, unsigned long, ncclWork*)"
DISPATCH = "void dpsk::ep::internode::dispatch<true, 8, 24, 128>(int4*, float*, int*, long*)"
#: (kernel name, launching op chain innermost first, Collective name arg) -> kind
ROWS = [
    (SENDRECV, ["nccl:all_to_all", "record_param_comms", "c10d::alltoall_base_"], None),
    (SENDRECV, ["ncclGroupEnd", "nccl:all_to_all", "record_param_comms"], None),
    (SENDRECV, ["nccl:send 0->1", "record_param_comms", "c10d::send"], None),
    (SENDRECV, [], None),
    (SENDRECV, ["nccl:all_reduce", "record_param_comms", "c10d::allreduce_"], None),
    (ALLREDUCE, [], "allreduce"),
    (SENDRECV, ["record_param_comms"], "all_to_all"),
    (DISPATCH, ["MoE.forward"], None),
]
KINDS = [
    "all_to_all",
    "all_to_all",
    "send_recv",
    "send_recv",
    "all_reduce",
    "all_reduce",
    "all_to_all",
    "all_to_all",
]


def _frames(devs: int) -> tuple[pl.DataFrame, pl.DataFrame, pl.DataFrame, pl.DataFrame]:
    """``work``, ``args``, ``devices`` and the op ``tree`` of ``devs`` ranks running ``ROWS``
    in order; rank r starts each kernel r µs later, all end together."""
    work, args, tree = [], [], []
    next_id = 1
    for rank in range(devs):
        for i, (name, ops, arg) in enumerate(ROWS):
            parent = None
            for op in reversed(ops):  # outermost first
                tree.append({"event_id": next_id, "parent_id": parent, "name": op})
                parent, next_id = next_id, next_id + 1
            start = 1_000_000 * (i + 1) + 1_000 * rank
            work.append(
                {
                    "kind": "kernel", "is_comm": True, "rank": rank, "device": 0,
                    "event_id": next_id, "name": name, "start_ns": start,
                    "end_ns": 1_000_000 * (i + 1) + 500_000, "op_id": parent,
                }
            )  # fmt: skip
            if arg is not None:
                args.append({"event_id": next_id, "key": "Collective name", "value": f'"{arg}"'})
            next_id += 1
    devices = pl.DataFrame(
        {"rank": list(range(devs)), "device": [0] * devs, "dev": list(range(devs))},
        schema={"rank": pl.Int32, "device": pl.Int32, "dev": pl.Int64},
    )
    work_df = pl.DataFrame(work).with_columns(pl.col("rank", "device").cast(pl.Int32))
    args_df = pl.DataFrame(
        args, schema={"event_id": pl.Int64, "key": pl.String, "value": pl.String}
    )
    return work_df, args_df, devices, pl.DataFrame(tree)


def test_kind_from_op_then_arg_then_name() -> None:
    work, args, devices, tree = _frames(1)
    kern = collective_kernels(work, args, devices, tree).sort("start_ns")
    assert kern["kind"].to_list() == KINDS
    assert kern["family"].to_list() == ["nccl"] * 7 + ["deep_ep"]
    # without the op tree, the kernel name decides: SendRecv is point-to-point
    plain = collective_kernels(work, args, devices).sort("start_ns")
    assert plain["kind"].to_list()[:4] == ["send_recv"] * 4


def test_all_to_alls_match_point_to_point_does_not() -> None:
    work, args, devices, tree = _frames(3)
    coll = match_collectives(collective_kernels(work, args, devices, tree))
    rows = coll.rows.sort("dev", "start_ns")
    by_kind = rows.group_by("kind").agg(pl.col("matched").unique())
    flags = {k: set(v) for k, v in by_kind.iter_rows()}
    assert flags == {"all_to_all": {True}, "all_reduce": {True}, "send_recv": {False}}
    # the last to start (rank 2) is the one everyone waits for in every matched collective
    assert set(rows.filter(pl.col("matched"))["last_dev"].to_list()) == {2}
    assert coll.matched == 6  # 4 all-to-alls (3 NCCL + DeepEP) + 2 all-reduces


def test_a_disagreeing_group_leaves_the_others_matched() -> None:
    work, args, devices, tree = _frames(2)
    # rank 1's DeepEP kernels end 5 ms later: that group is not the same collectives
    late = (pl.col("rank") == 1) & pl.col("name").str.contains("dpsk")
    work = work.with_columns(
        pl.when(late).then(pl.col("end_ns") + 5_000_000).otherwise("end_ns").alias("end_ns")
    )
    coll = match_collectives(collective_kernels(work, args, devices, tree))
    rows = coll.rows
    assert not rows.filter(pl.col("family") == "deep_ep")["matched"].any()
    assert rows.filter(pl.col("family") == "nccl", pl.col("kind") != "send_recv")["matched"].all()
    assert coll.offsets_ns == {0: 0, 1: 0}
    assert any("all_to_all" in n and "estimated" in n for n in coll.notes), coll.notes


def test_dominating_wait_points_at_the_late_rank_without_a_straggler(tmp_path: Path) -> None:
    """Were no job straggler named, a rank whose communication is mostly waiting is still
    pointed at the rank it waited for, with that rank's top cause."""
    out = tmp_path / "job"
    synth_ranks.generate_job(
        out, ranks=4, steps=3, fmt="kineto", straggler_rank=1, cause="data_loading",
        spec=JobSpec(collectives=("all_to_all",)),
    )  # fmt: skip
    truth = json.loads((out / "truth.json").read_text())
    result = analyze(load_path(out))
    assert result.ranks is not None and result.ranks.straggler is not None
    alone = replace(result.ranks, straggler=None)
    raw = [f for f in result.findings if f.category != "straggler_wait"]
    found = straggler_findings(raw, alone, result.devices, result.program)
    for r in (0, 2, 3):
        row = alone.per_rank[r]
        assert row.waits_most_for == 1 and row.waits_most_for_ns > 0.5 * row.comm_ns
        mine = [f for f in found if (f.rank, f.device) == (row.rank, row.device)]
        assert mine[0].category == "straggler_wait", [f.category for f in mine]
        assert "waiting for rank 1 (data_loading)" in mine[0].title
        assert abs(mine[0].recoverable_ns - truth["ranks"][r]["comm_wait_ns"]) <= (
            0.1 * truth["ranks"][r]["comm_wait_ns"]
        )
    assert not [f for f in found if f.category == "straggler_wait" and f.rank == 1]
