"""``NVTX_EVENTS`` -> ``annotation``, ``cpu_op`` and ``marker`` rows.

Rules:
- Ranges are push/pop (59) and start/end (60) events, and their ``.nvtxt`` imports (70, 71);
  marks (34) become zero-length ``marker`` rows. Ids come from ``ENUM_NSYS_EVENT_TYPE`` by name
  when the table exists.
- Name = ``text`` (plain string) else ``StringIds[textId]`` (registered string).
- Domain: the ``NvtxDomainCreate`` (75) row with the same ``(pid, domainId)`` names it; stored
  under the ``domain`` arg. Ranges in the ``NCCL`` domain get ``is_comm = True``.
- A range whose ``end`` is NULL never closed inside the capture; it is dropped (a zero-length
  row would claim a time it did not cover) and counted in ``meta.extra``.
- PyTorch ``emit_nvtx``/``--pytorch=autograd-nvtx`` ranges look like
  ``aten::addmm, seq = 12, op_id = 5, sizes = [[16, 32], [32, 8]]``; they become ``cpu_op``
  rows named ``aten::addmm`` with ``Input Dims`` (the sizes list, JSON) and ``Sequence number``.
"""

from __future__ import annotations

import polars as pl

from traceforensics.ingest.nsys.common import (
    ARG_DOMAIN,
    Part,
    Strings,
    arg_rows,
    col_sql,
    json_text,
    pid_sql,
    tid_sql,
    with_row,
)
from traceforensics.ingest.nsys.db import ExportDb
from traceforensics.model.schema import ARG_INPUT_DIMS, ARG_SEQUENCE

NVTX = "NVTX_EVENTS"
RANGE_TYPES = ("NvtxPushPopRange", "NvtxStartEndRange", "NvtxtPushPopRange", "NvtxtStartEndRange")
MARK_TYPES = ("NvtxMark",)
DOMAIN_TYPE = "NvtxDomainCreate"
_FALLBACK_IDS = {
    "NvtxPushPopRange": 59,
    "NvtxStartEndRange": 60,
    "NvtxtPushPopRange": 70,
    "NvtxtStartEndRange": 71,
    "NvtxMark": 34,
    "NvtxDomainCreate": 75,
}
NCCL_DOMAIN = "NCCL"

#: PyTorch autograd NVTX text: ``<ns>::<op>`` followed by PyTorch's ``, key = value`` suffixes.
_TORCH_SUFFIX_RE = r"^[A-Za-z_]\w*(?:::[\w.]+)+, (?:seq|op_id|sizes) = "
_TORCH_BARE_RE = r"^(?:aten|prim|c10d|_c10d_functional|c10d_functional|quantized)::[\w.]+$"
_SIZES_RE = r", sizes = (\[\]|\[.*?\]\])"
_SEQ_RE = r", seq = (-?\d+)"


def _type_ids(db: ExportDb) -> dict[str, int]:
    table = "ENUM_NSYS_EVENT_TYPE"
    if db.has(table) and {"id", "name"} <= set(db.columns(table)):
        found = {
            str(n): int(i)
            for i, n in db.fetch(f"SELECT id, name FROM {table}", ["id", "name"]).rows()
        }
        return {name: found.get(name, default) for name, default in _FALLBACK_IDS.items()}
    return dict(_FALLBACK_IDS)


def _fetch_nvtx(db: ExportDb, strings: Strings, type_ids: list[int]) -> pl.DataFrame:
    """``NVTX_EVENTS`` rows of the event types ``type_ids``, with their label.

    Times are the export's int64 ns; ``_label`` is ``text`` (a plain string) else the
    registered string ``StringIds[textId]``; columns a schema version lacks read as NULL.
    """
    wanted = ", ".join(str(i) for i in type_ids)
    cols = {
        "start_ns": "start",
        "end_ns": col_sql(db, NVTX, "end"),
        "_type": "eventType",
        "_text": col_sql(db, NVTX, "text"),
        "_text_id": col_sql(db, NVTX, "textId"),
        "_domain_id": col_sql(db, NVTX, "domainId"),
        "pid": pid_sql(db, NVTX, "globalTid"),
        "tid": tid_sql(db, NVTX, "globalTid"),
    }
    sql = f"SELECT {', '.join(cols.values())} FROM {NVTX} WHERE eventType IN ({wanted})"
    # strict=False: a field holding text or a blob becomes null (an unended range is dropped
    # and counted) instead of failing the whole table
    frame = db.fetch(sql, list(cols)).with_columns(
        pl.col(c).cast(pl.Int64, strict=False) for c in cols if c != "_text"
    )
    frame = frame.with_columns(pl.col("_text").cast(pl.String))
    frame = strings.attach(frame, "_text_id", "_registered")
    return frame.with_columns(pl.coalesce("_text", "_registered").alias("_label"))


def _domain_table(frame: pl.DataFrame, domain_type: int) -> pl.DataFrame:
    """``(pid, _domain_id) -> _domain`` from the ``NvtxDomainCreate`` rows; the last creation
    of a (process, id) pair wins."""
    return (
        frame.filter(pl.col("_type") == domain_type)
        .select("pid", "_domain_id", pl.col("_label").alias("_domain"))
        .unique(subset=["pid", "_domain_id"], keep="last")
    )


def _classified(frame: pl.DataFrame, marks: list[int]) -> pl.DataFrame:
    """Kind, name, PyTorch ``sizes``/``seq`` text, ``is_comm``, ``dur_ns`` (ns, end - start
    clipped at 0; 0 for marks) and ``category`` of each kept row, plus ``_row``.

    A PyTorch autograd range (``aten::addmm, seq = 12, ...`` or a bare ``aten::addmm``) is a
    ``cpu_op`` named by the text before the first comma; other ranges are ``annotation``.
    """
    label = pl.col("_label").fill_null("<unnamed NVTX range>")
    torch_op = label.str.contains(_TORCH_SUFFIX_RE) | label.str.contains(_TORCH_BARE_RE)
    kind = (
        pl.when(pl.col("_type").is_in(marks))
        .then(pl.lit("marker"))
        .when(torch_op)
        .then(pl.lit("cpu_op"))
        .otherwise(pl.lit("annotation"))
    )
    return with_row(
        frame.with_columns(
            kind.alias("kind"),
            pl.when(torch_op)
            .then(label.str.extract(r"^([^,]+)", 1))
            .otherwise(label)
            .alias("name"),
            pl.when(torch_op).then(label.str.extract(_SIZES_RE, 1)).alias("_dims"),
            pl.when(torch_op).then(label.str.extract(_SEQ_RE, 1)).alias("_seq"),
            (pl.col("_domain") == NCCL_DOMAIN).fill_null(False).alias("is_comm"),
            (pl.col("end_ns") - pl.col("start_ns"))
            .clip(lower_bound=0)
            .fill_null(0)
            .alias("dur_ns"),
            pl.lit(NVTX).alias("category"),
        )
    )


def _with_domain_json(frame: pl.DataFrame) -> pl.DataFrame:
    """Add ``_domain_json``, the JSON text of ``_domain`` (encoded once per distinct name)."""
    domain_names = frame.select("_domain").unique().drop_nulls().get_column("_domain").to_list()
    domain_json = pl.DataFrame(
        {"_domain": domain_names, "_domain_json": json_text(domain_names)},
        schema={"_domain": pl.String(), "_domain_json": pl.String()},
    )
    return frame.join(domain_json, on="_domain", how="left", maintain_order="left")


def nvtx_events(db: ExportDb, strings: Strings) -> tuple[Part | None, int]:
    """The NVTX part and the number of open (never-ended) ranges dropped."""
    if not db.has(NVTX):
        return None, 0
    ids = _type_ids(db)
    ranges = [ids[t] for t in RANGE_TYPES]
    marks = [ids[t] for t in MARK_TYPES]
    frame = _fetch_nvtx(db, strings, [*ranges, *marks, ids[DOMAIN_TYPE]])
    domains = _domain_table(frame, ids[DOMAIN_TYPE])

    # a range with a NULL end never closed inside the capture: counted, then dropped
    is_range = pl.col("_type").is_in(ranges)
    open_ranges = frame.filter(is_range & pl.col("end_ns").is_null()).height
    frame = frame.filter((is_range & pl.col("end_ns").is_not_null()) | pl.col("_type").is_in(marks))
    frame = frame.join(
        domains, on=["pid", "_domain_id"], how="left", nulls_equal=False, maintain_order="left"
    )
    frame = _with_domain_json(_classified(frame, marks))
    args = [
        arg_rows(frame, ARG_DOMAIN, "_domain_json"),
        arg_rows(frame, ARG_INPUT_DIMS, "_dims"),
        arg_rows(frame, ARG_SEQUENCE, "_seq"),
    ]
    events = frame.drop([c for c in frame.columns if c.startswith("_") and c != "_row"])
    return Part(events.drop("end_ns"), args), open_ranges
