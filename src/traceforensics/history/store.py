"""Opening a store, and recording a run in one transaction.

Guarantees (docs/history.md, "Concurrency"):

- a run is written in one transaction (run row, inputs, labels, devices, idle, the job's
  figures, findings, document): a process killed half-way leaves nothing of it, and the store
  stays usable;
- concurrent writers never lose a run: ids come from the database (a sequence, AUTOINCREMENT),
  nothing is read-modified-written; SQLite writers queue on its write lock (``BEGIN
  IMMEDIATE`` with a busy timeout, write-ahead log) and a write that still finds the database
  locked, or a PostgreSQL serialization failure, is retried whole.
"""

from __future__ import annotations

import errno
import os
import random
import time
from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, TypeVar

import sqlalchemy as sa
from sqlalchemy.engine import URL, Engine
from sqlalchemy.exc import DBAPIError, SQLAlchemyError

from traceforensics.history import labels as label_rules
from traceforensics.history.migrate import SCHEMA_VERSION, check_known, store_version, upgrade
from traceforensics.history.rows import inflate, insert_children, parse_document, run_rows
from traceforensics.history.tables import DOCUMENTS, RUNS
from traceforensics.history.urls import (
    WRITE_OPTION,
    data_root,
    display,
    is_read_only,
    make_engine,
    parse_url,
    resolve_url,
    sqlite_file,
    use_wal,
)
from traceforensics.model.errors import InputError

T = TypeVar("T")
#: Whole-transaction attempts when the database stays locked or a serialization fails.
WRITE_ATTEMPTS = 6
_RETRY_SQLSTATES = ("40001", "40P01")  # serialization failure, deadlock detected


@dataclass(frozen=True)
class Store:
    """An open store: its URL and engine (``shown``: the URL as messages print it)."""

    url: URL
    engine: Engine

    @property
    def shown(self) -> str:
        return display(self.url)


@contextmanager
def opened(url: str | None, *, write: bool) -> Iterator[Store | None]:
    """The store at ``url`` (``resolve_url`` rules), brought to the current schema version
    (created when ``write``, upgraded in place when older). Yields None for reading a store
    that does not exist yet: an SQLite file never written (reading creates no file) or a
    database without our tables."""
    parsed = parse_url(resolve_url(url))
    path = sqlite_file(parsed)
    if path is not None and not path.exists():
        if not write:
            yield None
            return
        if path.parent == data_root():  # the default place: made on first use
            path.parent.mkdir(parents=True, exist_ok=True)
    locked = path is not None and path.exists() and _unwritable(parsed, path)
    if locked and write:  # refused before SQLite leaves -wal/-shm files beside the store
        raise InputError(
            f"{display(parsed)}: the store is read-only ({locked}); make the file and its "
            "folder writable, or name another store with --store"
        )
    store = Store(parsed, make_engine(parsed, read_only=bool(locked)))
    try:
        with db_errors(store):
            with store.engine.connect() as conn:
                version = store_version(conn, store.shown)
            check_known(version, store.shown)
            if version is None and not write:
                yield None
                return
            if version is None or version < SCHEMA_VERSION:
                use_wal(store.engine)  # ours (empty, or an old layout): safe to set
                in_transaction(store, lambda conn: upgrade(conn, store.shown))
        yield store
    finally:
        store.engine.dispose()


def _unwritable(url: URL, path: Path) -> str:
    """Why the SQLite store at ``path`` cannot be written by this process ("" when it can):
    a read-only URL, a file we may not open for writing, or a folder where SQLite could not
    create its journal. Such a store is read as it is (``make_engine(read_only=True)``)."""
    if is_read_only(url):
        return "the URL asks for mode=ro"
    try:
        os.close(os.open(path, os.O_RDWR))
    except OSError as exc:
        if exc.errno in (errno.EACCES, errno.EPERM, errno.EROFS):
            return exc.strerror or "the file cannot be opened for writing"
        return ""  # (a folder, a broken file...: SQLite says what it is)
    if not os.access(path.resolve().parent, os.W_OK):
        return "its folder is not writable"
    return ""


def in_transaction(store: Store, work: Callable[[sa.Connection], T]) -> T:
    """``work(conn)`` in one writing transaction, retried whole while the database is locked
    or a serialization fails (jittered backoff); its result once committed."""
    for attempt in range(1, WRITE_ATTEMPTS + 1):
        try:
            with db_errors(store), store.engine.connect() as conn:
                conn.execution_options(**{WRITE_OPTION: True})
                with conn.begin():
                    return work(conn)
        except InputError as exc:
            if attempt == WRITE_ATTEMPTS or not _retryable(exc.__cause__):
                raise
        time.sleep(min(0.05 * 2**attempt, 2.0) * (0.5 + random.random()))
    raise AssertionError("unreachable")  # pragma: no cover


def _retryable(exc: BaseException | None) -> bool:
    if not isinstance(exc, DBAPIError):
        return False
    if getattr(exc.orig, "sqlstate", None) in _RETRY_SQLSTATES:
        return True
    text = str(exc.orig).lower()
    return "database is locked" in text or "database is busy" in text


@contextmanager
def db_errors(store: Store) -> Iterator[None]:
    """Database errors as one-line ``InputError``s naming the store (the original error is
    the ``__cause__``: a locked SQLite file is retried by ``in_transaction``)."""
    try:
        yield
    except SQLAlchemyError as exc:
        orig = getattr(exc, "orig", None) or exc
        detail = " ".join(str(orig).split()) or type(orig).__name__
        raise InputError(
            f"{store.shown}: cannot use the history store ({detail}); {_hint(store)}"
        ) from exc


def _hint(store: Store) -> str:
    if store.url.get_backend_name() == "sqlite":
        return "the file must be an SQLite database (or absent) in a writable directory"
    return "check that the server runs and the URL's host, port, user, password and database"


def record_run(
    document: dict[str, Any],
    *,
    url: str | None = None,
    labels: Mapping[str, str] | None = None,
    inputs: Sequence[str] = (),
) -> int:
    """Store one analysis (a ``traceforensics.analysis/1`` document, as ``tf analyze --json``
    writes it) with its ``labels`` and the ``inputs`` as given; the new run's id. The job's
    figures are computed here, by ``compare.analysis_figures``, before the transaction (as is
    the content hash: no lock is held meanwhile). One transaction: all of it lands, or (a
    crash, a kill) none of it."""
    checked = label_rules.checked(labels or {})
    rows = run_rows(document, checked, [str(p) for p in inputs])  # before locking

    def write(conn: sa.Connection) -> int:
        run = RUNS.insert().values(**rows.run, recorded_at=datetime.now(UTC))
        key = conn.execute(run).inserted_primary_key
        assert key is not None  # an INSERT always has one
        run_id = int(key[0])
        insert_children(conn, run_id, rows)
        return run_id

    with opened(url, write=True) as store:
        assert store is not None  # writing always opens (or creates) one
        return in_transaction(store, write)


def prepare_store(url: str | None) -> str:
    """Open the store for writing now (created when new, upgraded when older) and close it:
    a command that records after a long analysis checks the server, the credentials and
    the file first. The store's URL as messages print it."""
    with opened(url, write=True) as store:
        assert store is not None
        return store.shown


def load_document(conn: sa.Connection, run_id: int) -> dict[str, Any]:
    """The stored analysis document of run ``run_id``."""
    row = conn.execute(
        sa.select(DOCUMENTS.c.encoding, DOCUMENTS.c.body).where(DOCUMENTS.c.run_id == run_id)
    ).one_or_none()
    if row is None:
        raise InputError(f"run {run_id} has no stored document; the store is damaged")
    return parse_document(inflate(row.encoding, row.body))


def store_shown(url: str | None) -> str:
    """The store's URL as messages print it (``resolve_url`` rules), for the CLI's lines."""
    return display(parse_url(resolve_url(url)))
