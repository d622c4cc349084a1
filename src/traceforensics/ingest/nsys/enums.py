"""Enum-valued columns: read through the export's ``ENUM_*`` tables, else documented numbering.

Exports since ~2021 carry ``ENUM_<NAME>(id, name, label)`` tables; we join by the *name* (stable)
and never trust ids when the table exists. Older exports have no ENUM tables; then the numbering
documented by NVIDIA for those versions (identical to the current tables) is used:

- ``ENUM_CUDA_MEMCPY_OPER``: 0 UNKNOWN, 1 HTOD, 2 DTOH, 3 HTOA, 4 ATOH, 5 ATOA, 6 ATOD, 7 DTOA,
  8 DTOD, 9 HTOH, 10 PTOP, 11 UVM_HTOD, 12 UVM_DTOH, 13 UVM_DTOD
- ``ENUM_CUDA_MEM_KIND``: 0 PAGEABLE, 1 PINNED, 2 DEVICE, 3 ARRAY, 4 MANAGED, 5 DEVICE_STATIC,
  6 MANAGED_STATIC, 7 UNKNOWN (not CUPTI's raw numbering)
- ``ENUM_CUPTI_SYNC_TYPE``: 0 UNKNOWN, 1 EVENT_SYNCHRONIZE, 2 STREAM_WAIT_EVENT,
  3 STREAM_SYNCHRONIZE, 4 CONTEXT_SYNCHRONIZE
"""

from __future__ import annotations

from typing import Final

import polars as pl

from traceforensics.ingest.nsys.db import ExportDb

FALLBACK: Final[dict[str, tuple[str, ...]]] = {
    "ENUM_CUDA_MEMCPY_OPER": (
        *("UNKNOWN", "HTOD", "DTOH", "HTOA", "ATOH", "ATOA", "ATOD", "DTOA", "DTOD", "HTOH"),
        *("PTOP", "UVM_HTOD", "UVM_DTOH", "UVM_DTOD"),
    ),
    "ENUM_CUDA_MEM_KIND": (
        *("PAGEABLE", "PINNED", "DEVICE", "ARRAY", "MANAGED", "DEVICE_STATIC"),
        *("MANAGED_STATIC", "UNKNOWN"),
    ),
    "ENUM_CUPTI_SYNC_TYPE": (
        *("UNKNOWN", "EVENT_SYNCHRONIZE", "STREAM_WAIT_EVENT", "STREAM_SYNCHRONIZE"),
        "CONTEXT_SYNCHRONIZE",
    ),
}
#: Prefixes nsys puts before the short enum names in ``ENUM_*.name``.
_PREFIXES: Final = (
    "CUDA_MEMCPY_KIND_",
    "CUDA_MEMOPR_MEMORY_KIND_",
    "CUPTI_ACTIVITY_SYNCHRONIZATION_TYPE_",
)

# memcpy operation -> (unified copy_kind, Kineto-style direction text)
COPY_OPS: Final[dict[str, tuple[str, str]]] = {
    "HTOD": ("h2d", "HtoD"),
    "DTOH": ("d2h", "DtoH"),
    "HTOA": ("h2d", "HtoA"),
    "ATOH": ("d2h", "AtoH"),
    "ATOA": ("d2d", "AtoA"),
    "ATOD": ("d2d", "AtoD"),
    "DTOA": ("d2d", "DtoA"),
    "DTOD": ("d2d", "DtoD"),
    "HTOH": ("h2h", "HtoH"),
    "PTOP": ("p2p", "PtoP"),
    "UVM_HTOD": ("h2d", "HtoD"),
    "UVM_DTOH": ("d2h", "DtoH"),
    "UVM_DTOD": ("d2d", "DtoD"),
}
# memory kind -> (unified mem kind, display label)
MEM_KINDS: Final[dict[str, tuple[str, str]]] = {
    "PAGEABLE": ("pageable", "Pageable"),
    "PINNED": ("pinned", "Pinned"),
    "DEVICE": ("device", "Device"),
    "ARRAY": ("array", "Array"),
    "MANAGED": ("managed", "Managed"),
    "DEVICE_STATIC": ("device", "Device"),
    "MANAGED_STATIC": ("managed", "Managed"),
}
# sync type -> event name (Kineto's cuda_sync spelling, so both formats read alike)
SYNC_NAMES: Final[dict[str, str]] = {
    "EVENT_SYNCHRONIZE": "Event Sync",
    "STREAM_WAIT_EVENT": "Stream Wait Event",
    "STREAM_SYNCHRONIZE": "Stream Sync",
    "CONTEXT_SYNCHRONIZE": "Context Sync",
}


def enum_names(db: ExportDb, table: str) -> dict[int, str]:
    """``id -> short name`` (prefix stripped) from ``table``, or the documented fallback."""
    if db.has(table) and {"id", "name"} <= set(db.columns(table)):
        rows = db.fetch(f'SELECT id, name FROM "{table}"', ["id", "name"]).rows()
        out: dict[int, str] = {}
        for ident, name in rows:
            text = str(name)
            for prefix in _PREFIXES:
                text = text.removeprefix(prefix)
            out[int(ident)] = text
        return out
    return dict(enumerate(FALLBACK.get(table, ())))


def lookup(ids: dict[int, str], values: dict[str, str], id_col: str, out: str) -> pl.DataFrame:
    """A join table ``id_col -> out`` mapping enum ids through short names to our values."""
    keys = [i for i, n in ids.items() if n in values]
    return pl.DataFrame(
        {id_col: keys, out: [values[ids[i]] for i in keys]},
        schema={id_col: pl.Int64(), out: pl.String()},
    )
