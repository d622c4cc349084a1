"""Where the run history lives: the store URL, and the engine that opens it.

A store is an SQLite file or a PostgreSQL database, named by an SQLAlchemy URL:

- ``sqlite:///relative/file.sqlite``, ``sqlite:////absolute/file.sqlite``;
- ``postgresql+psycopg://USER:PASSWORD@HOST:PORT/DB`` (``postgresql://`` and ``postgres://``
  mean the same: psycopg 3 is the one driver supported, from ``traceforensics[postgres]``).

With no URL, ``$TF_HISTORY_URL`` is used, else the SQLite file ``history.sqlite`` in the user
data directory (``$XDG_DATA_HOME/traceforensics``, else ``~/.local/share/traceforensics``).
"""

from __future__ import annotations

import contextlib
import os
import sqlite3
import urllib.parse
from pathlib import Path
from typing import Any

import sqlalchemy as sa
from sqlalchemy.engine import URL, Engine
from sqlalchemy.exc import ArgumentError, NoSuchModuleError
from sqlalchemy.pool import NullPool

from traceforensics.model.errors import InputError

ENV_URL = "TF_HISTORY_URL"
DEFAULT_FILE = "history.sqlite"
#: How long (s) an SQLite writer waits for another writer's lock before retrying.
SQLITE_BUSY_TIMEOUT_S = 30.0
#: How long (s) to wait for a PostgreSQL server to answer the connection.
PG_CONNECT_TIMEOUT_S = 10
#: Execution option marking a connection that writes (SQLite then takes the write lock first).
WRITE_OPTION = "tf_history_write"
POSTGRES_HINT = "pip install 'traceforensics[postgres]'"
_URL_HINT = "pass sqlite:///PATH or postgresql+psycopg://USER@HOST/DB"


def data_root() -> Path:
    """The user data directory of traceforensics (respects ``XDG_DATA_HOME``)."""
    base = os.environ.get("XDG_DATA_HOME") or str(Path.home() / ".local" / "share")
    return Path(base) / "traceforensics"


def default_url() -> str:
    """The store used when none is named and ``$TF_HISTORY_URL`` is unset."""
    return f"sqlite:///{data_root() / DEFAULT_FILE}"


def resolve_url(url: str | None) -> str:
    """``url`` when given and not empty, else ``$TF_HISTORY_URL``, else :func:`default_url`."""
    if url:
        return url
    return os.environ.get(ENV_URL) or default_url()


def parse_url(text: str) -> URL:
    """The SQLAlchemy URL of a store; an ``InputError`` naming the text when it is not one we
    support (another database, another PostgreSQL driver, an in-memory SQLite)."""
    if "://" not in text:
        raise InputError(
            f"{text!r}: not a database URL; for an SQLite file write sqlite:///{text}, for "
            "PostgreSQL postgresql+psycopg://USER@HOST/DB"
        )
    if "\x00" in text:  # SQLite and the OS would fail on it later, as an internal error
        raise InputError(f"{text!r}: a NUL character in the store URL; {_URL_HINT}")
    try:
        url = sa.make_url(text)
    # (a bad port or an unclosed ``[`` of an IPv6 host is a ValueError, not ArgumentError)
    except (ArgumentError, ValueError) as exc:
        raise InputError(f"{text!r}: not a database URL ({exc}); {_URL_HINT}") from exc
    # the names are read from the URL's text: SQLAlchemy's own getters import the dialect,
    # which fails on an unknown scheme (``foo://``) with an error of its own
    backend, plus, driver = url.drivername.partition("+")
    if plus and not driver:
        raise InputError(f"{display(url)}: no driver name after the '+'; {_URL_HINT}")
    if backend in ("postgresql", "postgres"):
        if driver not in ("", "psycopg"):
            raise InputError(
                f"{display(url)}: the {driver} driver is not supported; use "
                "postgresql+psycopg://... (psycopg 3)"
            )
        # SQLAlchemy's own default driver would be psycopg2, and it no longer knows the
        # ``postgres`` spelling
        return url.set(drivername="postgresql+psycopg")
    if backend == "sqlite":
        if driver not in ("pysqlite", ""):
            raise InputError(f"{display(url)}: the {driver} driver is not supported; {_URL_HINT}")
        if not url.database or url.database == ":memory:":
            raise InputError(f"{display(url)}: an in-memory store keeps nothing; {_URL_HINT}")
        return _sqlite_query(url)
    raise InputError(f"{display(url)}: {backend} is not a supported store; {_URL_HINT}")


#: Query arguments the stdlib SQLite driver takes itself (SQLAlchemy's pysqlite dialect).
_SQLITE_DRIVER_ARGS = frozenset(
    {"timeout", "isolation_level", "detect_types", "check_same_thread", "cached_statements", "uri"}
)
#: SQLite's own URI parameters (https://sqlite.org/uri.html): honoured through ``uri=true``.
_SQLITE_URI_ARGS = frozenset({"mode", "cache", "immutable", "vfs", "nolock", "psow", "modeof"})


def _sqlite_query(url: URL) -> URL:
    """``url`` with its query checked: SQLite's URI parameters (``?mode=ro``) are kept (the
    engine honours them, ``make_engine``; SQLAlchemy alone would ignore them with a two-line
    warning); any other argument is refused on one line."""
    unknown = sorted(set(url.query) - _SQLITE_DRIVER_ARGS - _SQLITE_URI_ARGS)
    if unknown:
        raise InputError(
            f"{display(url)}: the query argument(s) {', '.join(unknown)} are not SQLite "
            f"options; drop them (SQLite takes {', '.join(sorted(_SQLITE_URI_ARGS))})"
        )
    if "timeout" in url.query:  # the driver would fail on a bad one with a bare ValueError
        try:
            float(url.query["timeout"])  # type: ignore[arg-type]
        except (TypeError, ValueError) as exc:
            raise InputError(
                f"{display(url)}: timeout must be a number of seconds; e.g. ?timeout=30"
            ) from exc
    return url


def _uri_url(url: URL, *, read_only: bool) -> URL:
    """The URL the SQLite engine opens: a ``file:`` URI (path percent-encoded: a ``?`` or
    ``#`` in a file name would start the query) when SQLite's own parameters are given or
    the store must be read without writing anything (``read_only``: ``mode=ro`` and
    ``immutable=1``, so SQLite creates no ``-wal``/``-shm`` file beside it)."""
    query = {k: v for k, v in url.query.items() if k in _SQLITE_URI_ARGS}
    if read_only:
        query |= {"mode": "ro", "immutable": "1"}
    if not query:
        return url
    database = "file:" + urllib.parse.quote(url.database or "", safe="/")
    return url.set(database=database).update_query_dict({**query, "uri": "true"})


def is_read_only(url: URL) -> bool:
    """Whether the SQLite URL asks for a read-only store (``?mode=ro``, ``?immutable=1``)."""
    return url.query.get("mode") == "ro" or url.query.get("immutable") in ("1", "true")


def display(url: URL) -> str:
    """The URL as messages show it (password hidden)."""
    return url.render_as_string(hide_password=True)


def sqlite_file(url: URL) -> Path | None:
    """The database file of an SQLite URL (relative to the working directory), else None."""
    if url.get_backend_name() != "sqlite":
        return None
    database = url.database or ""
    if database.startswith("file:"):  # typed as a URI: its path, decoded
        database = urllib.parse.unquote(database.removeprefix("file:").removeprefix("//"))
    return Path(database)


def is_postgres(url: URL) -> bool:
    return url.get_backend_name() == "postgresql"


def check_url(text: str | None) -> URL:
    """The store URL ``text`` names (``resolve_url`` rules), checked without connecting: a
    supported database whose driver is installed. Lets a command refuse a bad store before a
    long analysis."""
    return _driver_checked(parse_url(resolve_url(text)))


def _driver_checked(url: URL) -> URL:
    """``url`` when its driver is installed (SQLAlchemy would fail with a bare ImportError)."""
    if is_postgres(url):
        try:
            import psycopg  # noqa: F401  (only to name the missing package)
        except ImportError as exc:
            raise InputError(
                f"{display(url)}: PostgreSQL stores need the psycopg driver; {POSTGRES_HINT}"
            ) from exc
    return url


def make_engine(url: URL, *, read_only: bool = False) -> Engine:
    """An engine for the store (a URL from :func:`parse_url`). No connection pool: a command
    opens one or two connections and ends, and a pooled connection must never cross into a
    forked child. ``read_only`` (SQLite): the file is read as it is, nothing is written or
    created beside it (a store in a read-only folder, a file we may not write)."""
    _driver_checked(url)
    if not is_postgres(url):
        url = _uri_url(url, read_only=read_only)
    if is_postgres(url):
        return sa.create_engine(
            url, poolclass=NullPool, connect_args={"connect_timeout": PG_CONNECT_TIMEOUT_S}
        )
    try:
        engine = sa.create_engine(
            url, poolclass=NullPool, connect_args={"timeout": SQLITE_BUSY_TIMEOUT_S}
        )
    except (NoSuchModuleError, ArgumentError) as exc:  # (parse_url refuses what it knows of)
        raise InputError(f"{display(url)}: not a usable store URL ({exc}); {_URL_HINT}") from exc
    sa.event.listen(engine, "connect", _sqlite_connect)
    sa.event.listen(engine, "begin", _sqlite_begin)
    return engine


def _sqlite_connect(dbapi_conn: Any, _record: Any) -> None:
    """SQLite connections: transactions under our control (the stdlib driver would commit
    before DDL and start transactions lazily), foreign keys on."""
    dbapi_conn.isolation_level = None
    cur = dbapi_conn.cursor()
    try:
        cur.execute("PRAGMA foreign_keys=ON")
    finally:
        cur.close()


def use_wal(engine: Engine) -> None:
    """Put an SQLite store in write-ahead-log mode (kept in the file): readers then never
    block the writer. Only for a file known to be ours (the mode is written into the file);
    a busy or read-only file keeps its journal, which is as safe, only slower."""
    if engine.dialect.name != "sqlite":
        return
    raw = engine.raw_connection()  # outside any transaction: the mode cannot change inside one
    try:
        with contextlib.suppress(sqlite3.OperationalError):
            raw.cursor().execute("PRAGMA journal_mode=WAL")
    finally:
        raw.close()


def _sqlite_begin(conn: sa.Connection) -> None:
    """A writing transaction takes SQLite's write lock at BEGIN (waiting up to the busy
    timeout for other writers), so it can never fail half-way on a lock upgrade; a reading
    one takes none."""
    write = conn.get_execution_options().get(WRITE_OPTION, False)
    conn.exec_driver_sql("BEGIN IMMEDIATE" if write else "BEGIN")
