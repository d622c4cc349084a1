"""The unified event table: one schema for every input format.

Every ingester produces a polars DataFrame with exactly these columns, in this order, with these
dtypes. Times are integer nanoseconds (``start_ns``, ``dur_ns``); ``end_ns`` is derived as
``start_ns + dur_ns`` and is not stored. Absolute times are on the trace's own clock: Kineto
epoch ns (``baseTimeNanoseconds`` already added), Nsight Systems session-relative ns.

Columns
-------
event_id     Int64       unique row id within a session; the side table ``args`` is keyed by it
kind         Enum KINDS  what the row is (see ``KINDS``)
start_ns     Int64       start, ns
dur_ns       Int64       duration, ns, >= 0
rank         Int32       distributed rank (0 when unknown)
device       Int32       GPU index for GPU rows; null for host rows
stream       Int64       GPU stream (or queue) id; null for host rows
pid          Int64       OS process id for host rows; for GPU rows the recording process if known
tid          Int64       OS thread id for host rows; null for GPU rows
name         Categorical event name (kernel name, op name, API name without version suffix)
category     Categorical the source's own category (Kineto ``cat``, nsys table name)
correlation  Int64       launch <-> GPU activity link (CUPTI correlation id); null when none
external_id  Int64       Kineto ``External id`` (CPU op <-> runtime call); null when none
bytes        Int64       bytes moved (memcpy/memset) or null
copy_kind    Enum COPY_KINDS   direction of a memcpy; null for other rows
src_mem      Enum MEM_KINDS    source memory kind of a memcpy; null for other rows
dst_mem      Enum MEM_KINDS    destination memory kind of a memcpy/memset; null for other rows
grid         List(Int32) kernel grid (x, y, z); null for other rows
block        List(Int32) kernel block (x, y, z); null for other rows
is_comm      Boolean     collective / peer communication GPU or host work (kernels: ``model.comm``)
"""

from __future__ import annotations

from typing import Final

import polars as pl

# Stable kind ids. Add to the end; never rename (they appear in saved sessions and JSON).
KINDS: Final[tuple[str, ...]] = (
    "kernel",  # GPU kernel execution
    "memcpy",  # GPU copy (any direction)
    "memset",  # GPU memset
    "gpu_sync",  # synchronization record (CUPTI sync activity, Kineto cuda_sync)
    "gpu_annotation",  # GPU-side user annotation (Kineto gpu_user_annotation)
    "cuda_api",  # CUDA/HIP runtime or driver API call on a host thread
    "cpu_op",  # framework operator (aten::*, Kineto cpu_op/Operator)
    "annotation",  # user or NVTX range on a host thread (incl. ProfilerStep#N)
    "python",  # Python function (Kineto python_function)
    "os_call",  # OS runtime call (nsys OSRT_API)
    "overhead",  # profiler overhead interval
    "marker",  # instant event (dur 0)
    "cuda_graph",  # CUDA graph launch / replay record
)
#: Kinds whose intervals make a device busy. Sync records are waits, not work. A graph-level
#: record (``cuda_graph``: a whole graph launch when its nodes were not traced) is work.
BUSY_KINDS: Final[tuple[str, ...]] = ("kernel", "memcpy", "memset", "cuda_graph")
#: The classes a device's busy time is split into (``devices[].busy_by_kind`` keys and the
#: ``busy.<class>`` figures: a JSON contract, docs/json-output.md), in report order:
#: ``communication`` is any op flagged as collective/peer communication, ``kernel`` every
#: other kernel (``cuda_graph`` records included), then copies and memsets.
BUSY_CLASSES: Final[tuple[str, ...]] = ("kernel", "communication", "memcpy", "memset")

COPY_KINDS: Final[tuple[str, ...]] = ("h2d", "d2h", "d2d", "h2h", "p2p", "unknown")
MEM_KINDS: Final[tuple[str, ...]] = (
    "pageable",
    "pinned",
    "device",
    "managed",
    "array",
    "unknown",
)

KIND_DTYPE: Final = pl.Enum(list(KINDS))
COPY_KIND_DTYPE: Final = pl.Enum(list(COPY_KINDS))
MEM_KIND_DTYPE: Final = pl.Enum(list(MEM_KINDS))

EVENT_SCHEMA: Final[dict[str, pl.DataType]] = {
    "event_id": pl.Int64(),
    "kind": KIND_DTYPE,
    "start_ns": pl.Int64(),
    "dur_ns": pl.Int64(),
    "rank": pl.Int32(),
    "device": pl.Int32(),
    "stream": pl.Int64(),
    "pid": pl.Int64(),
    "tid": pl.Int64(),
    "name": pl.Categorical(),
    "category": pl.Categorical(),
    "correlation": pl.Int64(),
    "external_id": pl.Int64(),
    "bytes": pl.Int64(),
    "copy_kind": COPY_KIND_DTYPE,
    "src_mem": MEM_KIND_DTYPE,
    "dst_mem": MEM_KIND_DTYPE,
    "grid": pl.List(pl.Int32()),
    "block": pl.List(pl.Int32()),
    "is_comm": pl.Boolean(),
}
#: Columns that may never be null.
REQUIRED_COLUMNS: Final[tuple[str, ...]] = (
    "event_id",
    "kind",
    "start_ns",
    "dur_ns",
    "rank",
    "name",
    "is_comm",
)

#: Side table of per-event arguments analyses need (shapes, dtypes, collective sizes, stacks).
#: Long format: one row per (event, key); ``value`` is the JSON text of the original value.
ARGS_SCHEMA: Final[dict[str, pl.DataType]] = {
    "event_id": pl.Int64(),
    "key": pl.Categorical(),
    # categorical: a trace repeats the same few hundred shapes and call stacks hundreds of
    # thousands of times (a call stack is ~800 bytes); stored once each, not per row
    "value": pl.Categorical(),
}

# Well-known arg keys (Kineto spelling; the nsys ingester maps its NVTX shapes onto them).
ARG_INPUT_DIMS: Final = "Input Dims"
ARG_INPUT_TYPE: Final = "Input type"
ARG_CONCRETE_INPUTS: Final = "Concrete Inputs"
ARG_SEQUENCE: Final = "Sequence number"


def empty_events() -> pl.DataFrame:
    """An event table with no rows and the full schema."""
    return pl.DataFrame(schema=EVENT_SCHEMA)


def empty_args() -> pl.DataFrame:
    """An args side table with no rows."""
    return pl.DataFrame(schema=ARGS_SCHEMA)


def conform_events(frame: pl.DataFrame) -> pl.DataFrame:
    """Add missing columns as nulls, cast to the declared dtypes and order the columns.

    Ingesters build only the columns they know; this makes every table identical in shape.
    ``is_comm`` defaults to False, not null.
    """
    exprs: list[pl.Expr] = []
    for col, dtype in EVENT_SCHEMA.items():
        if col in frame.columns:
            exprs.append(pl.col(col).cast(dtype))
        elif col == "is_comm":
            exprs.append(pl.lit(False, dtype=pl.Boolean()).alias(col))
        else:
            exprs.append(pl.lit(None, dtype=dtype).alias(col))
    return frame.select(exprs)


def conform_args(frame: pl.DataFrame) -> pl.DataFrame:
    """Cast an args table to ``ARGS_SCHEMA``."""
    return frame.select([pl.col(c).cast(t) for c, t in ARGS_SCHEMA.items()])
