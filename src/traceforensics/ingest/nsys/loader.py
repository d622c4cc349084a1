"""Assemble a ``TraceSession`` from an Nsight Systems SQLite export.

Every table is optional (nsys creates tables lazily: absent means "not captured"). Each mapper
returns a ``Part``; parts are concatenated in a fixed order and ``event_id`` is the row number,
so loading the same file twice gives the same ids. All rows are ``rank 0`` (one export is one
capture); processes are told apart by ``pid``. Times stay on the session clock (``clock_is_wall
False``); ``meta.clock_base_ns`` converts to wall time.
"""

from __future__ import annotations

from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import polars as pl

from traceforensics.ingest.nsys import gpu, host, meta
from traceforensics.ingest.nsys.common import Part, Strings
from traceforensics.ingest.nsys.db import ExportDb, sql_errors
from traceforensics.ingest.nsys.memory import MEMORY_USAGE, memory_events
from traceforensics.ingest.nsys.nvtx import nvtx_events
from traceforensics.ingest.progress import report
from traceforensics.model.errors import CorruptTraceError, UnsupportedFormatError
from traceforensics.model.schema import ARGS_SCHEMA, BUSY_KINDS, conform_events
from traceforensics.model.session import InputInfo, TraceMeta, TraceSession

SOURCE_FORMAT = "nsys"
#: Highest export schema major version this reader was written against.
KNOWN_MAJOR = 3


def load_sqlite(
    path: Path, *, input_format: str = "nsys-sqlite", display: Path | None = None
) -> TraceSession:
    """Read one export (``display`` is the path users see, e.g. the ``.nsys-rep``)."""
    shown = display or path
    report(f"reading the export {shown.name} ({path.stat().st_size / 1e6:.0f} MB)")
    with ExportDb(path) as db, sql_errors(shown):
        if not db.tables & meta.NSYS_MARKERS:
            raise UnsupportedFormatError(
                f"{shown}: a SQLite database but not an Nsight Systems export (no nsys tables "
                "such as StringIds or CUPTI_ACTIVITY_KIND_KERNEL); pass a file written by "
                "`nsys export --type sqlite`"
            )
        meta_table, metadata = meta.export_metadata(db)
        version = metadata.get("EXPORT_SCHEMA_VERSION")
        strings = Strings(db)
        parts, open_ranges = _map_tables(db, strings)
        events, args = _assemble(parts)
        events, args, unplaced = _drop_unplaced(events, args, shown)
        pids = set(events.get_column("pid").drop_nulls().unique().to_list())
        coded = [(NSYS_DATA_LOST, w) for w in meta.lost_data_warnings(db)]
        coded += [(ROWS_DROPPED, w) for w in unplaced]
        if not db.tables & _CUDA_TABLES:
            coded.append((CUDA_TABLES_MISSING, _no_cuda_text(shown)))
        major = version.split(".")[0] if version else ""
        if major.isascii() and major.isdigit() and int(major) > KNOWN_MAJOR:
            coded.append(
                (
                    SCHEMA_NEWER,
                    f"{shown}: export schema {version} is newer than the tested 3.x; tables "
                    "were read by feature detection and some data may be missing",
                )
            )
        if not db.has("StringIds") and events.height:
            coded.append(
                (
                    NAMES_MISSING,
                    f"{shown}: the export has no StringIds table, so kernel, API and range "
                    "names are unknown; re-export it with `nsys export --type sqlite`",
                )
            )
        if open_ranges:
            coded.append(
                (
                    NVTX_OPEN_RANGES,
                    f"{shown}: {open_ranges} NVTX ranges never ended and were dropped",
                )
            )
        warnings = [text for _, text in coded]
        trace_meta = TraceMeta(
            source_format=SOURCE_FORMAT,
            format_version=version,
            inputs=[InputInfo(str(shown), input_format, 0, version)],
            devices=meta.devices(db),
            clock_base_ns=meta.session_start_ns(db),
            clock_is_wall=False,
            warnings=warnings,
            diagnostics=[{"code": code, "message": text} for code, text in coded],
            extra={
                "nsys": {
                    "metadata_table": meta_table,
                    "product_version": metadata.get("EXPORT_PRODUCT_VERSION"),
                    "tables_read": sorted(db.tables & _TABLES_READ),
                    "open_nvtx_ranges_dropped": open_ranges,
                    **meta.names(db, {int(p) for p in pids}),
                }
            },
        )
    return TraceSession.from_frames(events, trace_meta, args)


#: The diagnostic codes of an export's warnings (``TraceMeta.diagnostics``; the list of every
#: code and what it means: ``analysis.diagnostics``, docs/json-output.md).
NSYS_DATA_LOST = "nsys_data_lost"
ROWS_DROPPED = "rows_dropped"
CUDA_TABLES_MISSING = "cuda_tables_missing"
SCHEMA_NEWER = "schema_newer"
NAMES_MISSING = "names_missing"
NVTX_OPEN_RANGES = "nvtx_ranges_open"

#: The tables CUDA tracing (``nsys profile -t cuda``) writes: with none of them the capture
#: recorded no CUDA API call and no GPU work, whatever ran.
_CUDA_TABLES = frozenset({gpu.KERNEL, gpu.MEMCPY, gpu.MEMSET, gpu.SYNC, gpu.GRAPH, host.RUNTIME})


def _no_cuda_text(shown: Path) -> str:
    """The warning of an export without CUDA tables: what it means and the flag to add."""
    return (
        f"{shown}: the export has no CUDA tables (no CUDA API calls and no GPU activity were "
        "recorded: CUDA tracing was off), so GPU idle time cannot be attributed; record again "
        "with CUDA tracing on (`nsys profile -t cuda,nvtx,osrt ...`: the `-t cuda` flag) and "
        "export with `nsys export --type sqlite`"
    )


_TABLES_READ = frozenset(
    {
        gpu.KERNEL,
        gpu.MEMCPY,
        gpu.MEMSET,
        gpu.SYNC,
        gpu.GRAPH,
        host.RUNTIME,
        host.OSRT,
        host.PROFILER_OVERHEAD,
        host.CUPTI_OVERHEAD,
        "NVTX_EVENTS",
        MEMORY_USAGE,
    }
)


#: Threads running the table mappers: each mostly waits on its bulk read (SQLite steps with the
#: GIL released) or on polars, so the kernel and runtime tables are read at the same time.
MAPPER_THREADS = 4


def _map_tables(db: ExportDb, strings: Strings) -> tuple[list[Part], int]:
    """Every table mapper's parts in a fixed order, plus the count of open NVTX ranges.

    The mappers are independent (each reads its own tables), so they run concurrently; the
    order of the returned parts, hence ``event_id``, does not depend on which finishes first.
    """
    # The two big tables, biggest first: the kernel mapper then runs while the runtime table
    # is still being read, and only the cheaper runtime mapper is left after the last read.
    gpu.prefetch_kernels(db)
    host.prefetch_runtime(db)
    with ThreadPoolExecutor(MAPPER_THREADS) as pool:
        singles = [
            pool.submit(gpu.kernels, db, strings),
            pool.submit(host.runtime_calls, db, strings),
            pool.submit(gpu.memcpys, db),
            pool.submit(gpu.memsets, db),
            pool.submit(gpu.syncs, db),
            pool.submit(gpu.graphs, db),
        ]
        nvtx = pool.submit(nvtx_events, db, strings)
        os_part = pool.submit(host.os_calls, db, strings)
        overheads = pool.submit(host.overheads, db, strings)
        mem_part = pool.submit(memory_events, db)
        found = [f.result() for f in singles]
        # Same order as before: kernel, memcpy, memset, sync, graph, runtime, ...
        ordered = [found[0], *found[2:], found[1]]
        nvtx_part, open_ranges = nvtx.result()
        # the memory markers last: every other table keeps its event ids
        ordered += [nvtx_part, os_part.result()]
        parts = [p for p in ordered if p is not None] + overheads.result()
        parts += [p for p in (mem_part.result(),) if p is not None]
    return parts, open_ranges


def _assemble(parts: list[Part]) -> tuple[pl.DataFrame, pl.DataFrame]:
    """Concatenate parts; ``event_id = offset + _row``; args follow their rows' ids.

    Memory rule: each part is brought to the event table's schema on its own (its id column,
    categorical name, typed null columns) and the parts are then joined as chunks of one
    table, without copying; ``parts`` is emptied as it goes, so a part's replaced columns are
    freed before the next part is converted. Concatenating mismatched parts into a new table
    held the parts and their copy at once (4.0 GB at 10M kernel + 10M runtime rows for a
    2.2 GB result). The args are small per row and are concatenated in one lazy plan.
    """
    events: list[pl.DataFrame] = []
    args: list[pl.LazyFrame] = []
    offset = 0
    parts.reverse()  # pop() then takes them in order
    while parts:
        part = parts.pop()
        frame = part.events
        if "_row" not in frame.columns:
            frame = frame.with_row_index("_row")
        shift = (pl.col("_row").cast(pl.Int64) + offset).alias("event_id")
        args.extend(a.lazy().with_columns(shift).drop("_row") for a in part.args)
        fixed = [shift, pl.col("name").cast(pl.Categorical())]
        if "is_comm" in frame.columns:
            fixed.append(pl.col("is_comm").fill_null(False))
        if "rank" not in frame.columns:
            fixed.append(pl.lit(0, dtype=pl.Int32()).alias("rank"))
        events.append(conform_events(frame.with_columns(fixed).drop("_row")))
        offset += frame.height
        del part, frame
    if not events:
        return pl.DataFrame(schema={"event_id": pl.Int64()}), pl.DataFrame(schema=ARGS_SCHEMA)
    cast = [pl.col(c).cast(t) for c, t in ARGS_SCHEMA.items()]
    arg_plan = pl.concat([a.select(cast) for a in args]) if args else ARGS_EMPTY.lazy()
    return pl.concat(events, how="vertical", rechunk=False), arg_plan.collect()


ARGS_EMPTY = pl.DataFrame(schema=ARGS_SCHEMA)


def _drop_unplaced(
    events: pl.DataFrame, args: pl.DataFrame, shown: Path
) -> tuple[pl.DataFrame, pl.DataFrame, list[str]]:
    """``(events, args, warnings)`` without the rows that cannot be placed: any row whose start
    is NULL or not a number (a damaged ``start`` cell), and GPU work rows that record no device
    (a NULL or dropped ``deviceId``). Each is dropped with a warning, never guessed; when *every*
    GPU work row lacks a device, ``CorruptTraceError`` (dropping them all would report a
    CPU-only trace)."""
    if "device" not in events.columns:
        events = events.with_columns(pl.lit(None, dtype=pl.Int32()).alias("device"))
    notes: list[str] = []
    no_start = events.filter(pl.col("start_ns").is_null()).get_column("event_id")
    if no_start.len():
        notes.append(f"{shown}: {no_start.len()} rows without a start time were dropped")
        kept = ~pl.col("event_id").is_in(no_start.implode())
        events, args = events.filter(kept), args.filter(kept)
    work = pl.col("kind").cast(pl.String).is_in(BUSY_KINDS)
    lost = events.filter(work & pl.col("device").is_null()).get_column("event_id")
    if lost.len() == 0:
        return events, args, notes
    if lost.len() == events.filter(work).height:
        raise CorruptTraceError(
            f"{shown}: none of the {lost.len()} GPU ops records its device (deviceId); "
            "re-export it with `nsys export --type sqlite`"
        )
    kept = ~pl.col("event_id").is_in(lost.implode())
    notes.append(f"{shown}: {lost.len()} GPU rows without a device (deviceId) were dropped")
    return events.filter(kept), args.filter(kept), notes
