"""The kernels pass's memory-lean paths give what the whole-table rules give.

- ``short.idle_before`` (numpy, one device slice at a time) equals the sorted-table rule: the
  latest end of the device's GPU ops before it in (start, event id) order.
- ``rows._in_step_windows`` (window found on the start times alone, columns gathered after)
  equals sorting every kernel by start and as-of joining the step windows by (rank, device).
- FLOPs columns built for the charged kernels only and spread over all kernels equal the
  per-kernel share computed on the whole kernel table; without FLOPs ops they are null and
  the short-kernel rows do not change.
"""

from __future__ import annotations

import itertools
from pathlib import Path

import numpy as np
import polars as pl
import pytest

import make_gemm_traces as mg
from synth import SynthTrace
from traceforensics.analysis.context import prepare
from traceforensics.analysis.kernels.forensics import _spread, analyze_kernels
from traceforensics.analysis.kernels.frame import (
    kernel_frame,
    kernel_positions,
    outermost_flagged,
)
from traceforensics.analysis.kernels.rows import _in_step_windows
from traceforensics.analysis.kernels.short import idle_before
from traceforensics.analysis.kernels.throughput import charge_flops, op_costs
from traceforensics.ingest import load_path


def test_idle_before_takes_the_sorted_rule_with_ties(tmp_path: Path) -> None:
    tr = SynthTrace()
    # device 0: two kernels start together on two streams (the one recorded second ends
    # first), a memcpy starting with the next kernel, then a kernel inside earlier work
    tr.launch("k_a", 0, 10, 100, 50, stream=7)
    tr.launch("k_b", 20, 10, 100, 30, stream=8)
    tr.launch("k_c", 40, 10, 200, 10, stream=7)
    tr.launch("", 45, 5, 200, 40, kind="memcpy", copy_kind="h2d", src_mem="pinned", stream=9)
    tr.launch("k_d", 60, 10, 210, 5, stream=8)
    # device 1: its first kernel has no previous work
    tr.launch("k_e", 70, 10, 150, 20, device=1)
    tr.launch("k_f", 80, 10, 150, 10, device=1, stream=8)
    ctx = prepare(load_path(tr.write_kineto(tmp_path / "t.pt.trace.json.gz")))
    prev, has = idle_before(ctx)
    got = ctx.work.select("event_id").with_columns(
        pl.when(pl.Series(has)).then(pl.Series(prev)).alias("prev_end_ns")
    )
    want = (
        ctx.work.select("event_id", "rank", "device", "start_ns", "end_ns")
        .sort(["rank", "device", "start_ns", "event_id"])
        .with_columns(
            pl.col("end_ns").cum_max().shift(1).over(["rank", "device"]).alias("prev_end_ns")
        )
        .select("event_id", "prev_end_ns")
    )
    assert got.sort("event_id").equals(want.sort("event_id"))
    assert got.get_column("prev_end_ns").null_count() == 2  # one first op per device


def _kernels_and_windows(seed: int, with_flops: bool) -> tuple[pl.DataFrame, pl.DataFrame]:
    """Kernels of two ranks x two devices with many equal start times, and step windows with
    a shared start, a null step and a gap no window covers."""
    rng = np.random.default_rng(seed)
    n = 4000
    kflops = rng.random(n) * 1e9
    kern = pl.DataFrame(
        {
            "rank": rng.integers(0, 2, n).astype(np.int32),
            "device": rng.integers(0, 2, n).astype(np.int32),
            "start_ns": rng.integers(0, 500, n) * 10,
            "dur_ns": rng.integers(1, 100, n),
        }
    ).with_columns(
        pl.when(pl.Series(rng.random(n) < 0.6)).then(pl.Series(kflops)).alias("kflops")
        if with_flops
        else pl.lit(None, dtype=pl.Float64).alias("kflops"),
    )
    kern = kern.with_columns((pl.col("kflops") / 7.0).alias("ideal_ns"))
    rows = []
    for r in (0, 1):
        for d in (0, 1):
            edges = [0, 700, 700, 1500, 2600, 3800, 4400]
            for i, (s0, s1) in enumerate(itertools.pairwise(edges)):
                if (s0, s1) == (2600, 3800):
                    continue  # a gap: kernels there are in no step
                rows.append((r, d, None if i == 4 else i, s0, s1))
    windows = pl.DataFrame(
        rows,
        schema={
            "rank": pl.Int32,
            "device": pl.Int32,
            "step": pl.Int64,
            "s0": pl.Int64,
            "s1": pl.Int64,
        },
        orient="row",
    )
    return kern, windows


@pytest.mark.parametrize("with_flops", [True, False])
@pytest.mark.parametrize("seed", [0, 1, 2])
def test_step_windows_equal_the_whole_table_as_of_join(seed: int, with_flops: bool) -> None:
    kern, windows = _kernels_and_windows(seed, with_flops)
    want = (
        kern.sort("start_ns")
        .join_asof(
            windows.sort("s0"),
            left_on="start_ns",
            right_on="s0",
            by=["rank", "device"],
            strategy="backward",
            check_sortedness=False,
        )
        .filter(pl.col("step").is_not_null() & (pl.col("start_ns") < pl.col("s1")))
    )
    win = windows.sort("s0").with_row_index("_w")
    got = _in_step_windows(kern, win)
    cols = ["rank", "device", "step", "dur_ns", "kflops", "ideal_ns"]
    assert got.select(cols).equals(want.select(cols))
    # the window of each kept kernel is the one it started in
    s0 = win.get_column("s0").gather(got.get_column("_w"))
    assert s0.equals(want.get_column("s0"), check_names=False)


def _gemm_ctx(tmp_path: Path, with_flops: bool) -> Path:
    """The synthetic GEMMs plus one short kernel no op launched (its FLOPs are unknown)."""
    tr = mg.build()
    end = max(ev.start_ns + ev.dur_ns for ev in tr.events)
    tr.launch("vectorized_elementwise_kernel", end + 1_000, 2_000, end + 4_000, 3_000)
    if not with_flops:
        for ev in tr.events:
            ev.args = {}
    return tr.write_kineto(tmp_path / f"g{int(with_flops)}.pt.trace.json.gz")


def test_flops_columns_for_charged_kernels_equal_the_whole_table(tmp_path: Path) -> None:
    ctx = prepare(load_path(_gemm_ctx(tmp_path, with_flops=True)))
    kl = kernel_frame(ctx, kernel_positions(ctx))
    costs = op_costs(ctx.cpu_ops, ctx.args, ctx.tree)
    known = costs.get_column("op_id").filter(costs.get_column("flops").is_not_null())
    flops_op_id = outermost_flagged(ctx, kl.get_column("op_id"), known, "flops_op_id")
    charged, ops = charge_flops(kl, flops_op_id, costs)
    assert 0 < charged.height < kl.height  # some kernels launched by no FLOPs op
    # the whole-table rule: every kernel joined to its op, its share of the op's FLOPs
    whole = (
        kl.with_columns(flops_op_id)
        .join(costs.rename({"op_id": "flops_op_id"}), on="flops_op_id", how="left")
        .with_columns(pl.col("dur_ns").sum().over("flops_op_id").alias("op_ns"))
        .select(
            pl.col("flops").cast(pl.Float64)
            * pl.when(pl.col("op_ns") > 0).then(pl.col("dur_ns") / pl.col("op_ns"))
        )
        .to_series()
    )
    assert _spread(charged, "kflops", kl.height).equals(whole, check_names=False)
    assert set(ops.get_column("flops_op_id")) == set(flops_op_id.drop_nulls())


def test_without_flops_ops_the_columns_are_null_and_short_rows_stay(tmp_path: Path) -> None:
    with_ops = analyze_kernels(load_path(_gemm_ctx(tmp_path, with_flops=True)))
    without = analyze_kernels(load_path(_gemm_ctx(tmp_path, with_flops=False)))
    assert without.ops == [] and without.families == []
    assert without.unknown_flops_kernels.count == without.kernel_count == with_ops.kernel_count
    assert [r.flops for r in without.mfu_by_device] == [0]
    assert [r.mfu for r in without.mfu_by_device] == [None]
    assert without.short_kernels == with_ops.short_kernels
