"""The schema version of a store, and its upgrade in place.

``tf_schema`` holds one row per version applied; the store's version is the highest. Opening
a store finds its version:

- no tables of ours: a new store; writing creates version :data:`SCHEMA_VERSION`;
- older: upgraded in place, in one transaction (a failed upgrade leaves the old store as it
  was), under a lock so that concurrent openers upgrade it once;
- newer than this code knows: an ``InputError`` (upgrade traceforensics).

Version 0 is the prototype layout, before the schema was versioned: one ``tf_runs`` table
holding ``labels`` as ``key=value`` text joined by ``;`` and the compressed ``document``, and
no ``tf_schema``. Upgrading it to version 1 moves labels and documents to their tables and
fills the device, idle, figure and finding rows from each stored document, the job's figures
computed by ``compare.analysis_figures`` exactly as ``record_run`` does; run ids are kept.
"""

from __future__ import annotations

from collections.abc import Callable
from datetime import UTC, datetime
from typing import Any

import sqlalchemy as sa

from traceforensics._version import __version__
from traceforensics.history.rows import (
    ENCODING,
    RunRows,
    add_analysis_rows,
    check_document,
    inflate,
    insert_children,
    parse_document,
)
from traceforensics.history.tables import METADATA, RUNS, SCHEMA
from traceforensics.model.errors import InputError

SCHEMA_VERSION = 1
#: Key of the PostgreSQL advisory lock that serializes schema creation and upgrades.
_PG_LOCK_KEY = 0x7466_6869_7374  # "tfhist"

#: The version 0 layout, kept to read old stores (and for the tests that build one).
V0_METADATA = sa.MetaData()
V0_RUNS = sa.Table(
    "tf_runs",
    V0_METADATA,
    sa.Column("id", sa.Integer, primary_key=True),
    sa.Column("recorded_at", sa.DateTime(timezone=True), nullable=False),
    sa.Column("tool_version", sa.String(64), nullable=False),
    sa.Column("labels", sa.Text, nullable=False),
    sa.Column("document", sa.LargeBinary, nullable=False),
    sqlite_autoincrement=True,
)


def store_version(conn: sa.Connection, shown: str) -> int | None:
    """The schema version of the store; None when it holds none of our tables. An
    ``InputError`` when it holds other tables only (never write into another program's
    database, e.g. an Nsight Systems export)."""
    tables = set(sa.inspect(conn).get_table_names())
    if SCHEMA.name in tables:
        version = conn.execute(sa.select(sa.func.max(SCHEMA.c.version))).scalar()
        return int(version or 0)
    if RUNS.name in tables:
        return 0
    if tables:
        raise InputError(
            f"{shown}: the database holds other tables ({', '.join(sorted(tables)[:3])}, ...), "
            "not a traceforensics history; name a new file or an empty database"
        )
    return None


def check_known(version: int | None, shown: str) -> None:
    """An ``InputError`` when the store was written by a newer traceforensics."""
    if version is not None and version > SCHEMA_VERSION:
        raise InputError(
            f"{shown}: store schema version {version} is newer than this traceforensics knows "
            f"({SCHEMA_VERSION}); upgrade traceforensics (pip install -U traceforensics)"
        )


def lock_schema(conn: sa.Connection) -> None:
    """Serialize schema work: PostgreSQL takes an advisory lock held until commit; SQLite
    already holds the write lock (``BEGIN IMMEDIATE``)."""
    if conn.dialect.name == "postgresql":
        conn.execute(sa.select(sa.func.pg_advisory_xact_lock(_PG_LOCK_KEY)))


def upgrade(conn: sa.Connection, shown: str) -> int | None:
    """Inside a writing transaction: bring the store to :data:`SCHEMA_VERSION` (creating it
    when new). Returns the version found before."""
    lock_schema(conn)
    found = store_version(conn, shown)  # again, under the lock: another may have done it
    check_known(found, shown)
    if found is None:
        METADATA.create_all(conn)
        _applied(conn, SCHEMA_VERSION)
        return None
    for version in range(found, SCHEMA_VERSION):
        _STEPS[version](conn)
        _applied(conn, version + 1)
    return found


def _applied(conn: sa.Connection, version: int) -> None:
    conn.execute(
        SCHEMA.insert().values(
            version=version, applied_at=datetime.now(UTC), tool_version=__version__
        )
    )


def _v0_to_v1(conn: sa.Connection) -> None:
    """Version 0 -> 1: new tables and columns, each run's labels and document moved out of
    ``tf_runs``, its device, idle, figure and finding rows filled from its document."""
    new = [t for t in METADATA.sorted_tables if t is not RUNS]  # version 0 has tf_runs
    METADATA.create_all(conn, tables=new)
    for column in (
        "document_schema VARCHAR(64)",
        "source_format VARCHAR(32)",
        "trace_sha256 VARCHAR(64)",
    ):
        conn.exec_driver_sql(f"ALTER TABLE tf_runs ADD COLUMN {column}")
    ids = conn.execute(sa.select(V0_RUNS.c.id).order_by(V0_RUNS.c.id)).scalars().all()
    for run_id in ids:  # one document in memory at a time
        labels, body = conn.execute(
            sa.select(V0_RUNS.c.labels, V0_RUNS.c.document).where(V0_RUNS.c.id == run_id)
        ).one()
        try:
            document, rows = _v0_rows(labels, body)
        except InputError as exc:  # the whole upgrade rolls back: say so
            raise InputError(
                f"upgrading run {run_id}: {exc}; the store was left as it was"
            ) from exc
        insert_children(conn, run_id, rows)
        conn.execute(
            RUNS.update()
            .where(RUNS.c.id == run_id)
            .values(
                document_schema=document.get("schema"),
                source_format=document.get("source_format"),
            )
        )
    for column in ("labels", "document"):
        conn.exec_driver_sql(f"ALTER TABLE tf_runs DROP COLUMN {column}")
    if conn.dialect.name == "postgresql":  # ids written by hand must not come round again
        conn.exec_driver_sql(
            "SELECT setval(pg_get_serial_sequence('tf_runs', 'id'), max(id)) FROM tf_runs "
            "HAVING max(id) IS NOT NULL"
        )
    for index in RUNS.indexes:  # version 1's own (a new Index would join RUNS for good)
        index.create(conn, checkfirst=True)


def _v0_rows(labels: str, body: bytes) -> tuple[dict[str, Any], RunRows]:
    """The document of a version 0 run and its version 1 rows (the job's figures from
    ``compare``, as ``record_run`` computes them)."""
    raw = inflate(ENCODING, body)
    document = parse_document(raw)
    check_document(document)
    rows = RunRows(run={})
    rows.labels = [
        {"key": k, "value": v}
        for k, _, v in (pair.partition("=") for pair in labels.split(";") if "=" in pair)
    ]
    add_analysis_rows(rows, document, "the stored document")
    rows.document = {"encoding": ENCODING, "raw_bytes": len(raw), "body": body}
    return document, rows


#: The upgrade from each version to the next.
_STEPS: dict[int, Callable[[sa.Connection], None]] = {0: _v0_to_v1}
