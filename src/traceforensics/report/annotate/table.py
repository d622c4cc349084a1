"""An input's own events as Chrome events, from the unified event table (for the formats that
are not Chrome traces already: Nsight Systems exports, rocprof; a Kineto file's own events
are copied or re-encoded by ``ingest.kineto.passthrough`` instead).

Rule, per row of the session's event table:

- GPU rows (a ``device``: kernels, copies, memsets, graph launches) go to the device's stream
  track (``("gpu", device, stream)``; stream 0 when none; a stream id from 2**31 up, CUPTI's
  device-wide records, is named ``all streams``); a stream's sync records and GPU annotations
  go to tracks of their own beside it (they overlap its work);
- host rows go to their thread, one track per group of kinds (``layout.HOST_GROUPS``: CUDA API
  calls, NVTX ranges, OS runtime calls, ...), because ranges of different kinds need not nest
  and a viewer drops slices that cross on one track;
- slices of one track that overlap without nesting (NVTX start/end ranges) go to further
  lanes of it (``_lanes``);
- a row with ``dur_ns`` 0 and kind ``marker`` is an instant (``ph: i``, thread scope), every
  other row a slice (``ph: X``) named by its ``name``, ``cat`` its source category (the kind
  when none), ``args``: ``kind``, ``correlation``, ``bytes`` where the table has them.
"""

from __future__ import annotations

from collections.abc import Iterator

import polars as pl

from traceforensics.model.session import TraceSession
from traceforensics.report.annotate.layout import HOST_GROUPS, Layout, TrackKey
from traceforensics.report.annotate.lines import BLOCK_ROWS, event_lines


def table_events(session: TraceSession, layout: Layout) -> Iterator[bytes]:
    """The session's events as Chrome events on ``layout``'s tracks (module docstring)."""
    ev = session.events
    if ev.height == 0:
        return
    cols = set(ev.columns)
    rows = (
        ev.lazy()
        .select(
            "rank",
            pl.col("kind").cast(pl.String),
            "start_ns",
            "dur_ns",
            pl.col("device") if "device" in cols else pl.lit(None, pl.Int32).alias("device"),
            pl.col("stream").fill_null(0)
            if "stream" in cols
            else pl.lit(0, pl.Int64).alias("stream"),
            pl.col("pid").fill_null(0) if "pid" in cols else pl.lit(0, pl.Int64).alias("pid"),
            pl.col("tid").fill_null(0) if "tid" in cols else pl.lit(0, pl.Int64).alias("tid"),
            pl.col("name").cast(pl.String),
            (
                pl.col("category").cast(pl.String)
                if "category" in cols
                else pl.lit(None, pl.String)
            ).alias("category"),
            *(pl.col(c) for c in ("correlation", "bytes") if c in cols),
        )
        .with_columns(pl.col("device").is_not_null().alias("on_gpu"))
        .collect()
    )
    rows = rows.with_columns(pl.Series("lane", _lanes(rows), pl.Int64))
    tracks = _tracks(rows, layout)
    for a in range(0, rows.height, BLOCK_ROWS):
        block = rows.slice(a, BLOCK_ROWS).join(tracks, on=_KEY_COLS, how="left", nulls_equal=True)
        yield from event_lines(_chrome(block, layout, cols))


_KEY_COLS = ["rank", "on_gpu", "device", "stream", "pid", "tid", "kind", "lane"]
#: GPU kinds drawn on a track of their own beside their stream's work: sync records overlap
#: the work they wait for, GPU annotations span it.
_GPU_SUB = {"gpu_sync": "syncs", "gpu_annotation": "annotations"}
#: A stream id at or above this is a device-wide record (CUPTI's 0xFFFFFFFF).
_ALL_STREAMS = 1 << 31


def _lanes(rows: pl.DataFrame) -> list[int]:
    """The lane of each row within its track: 0, except where slices of a track overlap
    without nesting (NVTX start/end ranges; work a broken trace records overlapping on one
    stream): there each slice goes to the first lane where it nests (greedy in start order,
    longer first). Tracks with any overlap are found vectorised (a start before the running
    latest end); only their rows are walked in Python."""
    group = (
        pl.when(pl.col("on_gpu"))
        .then(pl.col("kind").replace_strict(_GPU_SUB, default="", return_dtype=pl.String))
        .otherwise(pl.col("kind").replace_strict(HOST_GROUPS, default="other"))
    )
    key = ["rank", "on_gpu", "device", "gstream", "pid_", "tid_", "group"]
    frame = (
        rows.with_row_index("i")
        .with_columns(
            group.alias("group"),
            pl.when(pl.col("on_gpu")).then(pl.col("stream")).otherwise(0).alias("gstream"),
            pl.when(pl.col("on_gpu")).then(0).otherwise(pl.col("pid")).alias("pid_"),
            pl.when(pl.col("on_gpu")).then(0).otherwise(pl.col("tid")).alias("tid_"),
            (pl.col("start_ns") + pl.col("dur_ns")).alias("end_ns"),
        )
        .sort([*key, "start_ns", "end_ns"], descending=[False] * 8 + [True], nulls_last=True)
    )
    latest = pl.col("end_ns").cum_max().shift(1).over(key)
    frame = frame.with_columns((pl.col("start_ns") < latest).fill_null(False).alias("inside"))
    crowded = frame.filter(pl.col("inside").any().over(key))
    lanes = [0] * rows.height
    open_ends: list[list[int]] = []
    last: tuple[object, ...] = ()
    for row in crowded.select("i", *key, "start_ns", "end_ns").iter_rows():
        i, track, start, end = row[0], row[1:-2], row[-2], row[-1]
        if track != last:
            open_ends, last = [], track
        for lane, stack in enumerate([*open_ends, []]):
            while stack and stack[-1] <= start:
                stack.pop()
            if not stack or end <= stack[-1]:
                if lane == len(open_ends):
                    open_ends.append(stack)
                stack.append(end)
                lanes[i] = lane
                break
    return lanes


def _tracks(rows: pl.DataFrame, layout: Layout) -> pl.DataFrame:
    """(pid, tid) of every distinct track key, named in the layout (a Python loop over tracks,
    never over events)."""
    keys = rows.select(_KEY_COLS).unique(maintain_order=True)
    out: list[tuple[int, int]] = []
    for rank, on_gpu, device, stream, pid, tid, kind, lane in keys.iter_rows():
        key: TrackKey
        if on_gpu:
            sub = (_GPU_SUB[kind],) if kind in _GPU_SUB else ()
            key = ("gpu", int(device), int(stream), *sub, *((lane,) if lane else ()))
            label = "all streams" if stream >= _ALL_STREAMS else f"stream {stream}"
            name = " · ".join([*([f"GPU {device}"] if layout.job else []), label, *sub])
        else:
            key = layout.host_key(int(pid), int(tid), str(kind)) + ((lane,) if lane else ())
            group = key[3] if len(key) > 3 else ""
            name = f"pid {pid} · thread {tid}" + (f" · {group}" if group else "")
        name += f" ({lane + 1})" if lane else ""
        layout.name_track(int(rank), key, name)
        out.append(layout.pid_tid(int(rank), key))
    return keys.with_columns(
        pl.Series("out_pid", [p for p, _ in out], pl.Int64),
        pl.Series("out_tid", [t for _, t in out], pl.Int64),
    )


def _chrome(block: pl.DataFrame, layout: Layout, cols: set[str]) -> pl.DataFrame:
    """The Chrome event columns of a block of rows joined to their tracks."""
    shift = pl.col("rank").replace_strict(layout.shift_ns, default=0, return_dtype=pl.Int64)
    instant = (pl.col("kind") == "marker") & (pl.col("dur_ns") == 0)
    extra = [pl.col(c) for c in ("correlation", "bytes") if c in cols]
    return block.select(
        pl.when(instant).then(pl.lit("i")).otherwise(pl.lit("X")).alias("ph"),
        pl.col("out_pid").alias("pid"),
        pl.col("out_tid").alias("tid"),
        (pl.col("start_ns") - shift).alias("ts_ns"),
        pl.when(instant).then(None).otherwise(pl.col("dur_ns")).alias("dur_ns"),
        pl.col("name"),
        pl.col("category").fill_null(pl.col("kind")).alias("cat"),
        pl.when(instant).then(pl.lit("t")).otherwise(None).alias("s"),
        pl.struct(pl.col("kind"), *extra).alias("args"),
    )
