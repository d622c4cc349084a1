"""Read-only access to an Nsight Systems SQLite export, with a bulk columnar read path.

The user's file is opened through the SQLite URI ``file:<path>?mode=ro`` and ``PRAGMA
query_only``: nothing (journal, index, temp table) is ever written into it, so its bytes and mtime
stay unchanged. An export in WAL journal mode is read from a private copy (with its ``-wal``
file), since SQLite would otherwise create ``-wal``/``-shm`` files beside it. ``immutable=1`` is
deliberately not used: it would also skip locking (and pending WAL frames), and a file that
``nsys`` is still writing would then be read torn.

Bulk read rule (why not ``fetchall``): Python's ``sqlite3`` has no columnar API, and fetching
millions of rows builds one tuple and several int objects per row. Two columnar paths, both
reading rowid ranges of at most ``CHUNK_ROWS`` on one shared reader pool (one thread per CPU,
first come first served), each range on its own read-only connection (the drivers release the
GIL while SQLite steps):

1. Arrow-native (preferred, when ``adbc-driver-sqlite`` is installed): the ADBC SQLite driver
   steps the query in C and fills Arrow arrays; polars imports the Arrow C stream directly.
   Only the low-level driver-manager API is used (no pandas/pyarrow import).
2. Fallback (standard library only): SQLite itself aggregates each column of a range into one
   text buffer with ``group_concat(ifnull(col, ''), ',')`` (C speed, one scan for all columns)
   and polars splits and parses those buffers in Rust; NULL becomes the empty field and parses
   back to null. About 2-3x slower than ADBC, still no per-row Python objects.

Cost model (measured with callgrind on the ADBC path): each *output column* costs about
600 instructions per row, an arithmetic operator about 20, so fields are packed in SQL (see
``common``). ``prefetch`` queues a table's ranges before its mapper runs, so the loader can
order the reads (biggest table first) and overlap mapping with reading.

Text columns of small tables (NVTX text, ``StringIds``, metadata) go through ``fetchall``.
"""

from __future__ import annotations

import os
import shutil
import sqlite3
import tempfile
import threading
from collections.abc import Callable, Iterator, Mapping
from concurrent.futures import Future, ThreadPoolExecutor
from contextlib import contextmanager
from itertools import pairwise
from pathlib import Path
from typing import TYPE_CHECKING, Any
from urllib.parse import quote

import polars as pl

from traceforensics.model.errors import CorruptTraceError, InputError

if TYPE_CHECKING:
    from types import ModuleType

#: Upper bound of rows in one chunk (one text buffer per column on the fallback path).
CHUNK_ROWS = 250_000

#: Rows per Arrow batch from the ADBC driver (its default 1024 costs more per-batch overhead).
ADBC_BATCH_ROWS = 65_536


#: Set to force the standard-library reader (tests, or a broken ADBC install).
NO_ADBC_ENV = "TRACEFORENSICS_NO_ADBC"


def adbc_module() -> ModuleType | None:
    """``adbc_driver_sqlite`` when installed and not disabled, else None.

    Only the low-level driver-manager API is used: ``adbc_driver_sqlite.dbapi`` would import
    pandas and pyarrow (about 0.9 s) for nothing, since polars adopts the Arrow C stream itself.
    """
    if os.environ.get(NO_ADBC_ENV):
        return None
    try:
        import adbc_driver_manager  # noqa: F401  (the driver loader used below)
        import adbc_driver_sqlite as adbc  # type: ignore[import-not-found,unused-ignore]
    except ImportError:
        return None
    module: ModuleType = adbc
    return module


def adbc_error() -> type[Exception]:
    """Base class of ADBC driver-manager errors (call only when ``adbc_module()`` is not None)."""
    import adbc_driver_manager as manager

    error: type[Exception] = manager.Error
    return error


def _uri(path: Path) -> str:
    # percent-encoded OS bytes: a name may hold bytes that are not UTF-8
    return f"file:{quote(os.fsencode(path.resolve()))}?mode=ro"


def is_wal(path: Path) -> bool:
    """Whether the SQLite file is in WAL journal mode (header bytes 18/19 are 2). Such a file,
    even opened read-only, gets ``-wal``/``-shm`` files created beside it, and pending WAL frames
    in a read-only directory crash SQLite's shared-memory mapping: it is read from a copy."""
    with path.open("rb") as fh:
        head = fh.read(20)
    return len(head) == 20 and head[:16] == b"SQLite format 3\x00" and 2 in (head[18], head[19])


def private_copy(path: Path) -> Path:
    """Copy ``path`` and its ``-wal`` file into a new private directory, fold the pending WAL
    frames into the copy and switch it to rollback-journal mode; returns the copy. The caller
    removes the directory."""
    folder = Path(tempfile.mkdtemp(prefix="traceforensics-wal-"))
    copy = folder / "export.sqlite"
    shutil.copyfile(path, copy)
    wal = path.with_name(path.name + "-wal")
    if wal.is_file():
        shutil.copyfile(wal, folder / "export.sqlite-wal")
    # Fold the WAL into the copy and leave WAL mode: the reads below use two SQLite libraries
    # (Python's and the ADBC driver's), each with its own POSIX lock table, and two libraries
    # on one WAL file's shared memory can truncate it under each other (SIGBUS). A rollback-
    # journal file opened read-only needs no -shm at all.
    try:
        conn = sqlite3.connect(copy)
        try:
            conn.execute("PRAGMA wal_checkpoint(TRUNCATE)")
            conn.execute("PRAGMA journal_mode=DELETE")
        finally:
            conn.close()
    except sqlite3.DatabaseError:
        pass  # a damaged copy: ``connect`` reports it on the user's file name
    return copy


def connect(path: Path, shown: Path | None = None) -> sqlite3.Connection:
    """Open ``path`` read-only; SQLite errors become ``CorruptTraceError`` naming the file
    (``shown``: the name the user gave, when ``path`` is a private copy)."""
    try:
        conn = sqlite3.connect(_uri(path), uri=True, check_same_thread=False)
        # invalid UTF-8 in a name costs that name (U+FFFD), not the whole export
        conn.text_factory = lambda raw: raw.decode("utf-8", errors="replace")
        conn.execute("PRAGMA query_only = 1")
        # Touch the schema now so a non-database file fails here, with a clear message.
        conn.execute("SELECT count(*) FROM sqlite_master").fetchone()
    except (sqlite3.DatabaseError, UnicodeDecodeError) as exc:
        raise CorruptTraceError(
            f"{shown or path}: cannot read the SQLite file ({exc}); re-export it with "
            "`nsys export --type sqlite`"
        ) from exc
    return conn


@contextmanager
def sql_errors(path: Path) -> Iterator[None]:
    """Turn SQLite failures during reading (a truncated or damaged page) into one clear line."""
    try:
        yield
    except (sqlite3.DatabaseError, UnicodeDecodeError) as exc:
        raise CorruptTraceError(
            f"{path}: the SQLite export is damaged ({exc}); re-export it with "
            "`nsys export --type sqlite`"
        ) from exc


def rows_frame(rows: list[tuple[Any, ...]], names: list[str]) -> pl.DataFrame:
    """Rows of a small query as a frame. A column whose cells mix types (a blob among
    integers: a damaged export) loses the blobs, or else becomes text for a lenient cast."""
    try:
        return pl.DataFrame(rows, schema=names, orient="row", infer_schema_length=None)
    except pl.exceptions.PolarsError:
        blobs = (bytes, bytearray, memoryview)
        clean = [tuple(None if isinstance(v, blobs) else v for v in r) for r in rows]
    try:
        return pl.DataFrame(clean, schema=names, orient="row", infer_schema_length=None)
    except pl.exceptions.PolarsError:
        text = [tuple(None if v is None else str(v) for v in r) for r in clean]
        return pl.DataFrame(text, schema=dict.fromkeys(names, pl.String()), orient="row")


class ExportDb:
    """Schema discovery plus bulk reads of one export. Use as a context manager."""

    def __init__(self, path: Path) -> None:
        if not path.is_file():
            raise InputError(f"{path}: no such file; check the path")
        self.shown = path
        # a WAL-mode export is read from a private copy: nothing may appear beside the input
        self._private = private_copy(path) if is_wal(path) else None
        self.path = self._private or path
        try:
            self.conn = connect(self.path, shown=path)
        except Exception:
            self._drop_private()
            raise
        # The table mappers run on threads (see ``loader``); they share this connection.
        self._lock = threading.Lock()
        # One reader pool (one thread per CPU) for every table: chunks run in the order the
        # mappers ask for them, so a table finishes early and its mapper overlaps later reads,
        # instead of all tables crawling together and finishing at once.
        self._pool: ThreadPoolExecutor | None = None
        self._workers = max(1, min(_usable_cpus(), 8))
        self._prefetched: dict[object, Callable[[], pl.DataFrame]] = {}
        rows = self._all("SELECT name FROM sqlite_master WHERE type IN ('table', 'view')")
        self.tables: frozenset[str] = frozenset(str(r[0]) for r in rows)
        self._columns: dict[str, tuple[str, ...]] = {}

    def __enter__(self) -> ExportDb:
        return self

    def __exit__(self, *exc: object) -> None:
        if self._pool is not None:
            self._pool.shutdown()
        self.conn.close()
        self._drop_private()

    def _drop_private(self) -> None:
        if self._private is not None:
            shutil.rmtree(self._private.parent, ignore_errors=True)

    def _all(self, sql: str) -> list[tuple[Any, ...]]:
        """``fetchall`` on the shared connection, one thread at a time."""
        with sql_errors(self.shown), self._lock:
            rows: list[tuple[Any, ...]] = self.conn.execute(sql).fetchall()
        return rows

    def has(self, table: str) -> bool:
        return table in self.tables

    def columns(self, table: str) -> tuple[str, ...]:
        """Column names of ``table`` (empty when the table is absent)."""
        if table not in self.tables:
            return ()
        if table not in self._columns:
            info = self._all(f'PRAGMA table_info("{table}")')
            self._columns[table] = tuple(str(r[1]) for r in info)
        return self._columns[table]

    def fetch(self, sql: str, names: list[str]) -> pl.DataFrame:
        """Small reads (text columns): plain ``fetchall`` into a frame with ``names``."""
        rows = self._all(sql)
        return rows_frame(rows, names)

    def read_ints(self, table: str, exprs: Mapping[str, str], where: str = "") -> pl.DataFrame:
        """Integer columns of ``table`` as Int64, ``{output name: SQL expression}``, in bulk.

        ``where`` is an extra SQL condition (without ``WHERE``). A read started by ``prefetch``
        with the same arguments is picked up instead of reading again.
        """
        key = (table, tuple(exprs.items()), where)
        with self._lock:
            started = self._prefetched.pop(key, None)
        return (started or self._start(table, exprs, where))()

    def prefetch(self, table: str, exprs: Mapping[str, str], where: str = "") -> None:
        """Queue the chunks of a later ``read_ints`` now (no-op when ``table`` is absent).

        The reader pool runs chunks first come, first served: prefetching the biggest table
        first lets its mapper work while the smaller tables are still being read.
        """
        if table in self.tables:
            started = self._start(table, exprs, where)
            with self._lock:
                self._prefetched[(table, tuple(exprs.items()), where)] = started

    def _bounds(self, table: str, lo: int, hi: int) -> list[tuple[int, int]]:
        """Rowid ranges of at most ``CHUNK_ROWS`` rows, at least one per worker (small chunks
        keep every worker busy to the end). Sized by rows, not ids: a table whose rowids jump
        (one row at 2^63-1) is cut at its actual rowids instead of into 2^63 / CHUNK_ROWS
        empty ranges."""
        span = hi - lo + 1
        if span > 4 * CHUNK_ROWS:
            ((count,),) = self._all(f'SELECT count(*) FROM "{table}"')
            if span > 4 * max(int(count), 1):
                return self._row_cuts(table, int(count), lo, hi)
        n_chunks = max(1, min(self._workers, span // 50_000 + 1), -(-span // CHUNK_ROWS))
        step = -(-span // n_chunks)
        return [(lo + i * step, min(lo + (i + 1) * step - 1, hi)) for i in range(n_chunks)]

    def _row_cuts(self, table: str, count: int, lo: int, hi: int) -> list[tuple[int, int]]:
        """Ranges holding about ``CHUNK_ROWS`` rows each, cut at the rowids found by offset."""
        n_chunks = max(1, -(-count // CHUNK_ROWS))
        step = -(-count // n_chunks)
        cuts = [
            int(
                self._all(f'SELECT rowid FROM "{table}" ORDER BY rowid LIMIT 1 OFFSET {k * step}')[
                    0
                ][0]
            )
            for k in range(1, n_chunks)
        ]
        edges = [lo, *cuts, hi + 1]
        return [(a, b - 1) for a, b in pairwise(edges) if b > a]

    def _start(
        self, table: str, exprs: Mapping[str, str], where: str
    ) -> Callable[[], pl.DataFrame]:
        """Queue the chunk reads of ``table``; the returned callable waits for the frame."""
        names = list(exprs)
        # Two sub-selects, not ``min(rowid), max(rowid)``: SQLite answers a lone min/max of the
        # rowid with one b-tree seek, but scans the whole table for the pair.
        ((lo, hi),) = self._all(
            f'SELECT (SELECT min(rowid) FROM "{table}"), (SELECT max(rowid) FROM "{table}")'
        )
        if lo is None:
            empty = pl.DataFrame(schema=dict.fromkeys(names, pl.Int64()))
            return lambda: empty
        bounds = self._bounds(table, int(lo), int(hi))
        cond = f" AND ({where})" if where else ""
        text_select = ", ".join(f"group_concat(ifnull({e}, ''), ',')" for e in exprs.values())
        text_sql = f'SELECT count(*), {text_select} FROM "{table}" WHERE rowid BETWEEN ? AND ?'

        def text_read() -> pl.DataFrame:
            return self._gather(
                self._submit(bounds, lambda b: self._text_chunk(text_sql + cond, b, names))
            )

        adbc = adbc_module()
        if adbc is None:
            return text_read
        cols = ", ".join(f'{e} AS "{n}"' for n, e in exprs.items())
        sql = f'SELECT {cols} FROM "{table}" WHERE rowid BETWEEN {{lo}} AND {{hi}}{cond}'
        futures = self._submit(bounds, lambda b: self._adbc_chunk(adbc, sql, b))

        def adbc_read() -> pl.DataFrame:
            try:
                return self._gather(futures)
            except (adbc_error(), ValueError, TypeError, pl.exceptions.PolarsError):
                # e.g. a column whose SQLite types vary: the text path parses anything
                return text_read()

        return adbc_read

    def _submit(
        self, bounds: list[tuple[int, int]], read: Callable[[tuple[int, int]], pl.DataFrame]
    ) -> list[Future[pl.DataFrame]]:
        with self._lock:
            if self._pool is None:
                self._pool = ThreadPoolExecutor(self._workers, thread_name_prefix="nsys-read")
            pool = self._pool
        return [pool.submit(read, b) for b in bounds]

    def _gather(self, futures: list[Future[pl.DataFrame]]) -> pl.DataFrame:
        with sql_errors(self.shown):
            parts = [f.result() for f in futures]
        return pl.concat(parts) if len(parts) > 1 else parts[0]

    def _adbc_chunk(self, adbc: ModuleType, sql: str, bound: tuple[int, int]) -> pl.DataFrame:
        import adbc_driver_manager as manager

        with (
            adbc.connect(_uri(self.path)) as database,
            manager.AdbcConnection(database) as conn,
            manager.AdbcStatement(conn) as stmt,
        ):
            # larger Arrow batches: fewer per-batch round trips (driver default 1024)
            stmt.set_options(**{"adbc.sqlite.query.batch_rows": str(ADBC_BATCH_ROWS)})
            stmt.set_sql_query(sql.format(lo=bound[0], hi=bound[1]))
            stream, _ = stmt.execute_query()
            # polars imports the Arrow C stream directly (no pyarrow); SQLite steps in C
            frame = pl.DataFrame(stream)
        return frame.select(pl.all().cast(pl.Int64, strict=False))

    def _text_chunk(self, sql: str, bound: tuple[int, int], names: list[str]) -> pl.DataFrame:
        conn = connect(self.path, shown=self.shown)
        try:
            result = tuple(conn.execute(sql, bound).fetchone())
        finally:
            conn.close()
        if not result[0]:
            return pl.DataFrame(schema=dict.fromkeys(names, pl.Int64()))
        return _parse_chunk(result, names)


def _usable_cpus() -> int:
    """CPUs this process may run on (affinity-aware where the OS supports it)."""
    if hasattr(os, "sched_getaffinity"):
        return len(os.sched_getaffinity(0))
    return os.cpu_count() or 1


def _parse_chunk(result: tuple[object, ...], names: list[str]) -> pl.DataFrame:
    """One ``(count, buffer, buffer, ...)`` row into an Int64 frame, parsed by polars."""
    raw = pl.DataFrame({n: [str(v)] for n, v in zip(names, result[1:], strict=True)})
    return raw.select(
        [pl.col(n).str.split(",").explode().cast(pl.Int64, strict=False).alias(n) for n in names]
    )
