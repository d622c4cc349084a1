"""GPU activity tables -> ``kernel``, ``memcpy``, ``memset``, ``gpu_sync``, ``cuda_graph`` rows.

Common rules: ``device = deviceId``, ``stream = streamId``, ``pid`` = the process of
``globalPid`` (so ``(pid, correlation)`` links a GPU row to its launching API call in the same
process), ``tid`` null, ``dur_ns = max(end - start, 0)``. Negative starts (work before the
capture-range start) are kept as they are: they are valid session-relative times.
"""

from __future__ import annotations

import polars as pl

from traceforensics.ingest.nsys import enums
from traceforensics.ingest.nsys.common import (
    ARG_GRAPH_ID,
    ARG_SHORT_NAME,
    ARG_SYNC_TYPE,
    Part,
    Strings,
    arg_rows,
    col_sql,
    json_text,
    packed3_sql,
    packed_pid_corr_sql,
    unpack3,
    unpack_pid_corr,
    with_row,
)
from traceforensics.ingest.nsys.db import ExportDb
from traceforensics.model.comm import COMM_KERNEL_RE, NOT_COMM_KERNEL_RE
from traceforensics.model.schema import KIND_DTYPE

KERNEL = "CUPTI_ACTIVITY_KIND_KERNEL"
MEMCPY = "CUPTI_ACTIVITY_KIND_MEMCPY"
MEMSET = "CUPTI_ACTIVITY_KIND_MEMSET"
SYNC = "CUPTI_ACTIVITY_KIND_SYNCHRONIZATION"
GRAPH = "CUPTI_ACTIVITY_KIND_GRAPH_TRACE"


def _base_exprs(db: ExportDb, table: str, extra: dict[str, str]) -> dict[str, str]:
    device, stream = col_sql(db, table, "deviceId"), col_sql(db, table, "streamId")
    return {
        "start_ns": "start",
        "end_ns": "end",
        "_dev_stream": f"(({stream} << 16) | {device})",
        "_pid_corr": packed_pid_corr_sql(db, table, "globalPid"),
        **extra,
    }


def _base(db: ExportDb, table: str, extra: dict[str, str]) -> pl.DataFrame:
    """Shared GPU columns, read packed (see ``common``) and unpacked here."""
    exprs = _base_exprs(db, table, extra)
    frame = db.read_ints(table, exprs).filter(pl.col("start_ns").is_not_null())
    dur = (pl.col("end_ns") - pl.col("start_ns")).clip(lower_bound=0).fill_null(0)
    return frame.with_columns(
        dur.alias("dur_ns"),
        (pl.col("_dev_stream") % (1 << 16)).alias("device"),
        (pl.col("_dev_stream") // (1 << 16)).alias("stream"),
        *unpack_pid_corr("_pid_corr"),
        pl.lit(table, dtype=pl.Categorical()).alias("category"),
    ).drop("end_ns", "_dev_stream", "_pid_corr")


def _kernel_extra(db: ExportDb) -> dict[str, str]:
    demangled = col_sql(db, KERNEL, "demangledName")
    short = col_sql(db, KERNEL, "shortName")
    extra = {"_names": f"((ifnull({demangled}, 0) << 32) | ifnull({short}, 0))"}
    if {"gridX", "gridY", "gridZ", "blockX", "blockY", "blockZ"} <= set(db.columns(KERNEL)):
        extra["_grid"] = packed3_sql("gridX", "gridY", "gridZ")
        extra["_block"] = packed3_sql("blockX", "blockY", "blockZ")
    return extra


def prefetch_kernels(db: ExportDb) -> None:
    """Start the bulk read that ``kernels`` will use (see ``ExportDb.prefetch``)."""
    db.prefetch(KERNEL, _base_exprs(db, KERNEL, _kernel_extra(db)))


def kernels(db: ExportDb, strings: Strings) -> Part | None:
    """Name = demangled name (Kineto's spelling) else short name; the short name goes to args.
    ``is_comm`` by name, with the rule of ``model.comm``."""
    if not db.has(KERNEL):
        return None
    extra = _kernel_extra(db)
    has_launch = "_grid" in extra
    frame = _base(db, KERNEL, extra)
    # Resolve the few distinct name pairs once, then join them onto every kernel row.
    ids = (
        frame.select("_names")
        .unique()
        .with_columns(
            (pl.col("_names") // (1 << 32)).alias("_demangled"),
            (pl.col("_names") % (1 << 32)).alias("_short"),
        )
    )
    ids = strings.attach(strings.attach(ids, "_demangled", "_dname"), "_short", "_sname")
    ids = ids.with_columns(
        pl.coalesce("_dname", "_sname", pl.lit("<unnamed kernel>")).alias("name")
    ).with_columns(
        # model.comm's rule, applied as model.comm.is_comm_kernel does: blank out intra-block
        # all-reduce helpers, then match the communication regex
        pl.col("name")
        .str.replace_all(NOT_COMM_KERNEL_RE, " ")
        .str.contains(COMM_KERNEL_RE)
        .alias("is_comm"),
        pl.when(pl.col("_sname") != pl.col("name")).then(pl.col("_sname_json")).alias("_sarg"),
        # categorical on the small table: the big join then carries codes, not strings
        pl.col("name").cast(pl.Categorical()),
    )
    frame = with_row(
        frame.join(
            ids.select("_names", "name", "is_comm", "_sarg"),
            on="_names",
            how="left",
            nulls_equal=True,
            maintain_order="left",
        )
    )
    args = [arg_rows(frame, ARG_SHORT_NAME, "_sarg")]
    launch = (
        [unpack3(frame["_grid"]).alias("grid"), unpack3(frame["_block"]).alias("block")]
        if has_launch
        else []
    )
    events = frame.with_columns(pl.lit("kernel", dtype=KIND_DTYPE).alias("kind"), *launch)
    return Part(_drop_private(events), args)


def memcpys(db: ExportDb) -> Part | None:
    """Copy and memory kinds via ENUM tables; name ``Memcpy HtoD (Pinned -> Device)``."""
    if not db.has(MEMCPY):
        return None
    extra = {
        "bytes": col_sql(db, MEMCPY, "bytes"),
        "_op": col_sql(db, MEMCPY, "copyKind"),
        "_src": col_sql(db, MEMCPY, "srcKind"),
        "_dst": col_sql(db, MEMCPY, "dstKind"),
    }
    frame = _base(db, MEMCPY, extra)
    ops = enums.enum_names(db, "ENUM_CUDA_MEMCPY_OPER")
    mems = enums.enum_names(db, "ENUM_CUDA_MEM_KIND")
    kind_of = {k: v[0] for k, v in enums.COPY_OPS.items()}
    text_of = {k: v[1] for k, v in enums.COPY_OPS.items()}
    mem_of = {k: v[0] for k, v in enums.MEM_KINDS.items()}
    label_of = {k: v[1] for k, v in enums.MEM_KINDS.items()}
    for table in (
        enums.lookup(ops, kind_of, "_op", "copy_kind"),
        enums.lookup(ops, text_of, "_op", "_dir"),
        enums.lookup(mems, mem_of, "_src", "src_mem"),
        enums.lookup(mems, label_of, "_src", "_src_label"),
        enums.lookup(mems, mem_of, "_dst", "dst_mem"),
        enums.lookup(mems, label_of, "_dst", "_dst_label"),
    ):
        frame = frame.join(table, on=table.columns[0], how="left", maintain_order="left")
    name = pl.concat_str(
        pl.lit("Memcpy "),
        pl.col("_dir").fill_null("Unknown"),
        pl.lit(" ("),
        pl.col("_src_label").fill_null("Unknown"),
        pl.lit(" -> "),
        pl.col("_dst_label").fill_null("Unknown"),
        pl.lit(")"),
    )
    events = frame.with_columns(
        pl.lit("memcpy").alias("kind"),
        name.alias("name"),
        pl.col("copy_kind").fill_null("unknown"),
        pl.col("src_mem").fill_null("unknown"),
        pl.col("dst_mem").fill_null("unknown"),
    )
    return Part(_drop_private(events))


def memsets(db: ExportDb) -> Part | None:
    """Memory kind into ``dst_mem``; name ``Memset (Device)``."""
    if not db.has(MEMSET):
        return None
    extra = {"bytes": col_sql(db, MEMSET, "bytes"), "_dst": col_sql(db, MEMSET, "memKind")}
    frame = _base(db, MEMSET, extra)
    mems = enums.enum_names(db, "ENUM_CUDA_MEM_KIND")
    mem_of = {k: v[0] for k, v in enums.MEM_KINDS.items()}
    label_of = {k: v[1] for k, v in enums.MEM_KINDS.items()}
    for table in (
        enums.lookup(mems, mem_of, "_dst", "dst_mem"),
        enums.lookup(mems, label_of, "_dst", "_label"),
    ):
        frame = frame.join(table, on="_dst", how="left", maintain_order="left")
    events = frame.with_columns(
        pl.lit("memset").alias("kind"),
        pl.concat_str(pl.lit("Memset ("), pl.col("_label").fill_null("Unknown"), pl.lit(")")).alias(
            "name"
        ),
        pl.col("dst_mem").fill_null("unknown"),
    )
    return Part(_drop_private(events))


def syncs(db: ExportDb) -> Part | None:
    """``gpu_sync`` rows named like Kineto (``Stream Sync``); the nsys sync type in args."""
    if not db.has(SYNC):
        return None
    frame = _base(db, SYNC, {"_type": col_sql(db, SYNC, "syncType", "deprecatedSyncType")})
    types = enums.enum_names(db, "ENUM_CUPTI_SYNC_TYPE")
    names = {t: enums.SYNC_NAMES.get(n, "Unknown Sync") for t, n in types.items()}
    type_table = pl.DataFrame(
        {
            "_type": list(types),
            "name": [names[t] for t in types],
            "_type_json": json_text(list(types.values())),
        },
        schema={"_type": pl.Int64(), "name": pl.String(), "_type_json": pl.String()},
    )
    frame = with_row(frame.join(type_table, on="_type", how="left", maintain_order="left"))
    events = frame.with_columns(
        pl.lit("gpu_sync").alias("kind"), pl.col("name").fill_null("Unknown Sync")
    )
    return Part(_drop_private(events), [arg_rows(frame, ARG_SYNC_TYPE, "_type_json")])


def graphs(db: ExportDb) -> Part | None:
    """Graph-level launches (``--cuda-graph-trace=graph``) as ``cuda_graph`` rows."""
    if not db.has(GRAPH):
        return None
    frame = with_row(_base(db, GRAPH, {"_graph": col_sql(db, GRAPH, "graphId")}))
    frame = frame.with_columns(pl.col("_graph").cast(pl.String).alias("_graph_json"))
    events = frame.with_columns(
        pl.lit("cuda_graph").alias("kind"),
        pl.concat_str(pl.lit("CUDA Graph "), pl.col("_graph_json").fill_null("?")).alias("name"),
    )
    return Part(_drop_private(events), [arg_rows(frame, ARG_GRAPH_ID, "_graph_json")])


def _drop_private(frame: pl.DataFrame) -> pl.DataFrame:
    """Drop helper columns (``_x``) except the ``_row`` link to args."""
    return frame.drop([c for c in frame.columns if c.startswith("_") and c != "_row"])
