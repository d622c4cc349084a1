"""Host-thread tables -> ``cuda_api``, ``os_call`` and ``overhead`` rows.

Rules: ``pid``/``tid`` decoded from ``globalTid``; ``device``/``stream`` null;
``dur_ns = max(end - start, 0)``. CUDA runtime *and* driver calls share
``CUPTI_ACTIVITY_KIND_RUNTIME`` (told apart by ``eventClass``); their versioned names
(``cudaStreamSynchronize_v3020``) are normalized by dropping the ``_vNNNN`` suffix, and the
original name is kept under the ``api name`` arg.
"""

from __future__ import annotations

import polars as pl

from traceforensics.ingest.nsys.common import (
    ARG_API_NAME,
    Part,
    Strings,
    arg_rows,
    col_sql,
    packed_ptid_sql,
    unpack_ptid,
    with_row,
)
from traceforensics.ingest.nsys.db import ExportDb
from traceforensics.model.schema import KIND_DTYPE

RUNTIME = "CUPTI_ACTIVITY_KIND_RUNTIME"
OSRT = "OSRT_API"
PROFILER_OVERHEAD = "PROFILER_OVERHEAD"
CUPTI_OVERHEAD = "CUPTI_ACTIVITY_KIND_OVERHEAD"

#: ``cudaLaunchKernel_v7000`` -> ``cudaLaunchKernel``: nsys appends the CUDA version (4+ digits).
#: ``cuMemAlloc_v2``/``cudaGetDeviceProperties_v2`` are real API names and are kept.
VERSION_SUFFIX_RE = r"_v\d{4,}$"

#: Stands for a NULL ``nameId`` inside a packed column (string ids are below 2**31).
NULL_ID = 0xFFFFFFFF


def _host_exprs(db: ExportDb, table: str, *, with_corr: bool) -> dict[str, str]:
    name = col_sql(db, table, "nameId")
    exprs = {
        "start_ns": "start",
        "end_ns": "end",
        "_ptid": packed_ptid_sql(db, table, "globalTid"),
    }
    if with_corr:
        corr = col_sql(db, table, "correlationId")
        exprs["_name_corr"] = f"((ifnull({name}, {NULL_ID}) << 32) | ifnull({corr}, 0))"
    else:
        exprs["_name"] = name
    return exprs


def prefetch_runtime(db: ExportDb) -> None:
    """Start the bulk read that ``runtime_calls`` will use (see ``ExportDb.prefetch``)."""
    db.prefetch(RUNTIME, _host_exprs(db, RUNTIME, with_corr=True))


def _host(db: ExportDb, table: str, *, with_corr: bool = False) -> pl.DataFrame:
    """Shared host columns; ``pid << 24 | tid`` is read packed and unpacked here.

    ``with_corr`` also reads ``correlationId`` packed with the name id as
    ``nameId << 32 | correlationId`` (a NULL name id travels as ``0xFFFFFFFF``, a NULL
    correlation as 0): one bulk column instead of two, which costs less than the arithmetic.
    """
    exprs = _host_exprs(db, table, with_corr=with_corr)
    frame = db.read_ints(table, exprs).filter(pl.col("start_ns").is_not_null())
    dur = (pl.col("end_ns") - pl.col("start_ns")).clip(lower_bound=0).fill_null(0)
    unpacked = []
    if with_corr:
        name_id = pl.col("_name_corr") // (1 << 32)
        corr_id = pl.col("_name_corr") % (1 << 32)
        unpacked = [
            pl.when(name_id != NULL_ID).then(name_id).alias("_name"),
            pl.when(corr_id != 0).then(corr_id).alias("correlation"),
        ]
    return frame.with_columns(
        dur.alias("dur_ns"),
        *unpack_ptid("_ptid"),
        *unpacked,
        pl.lit(table, dtype=pl.Categorical()).alias("category"),
    ).drop("end_ns", "_ptid", *(["_name_corr"] if with_corr else []))


def _named(frame: pl.DataFrame, strings: Strings, fallback: str) -> pl.DataFrame:
    """Join the name text (resolved once per distinct id) onto every row."""
    ids = strings.attach(frame.select("_name").unique(), "_name", "_text").with_columns(
        pl.col("_text").fill_null(fallback).cast(pl.Categorical())
    )
    frame = frame.join(ids, on="_name", how="left", nulls_equal=True, maintain_order="left")
    return frame.with_columns(
        pl.col("_text").fill_null(fallback).cast(pl.Categorical()).alias("name")
    )


def runtime_calls(db: ExportDb, strings: Strings) -> Part | None:
    if not db.has(RUNTIME):
        return None
    frame = _host(db, RUNTIME, with_corr=True)
    ids = strings.attach(frame.select("_name").unique(), "_name", "_orig")
    ids = ids.with_columns(
        pl.col("_orig")
        .fill_null("<unknown CUDA API>")
        .str.replace(VERSION_SUFFIX_RE, "")
        .alias("name")
    ).with_columns(
        pl.when(pl.col("name") != pl.col("_orig")).then(pl.col("_orig_json")).alias("_arg"),
        pl.col("name").cast(pl.Categorical()),
    )
    frame = with_row(
        frame.join(
            ids.select("_name", "name", "_arg"),
            on="_name",
            how="left",
            nulls_equal=True,
            maintain_order="left",
        )
    )
    events = frame.with_columns(pl.lit("cuda_api", dtype=KIND_DTYPE).alias("kind"))
    return Part(_private(events), [arg_rows(frame, ARG_API_NAME, "_arg")])


def os_calls(db: ExportDb, strings: Strings) -> Part | None:
    if not db.has(OSRT):
        return None
    frame = _named(_host(db, OSRT), strings, "<unknown OS call>")
    return Part(_private(frame.with_columns(pl.lit("os_call").alias("kind"))))


def overheads(db: ExportDb, strings: Strings) -> list[Part]:
    """``PROFILER_OVERHEAD`` (nsys's own, e.g. ``CUPTI Buffer flush``) and CUPTI's overhead."""
    parts: list[Part] = []
    for table, fallback in (
        (PROFILER_OVERHEAD, "Profiler overhead"),
        (CUPTI_OVERHEAD, "CUPTI overhead"),
    ):
        if db.has(table):
            frame = _named(_host(db, table), strings, fallback)
            parts.append(Part(_private(frame.with_columns(pl.lit("overhead").alias("kind")))))
    return parts


def _private(frame: pl.DataFrame) -> pl.DataFrame:
    return frame.drop([c for c in frame.columns if c.startswith("_") and c != "_row"])
