"""Columnar preparation shared by the gap, step and stream passes (built once per session).

Joins each GPU op to its launch call (same rank and correlation id; same pid when the GPU row
records one), classifies host rows into causes (``causes.classify_host``), flattens them into a
``HostTimeline`` and computes the device busy unions. No per-event Python loops.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
import numpy.typing as npt
import polars as pl

from traceforensics.analysis.idle.attribution import OpTable, SyncIndex
from traceforensics.analysis.idle.causes import (
    CAUSE_INDEX,
    CPU_COMPUTE,
    HOST_SYNC,
    classify_host,
    launch_part_cause,
    slow_api_is_compilation,
)
from traceforensics.analysis.idle.host_timeline import (
    HostTimeline,
    build_timeline,
    grouped_union,
    pack_shift,
)
from traceforensics.analysis.intervals import I64
from traceforensics.model.schema import BUSY_KINDS

HOST_KINDS = ("cpu_op", "annotation", "python", "os_call", "cuda_api", "overhead")
_FAR = np.int64(np.iinfo(np.int64).max // 4)


@dataclass
class GapContext:
    """Everything the passes need, as sorted numpy arrays plus small frames for evidence."""

    t0_ns: int
    shift: int
    devices: list[tuple[int, int]]
    dev_lo: I64
    dev_hi: I64
    ops: OpTable
    op_frame: pl.DataFrame
    host: pl.DataFrame
    tline: HostTimeline
    sync: SyncIndex
    union_dev: I64
    union_start: I64
    union_end: I64
    end_keys: I64
    end_is_comm: npt.NDArray[np.bool_]
    rank_span: dict[int, tuple[int, int]]
    events: pl.DataFrame

    def dev_union(self, g: int) -> tuple[I64, I64]:
        lo, hi = np.searchsorted(self.union_dev, [g, g + 1])
        return self.union_start[lo:hi], self.union_end[lo:hi]

    def prev_comm(self, dev: I64, s: I64) -> npt.NDArray[np.bool_]:
        """Whether some op of the device ends exactly at ``s`` and is communication."""
        if self.end_keys.size == 0:
            return np.zeros(s.size, dtype=bool)
        q = (dev << self.shift) | (s - self.t0_ns)
        i = np.searchsorted(self.end_keys, q, side="left")
        i_safe = np.minimum(i, self.end_keys.size - 1)
        hit = (i < self.end_keys.size) & (self.end_keys[i_safe] == q)
        # several ops may end at s: any communication one counts
        j = np.searchsorted(self.end_keys, q, side="right")
        cum = np.concatenate(([0], np.cumsum(self.end_is_comm)))
        out: npt.NDArray[np.bool_] = hit & ((cum[j] - cum[i_safe]) > 0)
        return out


def _i64(frame: pl.DataFrame, col: str, fill: int = 0) -> I64:
    return frame.get_column(col).fill_null(fill).to_numpy().astype(np.int64)


def build_context(events: pl.DataFrame, data_patterns: Sequence[str], step_re: str) -> GapContext:
    """Prepare a session's event table for ``attribute`` (see module docstring)."""
    ev = events.with_columns((pl.col("start_ns") + pl.col("dur_ns")).alias("end_ns"))
    bounds = ev.select(pl.col("start_ns").min(), pl.col("end_ns").max()).row(0)
    t0 = int(bounds[0] or 0)
    span = int(bounds[1] or 0) - t0 + 1
    rank_span = {
        int(r): (int(a), int(b))
        for r, a, b in ev.filter(
            (pl.col("kind") != "marker") & ~pl.col("name").cast(pl.String).str.contains(step_re)
        )
        .group_by("rank")
        .agg(pl.col("start_ns").min(), pl.col("end_ns").max())
        .iter_rows()
    }

    host = (
        ev.filter(pl.col("kind").is_in(HOST_KINDS) & pl.col("tid").is_not_null())
        .with_columns(pl.col("pid").fill_null(-1), pl.col("name").cast(pl.String))
        .select("event_id", "rank", "pid", "tid", "kind", "name", "start_ns", "end_ns")
        .with_columns(pl.col("kind").cast(pl.String))
    )
    threads = (
        host.select("rank", "pid", "tid").unique().sort("rank", "pid", "tid").with_row_index("thr")
    ).with_columns(pl.col("thr").cast(pl.Int64))
    shift = pack_shift(span, max(threads.height, 1))

    work = ev.filter(pl.col("kind").is_in(BUSY_KINDS) & pl.col("device").is_not_null())
    d2h = (
        work.filter(pl.col("copy_kind") == "d2h")
        .select("rank", "correlation", pl.lit(True).alias("blocking_d2h"))
        .drop_nulls("correlation")
        .unique(["rank", "correlation"])
    )
    host_full = (
        ev.filter(pl.col("kind").is_in(HOST_KINDS) & pl.col("tid").is_not_null())
        .select("event_id", "correlation", "is_comm")
        .join(host, on="event_id")
        .join(d2h, on=["rank", "correlation"], how="left")
        .with_columns(pl.col("blocking_d2h").fill_null(False))
    )
    cause = slow_api_is_compilation(
        classify_host(host_full, data_patterns, step_re),
        host_full.get_column("kind").to_numpy(),
        (host_full.get_column("end_ns") - host_full.get_column("start_ns")).to_numpy(),
    )
    host = (
        host_full.with_columns(cause.alias("cause"))
        .join(threads, on=["rank", "pid", "tid"])
        .sort("thr", "start_ns", "end_ns")
    )
    h_thr = _i64(host, "thr")
    h_s, h_e = _i64(host, "start_ns"), _i64(host, "end_ns")
    h_c = host.get_column("cause").to_numpy().astype(np.int8)
    tline = build_timeline(h_thr, h_s, h_e, h_c, t0_ns=t0, shift=shift)

    sync_m = h_c == CAUSE_INDEX[HOST_SYNC]
    sk = (h_thr[sync_m] << shift) | (h_e[sync_m] - t0)
    order = np.argsort(sk, kind="stable")
    sync = SyncIndex(
        sk[order],
        h_s[sync_m][order],
        h_e[sync_m][order],
        np.flatnonzero(sync_m)[order].astype(np.int64),
    )

    # dispatch: outermost generic operator around each launch (touching siblings stay apart)
    disp = (h_c == CAUSE_INDEX[CPU_COMPUTE]) & (host.get_column("kind").to_numpy() == "cpu_op")
    dks = (h_thr[disp] << shift) | (h_s[disp] - t0)
    dke = (h_thr[disp] << shift) | (h_e[disp] - t0)
    o = np.argsort(dks, kind="stable")
    dks, dke = dks[o], dke[o]
    comp_s, comp_e = _components(dks, dke)

    launches = ev.filter(
        (pl.col("kind") == "cuda_api") & pl.col("correlation").is_not_null()
    ).select(
        "rank",
        "correlation",
        pl.col("pid").fill_null(-1).alias("l_pid"),
        pl.col("tid").alias("l_tid"),
        pl.col("start_ns").alias("ls"),
        pl.col("end_ns").alias("le"),
        pl.col("name").cast(pl.String).alias("l_name"),
        pl.col("event_id").alias("l_eid"),
    )
    ops = work.select(
        "event_id",
        "rank",
        "device",
        "stream",
        "pid",
        "kind",
        "name",
        "start_ns",
        "end_ns",
        "is_comm",
        "correlation",
    ).with_columns(pl.col("kind").cast(pl.String), pl.col("name").cast(pl.String))
    ops = (
        ops.join(launches, on=["rank", "correlation"], how="left")
        .with_columns(
            bad=(
                pl.col("pid").is_not_null()
                & (pl.col("l_pid") >= 0)
                & (pl.col("pid") != pl.col("l_pid"))
            ).fill_null(False)
        )
        .sort("event_id", "bad")
        .unique("event_id", keep="first", maintain_order=True)
        .with_columns(
            [
                pl.when(pl.col("bad")).then(None).otherwise(pl.col(c)).alias(c)
                for c in ("l_pid", "l_tid", "ls", "le", "l_name", "l_eid")
            ]
        )
        .join(
            threads.rename({"pid": "l_pid", "tid": "l_tid", "thr": "l_thr"}),
            on=["rank", "l_pid", "l_tid"],
            how="left",
        )
        .sort("rank", "device", "start_ns", "end_ns")
    )
    ops = _with_wait_ok(ops, ev)
    devices_df = ops.select("rank", "device").unique(maintain_order=True)
    devices = [(int(r), int(d)) for r, d in devices_df.iter_rows()]
    ops = ops.join(
        devices_df.with_row_index("dev").with_columns(pl.col("dev").cast(pl.Int64)),
        on=["rank", "device"],
        maintain_order="left",
    )
    dev = _i64(ops, "dev")
    o_s, o_e = _i64(ops, "start_ns"), _i64(ops, "end_ns")
    thr = _i64(ops, "l_thr", -1)
    ls = _i64(ops, "ls")
    ds = ls.copy()
    if comp_s.size:
        lk = (np.maximum(thr, 0) << shift) | (ls - t0)
        ci = np.searchsorted(comp_s, lk, side="right") - 1
        cs = np.maximum(ci, 0)
        inside = (ci >= 0) & (comp_e[cs] > lk) & ((comp_s[cs] >> shift) == thr) & (thr >= 0)
        ds = np.where(inside, (comp_s[cs] & ((1 << shift) - 1)) + t0, ls)
    op_table = OpTable(
        start=o_s,
        end=o_e,
        stream=_i64(ops, "stream", -1),
        is_comm=ops.get_column("is_comm").fill_null(False).to_numpy().astype(bool),
        thr=thr,
        ls=ls,
        le=_i64(ops, "le"),
        launch_cause=launch_part_cause(ops.get_column("l_name"), _i64(ops, "le") - ls),
        ds=ds.astype(np.int64),
        wait_ok=ops.get_column("wait_ok").fill_null(False).to_numpy().astype(bool),
    )
    dev_lo = np.searchsorted(dev, np.arange(len(devices)), side="left").astype(np.int64)
    dev_hi = np.searchsorted(dev, np.arange(len(devices)), side="right").astype(np.int64)
    ug, us, ue = grouped_union(dev, o_s, o_e, t0, shift)
    ek = (dev << shift) | (o_e - t0)
    eo = np.argsort(ek, kind="stable")
    return GapContext(
        t0_ns=t0,
        shift=shift,
        devices=devices,
        dev_lo=dev_lo,
        dev_hi=dev_hi,
        ops=op_table,
        op_frame=ops.select(
            "event_id",
            "rank",
            "device",
            "kind",
            "name",
            "stream",
            "l_name",
            "l_pid",
            "l_tid",
            "l_eid",
            "correlation",
        ),
        host=host.select("thr", "kind", "name", "tid", "start_ns", "end_ns", "cause"),
        tline=tline,
        sync=sync,
        union_dev=ug,
        union_start=us,
        union_end=ue,
        end_keys=ek[eo],
        end_is_comm=op_table.is_comm[eo],
        rank_span=rank_span,
        events=ev,
    )


def _components(ks: I64, ke: I64) -> tuple[I64, I64]:
    """Merge overlapping (not merely touching) packed intervals sorted by start."""
    if ks.size == 0:
        return ks, ke
    run = np.maximum.accumulate(ke)
    new = np.empty(ks.size, dtype=bool)
    new[0] = True
    new[1:] = ks[1:] >= run[:-1]
    first = np.flatnonzero(new)
    last = np.append(first[1:] - 1, ks.size - 1)
    return ks[first], run[last]


def _with_wait_ok(ops: pl.DataFrame, ev: pl.DataFrame) -> pl.DataFrame:
    """``wait_ok``: a GPU stream-wait record (gpu_sync named like ``*Wait*``) on the op's
    stream was issued (``w_start``, ns) after the previous launch on that stream (``prev_ls``)
    and at or before this launch (``ls``): ``prev_ls < w_start <= ls``. The queued part of a gap
    ended by such an op is ``cross_stream_wait`` (``attribution.queued_cause``)::

        host      [L k1]            [L k2]
        gpu_sync             ^ Stream Wait Event on the stream of k2
                  prev_ls    w_start  ls
                  prev_ls < w_start <= ls -> wait_ok (k2's queued part: cross_stream_wait)
    """
    waits = (
        ev.filter(
            (pl.col("kind") == "gpu_sync")
            & pl.col("name").cast(pl.String).str.contains(r"(?i)wait")
            & pl.col("stream").is_not_null()
        )
        .select("rank", "device", "stream", pl.col("start_ns").alias("w_start"))
        .sort("w_start")
    )
    ops = ops.with_columns(
        pl.col("ls")
        .shift(1)
        .over(["rank", "device", "stream"], order_by="start_ns")
        .alias("prev_ls")
    )
    if waits.height == 0:
        return ops.with_columns(pl.lit(False).alias("wait_ok"))
    with_ls = (
        ops.filter(pl.col("ls").is_not_null())
        .select("event_id", "rank", "device", "stream", "ls", "prev_ls")
        .sort("ls")
    )
    joined = with_ls.join_asof(
        waits,
        left_on="ls",
        right_on="w_start",
        by=["rank", "device", "stream"],
        strategy="backward",
        check_sortedness=False,
    ).select(
        "event_id",
        (
            pl.col("w_start").is_not_null()
            & (pl.col("prev_ls").is_null() | (pl.col("w_start") > pl.col("prev_ls")))
        ).alias("wait_ok"),
    )
    return ops.join(joined, on="event_id", how="left", maintain_order="left")
