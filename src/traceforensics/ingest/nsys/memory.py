"""``CUDA_GPU_MEMORY_USAGE_EVENTS`` (``nsys profile --cuda-memory-usage=true``) -> ``[memory]``
marker rows, the same form as Kineto's ``profile_memory=True`` instant events.

Rules (one row per table row, no per-event Python loop):

- ``kind = marker``, ``name = "[memory]"``, ``dur_ns = 0``, ``category`` = the table name,
  ``pid`` from ``globalPid`` (``tid`` null: the table records no thread), ``device`` null
  (a host row, like Kineto's instant); the device is the ``Device Id`` arg; ``correlation``
  = ``correlationId`` (0 or NULL: none), which names the allocating runtime call (and so its
  thread: ``analysis.memory.timeline``).
- args (Kineto spelling, ``model.memory_args``): ``Device Type`` 1 (CUDA), ``Device Id``
  = ``deviceId``, ``Bytes`` = ``bytes`` for an allocation (``memoryOperationType`` 0) and
  ``-bytes`` for a deallocation (1: Kineto writes a free as negative bytes).
- Only device memory: rows whose ``memKind`` (``ENUM_CUDA_MEM_KIND``, by name; the documented
  numbering without the table) is ``DEVICE`` or ``DEVICE_STATIC``; pinned/pageable host memory
  and managed memory are dropped (all rows kept when the column is absent).
- A table without ``memoryOperationType`` is skipped with a warning (a free would read as an
  allocation).
- ``Total Allocated``: the table holds no totals, so it is the running sum of ``Bytes`` per
  (process, device) in time order (ties: table order), from 0 at the first recorded event,
  lifted by ``max(0, -min(running sum))``: when frees of memory allocated before the capture
  come first, at least that much was allocated then (never a negative total).
  CUDA's allocations are what a framework's caching allocator *reserves*, so nsys cannot tell
  allocated from reserved: ``Total Reserved`` is not written (``analysis.memory`` then reads
  reserved = allocated, and labels the rows as segments).
"""

from __future__ import annotations

import warnings

import polars as pl

from traceforensics.ingest.nsys.common import Part, col_sql, pid_sql, with_row
from traceforensics.ingest.nsys.db import ExportDb
from traceforensics.ingest.nsys.enums import MEM_KINDS, enum_names
from traceforensics.model.memory_args import (
    ARG_MEM_ALLOCATED,
    ARG_MEM_BYTES,
    ARG_MEM_DEVICE_ID,
    ARG_MEM_DEVICE_TYPE,
)
from traceforensics.model.schema import KIND_DTYPE

MEMORY_USAGE = "CUDA_GPU_MEMORY_USAGE_EVENTS"
#: The name of every memory marker row (Kineto's spelling).
MEMORY_EVENT = "[memory]"
#: ``ENUM_CUDA_DEV_MEM_EVENT_OPER``: 1 = DEALLOCATION (0 = ALLOCATION).
_DEALLOCATION = 1
_CUDA_DEVICE_TYPE = 1
#: The warning when the table cannot tell a free from an allocation (it is then skipped).
MISSING_OPERATION = (
    f"{MEMORY_USAGE} has no memoryOperationType column: frees cannot be told from allocations,"
    " so the memory usage table is skipped (no memory over time for this export)"
)


def memory_events(db: ExportDb) -> Part | None:
    """The memory usage table as ``[memory]`` marker rows with their args (module docstring);
    None when the table is absent (memory usage not recorded)."""
    cols = db.columns(MEMORY_USAGE)
    if "start" not in cols:
        return None
    if "memoryOperationType" not in cols:
        # without it a free cannot be told from an allocation: totals would be wrong
        warnings.warn(MISSING_OPERATION, stacklevel=2)
        return None
    t = MEMORY_USAGE
    exprs = {
        "start_ns": "start",
        "pid": pid_sql(db, t, "globalPid"),
        "_dev": col_sql(db, t, "deviceId"),
        "_bytes": col_sql(db, t, "bytes"),
        "_op": col_sql(db, t, "memoryOperationType"),
        "_corr": col_sql(db, t, "correlationId"),
        "_kind": col_sql(db, t, "memKind"),
    }
    frame = db.read_ints(t, exprs).filter(pl.col("start_ns").is_not_null())
    if "memKind" in cols:  # host (pinned, pageable) and managed memory are not the device's
        kinds = enum_names(db, "ENUM_CUDA_MEM_KIND")
        device = [k for k, n in kinds.items() if MEM_KINDS.get(n, ("",))[0] == "device"]
        frame = frame.filter(pl.col("_kind").is_in(device))
    signed = (
        pl.when(pl.col("_op") == _DEALLOCATION).then(-pl.col("_bytes")).otherwise(pl.col("_bytes"))
    ).fill_null(0)
    # a free before any allocation (memory allocated before the capture): the running sum is
    # lifted so that it never goes below 0 (at least that much was allocated then)
    lifted = pl.col("_total") + (-pl.col("_total").min()).clip(lower_bound=0).over(["pid", "_dev"])
    frame = (
        frame.with_row_index("_order")
        .with_columns(signed.alias("_signed"))
        .sort("start_ns", "_order")
        .with_columns(pl.col("_signed").cum_sum().over(["pid", "_dev"]).alias("_total"))
        .with_columns(lifted.alias("_total"))
        .sort("_order")
        .drop("_order")
    )
    frame = with_row(frame)
    events = frame.select(
        "_row",
        "start_ns",
        pl.lit(0, dtype=pl.Int64()).alias("dur_ns"),
        "pid",
        pl.when(pl.col("_corr") != 0).then(pl.col("_corr")).alias("correlation"),
        pl.lit("marker", dtype=KIND_DTYPE).alias("kind"),
        pl.lit(MEMORY_EVENT, dtype=pl.Categorical()).alias("name"),
        pl.lit(t, dtype=pl.Categorical()).alias("category"),
    )
    args = [
        _arg(frame, ARG_MEM_DEVICE_TYPE, pl.lit(_CUDA_DEVICE_TYPE).cast(pl.String)),
        _arg(frame, ARG_MEM_DEVICE_ID, pl.col("_dev").cast(pl.String)),
        _arg(frame, ARG_MEM_BYTES, pl.col("_signed").cast(pl.String)),
        _arg(frame, ARG_MEM_ALLOCATED, pl.col("_total").cast(pl.String)),
    ]
    return Part(events, args)


def _arg(frame: pl.DataFrame, key: str, value: pl.Expr) -> pl.DataFrame:
    """Args rows ``(_row, key, value)`` (integers as JSON text), skipping null values."""
    return frame.select(pl.col("_row"), pl.lit(key).alias("key"), value.alias("value")).filter(
        pl.col("value").is_not_null()
    )
