"""Pieces shared by the nsys table mappers: the interned-string table and mapper output.

``globalTid``/``globalPid`` layout (verified on real exports)::

    bit 63 ........ 48 47 ........ 24 23 ......... 0
        [ host / VM id ][    pid     ][    tid     ]

so ``pid = (g >> 24) & 0xFFFFFF`` and ``tid = g & 0xFFFFFF``.

Packing (speed): the bulk read costs about the same per *column* whatever the value, so small
fields are packed into one int64 in SQL and unpacked with integer arithmetic in polars:
``pid << 24 | tid`` (the low 48 bits of ``globalTid``), ``pid << 32 | correlationId``
(CUPTI ids are uint32; 0 means "no correlation" and becomes null), ``streamId << 16 | deviceId``,
``x << 32 | y << 16 | z`` for grid/block (y, z < 65536 by CUDA limits) and
``demangledName << 32 | shortName`` (string ids). A NULL field makes the packed value NULL.

``correlationId`` is only unique per process, so every row carries the pid it belongs to
(GPU rows: ``globalPid``) and the launch link is ``(pid, correlation)``.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np
import orjson
import polars as pl

from traceforensics.ingest.nsys.db import ExportDb

PID_SQL = "(({col} >> 24) & 16777215)"
TID_SQL = "({col} & 16777215)"


def as_int(value: object) -> int | None:
    """An integer field of an export row as an int: ints, whole floats and ASCII-digit strings;
    anything else (text, a blob, NULL) is None, so one bad field costs that field only."""
    if isinstance(value, bool):
        return None
    if isinstance(value, int):
        return value
    if isinstance(value, float) and value.is_integer():
        return int(value)
    if isinstance(value, str):
        digits = value.strip().removeprefix("-")
        if digits.isascii() and digits.isdigit():
            return int(value.strip())
    return None


#: Arg keys used by the nsys ingester (besides the Kineto-spelled ones in ``model.schema``).
ARG_SHORT_NAME = "short name"
ARG_API_NAME = "api name"
ARG_SYNC_TYPE = "sync type"
ARG_DOMAIN = "domain"
ARG_GRAPH_ID = "graph id"


def packed_ptid_sql(db: ExportDb, table: str, col: str) -> str:
    """``pid << 24 | tid`` from a ``globalTid``-style column, or NULL when absent."""
    return f"({col} & 281474976710655)" if col in db.columns(table) else "NULL"


def unpack_ptid(packed: str) -> list[pl.Expr]:
    return [(pl.col(packed) // (1 << 24)).alias("pid"), (pl.col(packed) % (1 << 24)).alias("tid")]


def packed_pid_corr_sql(db: ExportDb, table: str, pid_col: str) -> str:
    """``pid << 32 | correlationId`` (pid from ``pid_col``, a globalPid/globalTid column)."""
    pid = pid_sql(db, table, pid_col)
    corr = col_sql(db, table, "correlationId")
    return f"(({pid} << 32) | ifnull({corr}, 0))"


def unpack_pid_corr(packed: str) -> list[pl.Expr]:
    corr = pl.col(packed) % (1 << 32)
    return [
        (pl.col(packed) // (1 << 32)).alias("pid"),
        pl.when(corr != 0).then(corr).alias("correlation"),
    ]


def packed3_sql(x: str, y: str, z: str) -> str:
    return f"(({x} << 32) | ({y} << 16) | {z})"


def unpack3(packed: pl.Series) -> pl.Series:
    """``[x, y, z]`` as ``List(Int32)`` from ``x << 32 | y << 16 | z``.

    Built as one ``(n, 3)`` int32 block in numpy, then viewed as lists: about 3x cheaper than
    ``concat_arr`` of three polars expressions (this runs on every kernel row, twice). A NULL
    packed value (some dimension NULL in the export) gives ``[null, null, null]``, done by the
    expression path since it is rare.
    """
    if packed.null_count():
        p = pl.col(packed.name)
        parts = [p // (1 << 32), (p // (1 << 16)) % (1 << 16), p % (1 << 16)]
        lists = pl.concat_arr([c.cast(pl.Int32) for c in parts]).arr.to_list()
        return packed.to_frame().select(lists).to_series()
    values = packed.to_numpy()
    xyz = np.empty((len(values), 3), dtype=np.int32)
    xyz[:, 0] = values >> 32
    xyz[:, 1] = (values >> 16) & 0xFFFF
    xyz[:, 2] = values & 0xFFFF
    return pl.Series(packed.name, xyz).arr.to_list()


def pid_sql(db: ExportDb, table: str, col: str) -> str:
    """SQL for the pid decoded from ``col`` (NULL when the column is absent)."""
    return PID_SQL.format(col=col) if col in db.columns(table) else "NULL"


def tid_sql(db: ExportDb, table: str, col: str) -> str:
    return TID_SQL.format(col=col) if col in db.columns(table) else "NULL"


def col_sql(db: ExportDb, table: str, *candidates: str) -> str:
    """The first of ``candidates`` that ``table`` has, else ``NULL`` (feature detection)."""
    cols = db.columns(table)
    for c in candidates:
        if c in cols:
            return c
    return "NULL"


@dataclass
class Part:
    """One mapper's output: partial event columns plus args rows keyed by ``_row``.

    ``_row`` is the row index inside ``events``; the loader turns it into ``event_id``.
    """

    events: pl.DataFrame
    args: list[pl.DataFrame] = field(default_factory=list)


def with_row(frame: pl.DataFrame) -> pl.DataFrame:
    return frame.with_row_index("_row").with_columns(pl.col("_row").cast(pl.Int64))


def arg_rows(frame: pl.DataFrame, key: str, value: str) -> pl.DataFrame:
    """Args rows ``(_row, key, value)`` from ``frame[value]`` (JSON text), skipping nulls."""
    return frame.filter(pl.col(value).is_not_null()).select(
        pl.col("_row"), pl.lit(key).alias("key"), pl.col(value).alias("value")
    )


def json_text(values: list[str | None]) -> list[str | None]:
    """JSON text of each string (computed once per distinct string, never per event)."""
    return [None if v is None else orjson.dumps(v).decode() for v in values]


class Strings:
    """``StringIds`` loaded once: ``id -> value`` plus its JSON text, joined by id."""

    def __init__(self, db: ExportDb) -> None:
        if {"id", "value"} <= set(db.columns("StringIds")):
            # a damaged export's cells cost themselves only: an id that is not an integer
            # (text, a real, a blob) drops its row; a value that is a blob or a number is read
            # as text (invalid UTF-8 becomes U+FFFD, the connection's text factory)
            frame = db.fetch(
                "SELECT id, CAST(value AS TEXT) FROM StringIds WHERE typeof(id) = 'integer'",
                ["id", "value"],
            )
        else:
            frame = pl.DataFrame(schema={"id": pl.Int64(), "value": pl.String()})
        frame = frame.with_columns(pl.col("id").cast(pl.Int64), pl.col("value").cast(pl.String))
        self.frame = frame.with_columns(
            pl.Series("json", json_text(frame.get_column("value").to_list()), pl.String())
        )

    def attach(self, frame: pl.DataFrame, id_col: str, prefix: str) -> pl.DataFrame:
        """Left-join ``<prefix>`` (text) and ``<prefix>_json`` for the string id in ``id_col``."""
        table = self.frame.rename({"id": id_col, "value": prefix, "json": f"{prefix}_json"})
        return frame.join(table, on=id_col, how="left", maintain_order="left")
