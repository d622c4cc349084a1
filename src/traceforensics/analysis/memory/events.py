"""The allocator's ``[memory]`` events as one table (``memory_rows``).

Both readers give the same form: marker rows named ``[memory]`` with the args ``Bytes``
(negative = a free), ``Total Allocated`` and ``Total Reserved`` (the allocator's totals
*after* the event, bytes), ``Device Type`` (0 CPU, 1 CUDA; other values: other devices) and
``Device Id``. Kineto writes them with ``profile_memory=True``; the nsys reader builds them from
``CUDA_GPU_MEMORY_USAGE_EVENTS`` (no ``Total Reserved`` there: ``ingest.nsys.memory``).

Rules:

- Records: one per (rank, ``Device Type``, device): a ``Device Type`` other than 0/1 with
  ``Device Id`` 0 is its own record, never CUDA device 0's.
- ``device``: the ``Device Id`` of a GPU event; every CPU event (``Device Type`` 0) is the one
  pseudo-device ``CPU_DEVICE`` (-1, which is also Kineto's own ``Device Id`` for the CPU).
- ``reserved_known``: the event carries ``Total Reserved`` and comes from a caching allocator
  (``Device Type`` 1, ``CACHING_TYPE``). The CPU allocator does not cache (Kineto writes
  ``Total Reserved`` 0), other device types are not known to, and nsys records none: for
  those rows ``total_reserved`` is set to ``total_allocated``.
- ``segments``: nsys's rows (category ``CUDA_GPU_MEMORY_USAGE_EVENTS``; where the session
  dropped the category column, the rows without a thread): the driver's allocations, i.e.
  what a caching allocator reserves.
- ``totals_recorded``: the device's events carry ``Total Allocated``. PyTorch 1.8/1.9 wrote
  ``Bytes`` only: then ``total_allocated`` is the running sum of ``Bytes`` in time order (per
  process, then summed as below),
  lifted by ``max(0, -min(running sum))`` so it never goes below 0 (frees of memory allocated
  before the capture came first: at least that much was allocated then), and reserved is not
  known. On a device with recorded totals, an event without one (a damaged row) is dropped. A
  missing ``Bytes`` is 0.
- Several processes on one device (two pids in Kineto, two ``globalPid`` in nsys): each
  process's totals are its own allocator's, so per (device, pid) each total's change from
  the process's previous event is taken (the first event: its whole total) and summed over
  the device in time order: the device's totals are the sum of every process's latest.
- ``allocated_before_bytes`` (on the first row of each process, 0 elsewhere): that process's
  first total minus its first ``Bytes`` (never below 0): allocated before the capture.
- The args are read by one pivot of the args table (the first value per key).
"""

from __future__ import annotations

from typing import Final

import polars as pl

from traceforensics.model.memory_args import (
    ARG_MEM_ALLOCATED,
    ARG_MEM_BYTES,
    ARG_MEM_DEVICE_ID,
    ARG_MEM_DEVICE_TYPE,
    ARG_MEM_RESERVED,
)
from traceforensics.model.session import TraceSession

MEMORY_EVENT: Final = "[memory]"
#: The ``device`` of the CPU's memory events (Kineto's ``Device Id`` for the CPU).
CPU_DEVICE: Final = -1
CPU_TYPE: Final = 0
#: The ``Device Type`` of a caching allocator's device (CUDA, and ROCm's HIP, which PyTorch
#: reports as CUDA): the only type whose ``Total Reserved`` means a cache.
CACHING_TYPE: Final = 1
#: The category of the nsys reader's rows: driver segments (what a caching allocator reserves).
SEGMENT_CATEGORY: Final = "CUDA_GPU_MEMORY_USAGE_EVENTS"
_KEYS: Final = {
    ARG_MEM_BYTES: "bytes",
    ARG_MEM_ALLOCATED: "total_allocated",
    ARG_MEM_RESERVED: "total_reserved",
    ARG_MEM_DEVICE_TYPE: "device_type",
    ARG_MEM_DEVICE_ID: "device_id",
}
#: Columns of ``memory_rows`` (bytes and ns are Int64).
MEMORY_SCHEMA: Final[dict[str, pl.DataType]] = {
    "event_id": pl.Int64(),
    "rank": pl.Int32(),
    "device": pl.Int32(),
    "device_type": pl.Int64(),
    "pid": pl.Int64(),
    "tid": pl.Int64(),
    "start_ns": pl.Int64(),
    "correlation": pl.Int64(),
    "bytes": pl.Int64(),
    "total_allocated": pl.Int64(),
    "total_reserved": pl.Int64(),
    "reserved_known": pl.Boolean(),
    "totals_recorded": pl.Boolean(),
    "segments": pl.Boolean(),
    "allocated_before_bytes": pl.Int64(),
}
_TOTALS: Final = ("total_allocated", "total_reserved")


def _int(col: str) -> pl.Expr:
    """A JSON number's text as Int64 (``256``, ``256.0``); null when it is not a number."""
    return pl.col(col).cast(pl.String).cast(pl.Float64, strict=False).round(0).cast(pl.Int64)


def memory_rows(session: TraceSession) -> pl.DataFrame:
    """Every ``[memory]`` event (``MEMORY_SCHEMA``), sorted by (rank, device_type, device,
    start_ns, event_id): the totals of each row are those after it (module docstring)."""
    # categorical columns compared with literals directly (no cast of the whole table)
    marks = session.events.filter((pl.col("kind") == "marker") & (pl.col("name") == MEMORY_EVENT))
    if marks.height == 0:
        return pl.DataFrame(schema=MEMORY_SCHEMA)
    # nsys's rows: by their category; where the session dropped that column (``tf analyze``
    # keeps only the columns it reads), by what only they lack: a thread
    if "category" in marks.columns:
        # (a Kineto event has no category: null is not nsys's)
        segments = (pl.col("category").cast(pl.String) == SEGMENT_CATEGORY).fill_null(False)
    else:
        segments = pl.col("tid").is_null()
    marks = marks.select(
        "event_id", "rank", "pid", "tid", "start_ns", "correlation", segments.alias("segments")
    )
    # one pivot of the args (first value per key), not one join per key
    args = (
        session.args.filter(pl.col("key").is_in(list(_KEYS)))
        .filter(pl.col("event_id").is_in(marks.get_column("event_id").implode()))
        .select("event_id", pl.col("key").cast(pl.String).replace_strict(_KEYS), _int("value"))
        .pivot("key", index="event_id", values="value", aggregate_function="first")
    )
    for col in _KEYS.values():
        if col not in args.columns:
            args = args.with_columns(pl.lit(None, pl.Int64()).alias(col))
    wide = marks.join(args, on="event_id", how="left")
    dtype = pl.col("device_type").fill_null(1)
    cpu = dtype == CPU_TYPE
    device = pl.when(cpu).then(CPU_DEVICE).otherwise(pl.col("device_id").fill_null(0))
    wide = wide.with_columns(
        device.alias("device"), dtype.alias("device_type"), pl.col("bytes").fill_null(0)
    ).sort("rank", "device_type", "device", "start_ns", "event_id")
    # one integer id per (rank, device_type, device) and per (that, pid): the windows below
    # hash one column instead of three or four (the rows are sorted by the group)
    wide = wide.with_columns(
        _g=pl.struct("rank", "device_type", "device").rle_id(),
    ).with_columns(_p=pl.struct("_g", "pid").hash())
    recorded = pl.col("total_allocated").is_not_null().any().over("_g")
    # no totals: a running sum, lifted so that it never goes below 0 (frees of memory
    # allocated before the capture came first: at least that much was allocated then)
    running = pl.col("bytes").cum_sum().over("_p")  # per process: summed below
    running = running + (-running.min()).clip(lower_bound=0).over("_p")
    known = (dtype == CACHING_TYPE) & pl.col("total_reserved").is_not_null() & ~pl.col("segments")
    lazy = (
        wide.lazy()
        .with_columns(
            pl.when(recorded).then(pl.col("total_allocated")).otherwise(running),
            recorded.alias("totals_recorded"),
        )
        .filter(pl.col("total_allocated").is_not_null())
        .with_columns(
            pl.when(known).then(pl.col("total_reserved")).otherwise(pl.col("total_allocated")),
            known.alias("reserved_known"),
        )
    )
    # several processes on one device: each process's totals are its own allocator's, so the
    # device's are the sum: per process the change of each total, summed over the device
    first = pl.int_range(pl.len()).over("_p") == 0
    before = pl.col("total_allocated") - pl.col("bytes")
    lazy = (
        lazy.with_columns(
            pl.when(first).then(before.clip(lower_bound=0)).otherwise(0).alias("_pre"),
            *(pl.col(c).diff().over("_p").fill_null(pl.col(c)).alias(c) for c in _TOTALS),
        )
        .with_columns(pl.col(c).cum_sum().over("_g") for c in _TOTALS)
        .rename({"_pre": "allocated_before_bytes"})
    )
    # still in (rank, device_type, device, start_ns, event_id) order
    return lazy.select(pl.col(c).cast(t) for c, t in MEMORY_SCHEMA.items()).collect()
