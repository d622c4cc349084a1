"""Trace-level facts of an export: schema version, GPUs, names, diagnostics, clock base.

- Version: ``META_DATA_EXPORT`` (current) or ``EXPORT_META_DATA`` (older name), key
  ``EXPORT_SCHEMA_VERSION``; legacy exports have neither and report ``None``.
- GPUs: ``TARGET_INFO_GPU`` (key ``id``, or ``deviceId`` in some layouts) and legacy
  ``TARGET_INFO_CUDA_GPU`` (key ``deviceId``, or ``id``); when both exist they are merged by
  device id, the newer table's fields first, an empty one (NULL, 0, blank) filled from the
  older. Non-CUDA adapters (Windows lists Intel/Microsoft adapters there) report no SMs and
  compute capability 0 and are skipped; a layout without those columns keeps every row. The
  name is ``name`` as text, or a ``StringIds`` id held in ``name``/``nameId`` (older layouts),
  else ``chipName``, else ``"unknown"``. ``clockRate`` is Hz in current exports; a value below
  10 MHz is taken as kHz (CUDA's own unit) so both land in ``clock_khz``. ``memoryBandwidth``
  is B/s.
- Warnings: ``DIAGNOSTIC_EVENT`` rows of warning/error severity whose text speaks of lost or
  dropped data, deduplicated with a count. The text is read as SQLite text whatever it is
  stored as (a blob or a number in a damaged export), bytes that are not UTF-8 replaced.
- Clock: ``TARGET_INFO_SESSION_START_TIME.utcEpochNs`` is wall time of session t=0.
"""

from __future__ import annotations

import re
from typing import Any

from traceforensics.ingest.nsys.common import PID_SQL, TID_SQL, as_int, col_sql
from traceforensics.ingest.nsys.db import ExportDb
from traceforensics.model.session import UNKNOWN_DEVICE, DeviceInfo
from traceforensics.model.units import MAX_INDEX

META_TABLES = ("META_DATA_EXPORT", "EXPORT_META_DATA")
LOST_DATA_RE = re.compile(
    r"lost|drop|discard|overflow|not all .* (?:collected|recorded)|buffer.* full|missed",
    re.IGNORECASE,
)
#: Tables only an nsys export has; a SQLite file with none of them is not an nsys export.
NSYS_MARKERS = frozenset(
    {
        "StringIds",
        "META_DATA_EXPORT",
        "EXPORT_META_DATA",
        "CUPTI_ACTIVITY_KIND_KERNEL",
        "CUPTI_ACTIVITY_KIND_RUNTIME",
        "NVTX_EVENTS",
        "OSRT_API",
        "TARGET_INFO_GPU",
        "TARGET_INFO_CUDA_GPU",
        "ThreadNames",
    }
)


def export_metadata(db: ExportDb) -> tuple[str | None, dict[str, str]]:
    """``(metadata table name or None, {name: value})``."""
    for table in META_TABLES:
        if db.has(table) and {"name", "value"} <= set(db.columns(table)):
            rows = db.fetch(f"SELECT name, value FROM {table}", ["name", "value"]).rows()
            return table, {str(k): str(v) for k, v in rows}
    return None, {}


#: GPU tables, newest first, with their key columns in the order they are looked for: an
#: export may name the key ``id`` or ``deviceId`` in either (an OpenACC export's
#: ``TARGET_INFO_GPU`` has ``deviceId`` and ``name`` only).
GPU_TABLES = (("TARGET_INFO_GPU", ("id", "deviceId")), ("TARGET_INFO_CUDA_GPU", ("deviceId", "id")))
#: Device fields read from a GPU table, each with its column spellings.
_GPU_COLUMNS = {
    "name": ("name", "nameId"),
    "chip": ("chipName",),
    "sm": ("smCount", "numMultiprocessors"),
    "major": ("computeMajor", "computeCapabilityMajor"),
    "minor": ("computeMinor", "computeCapabilityMinor"),
    "mem": ("totalMemory", "totalGlobalMem", "globalMemorySize"),
    "bw": ("memoryBandwidth",),
    "clock": ("clockRate", "coreClockRate"),
}


def devices(db: ExportDb) -> list[DeviceInfo]:
    """CUDA GPUs of the capture, ordered by device id: every GPU table the export has, merged
    by device id (a field missing or empty in the newer table is taken from the older one; the
    text name of either beats a chip name). Where some table tells CUDA devices apart (it has
    SM or capability columns), only the devices such a table lists as CUDA are kept."""
    tables = [_gpu_rows(db, table, keys) for table, keys in GPU_TABLES if db.has(table)]
    merged: dict[int, dict[str, Any]] = {}
    for rows, _ in tables:
        for dev, fields in rows.items():
            have = merged.setdefault(dev, {})
            for k, v in fields.items():
                if have.get(k) is None:
                    have[k] = v
    described = [set(rows) for rows, told in tables if told]
    cuda = set().union(*described) if described else set(merged)
    return [_device_info(dev, merged[dev]) for dev in sorted(merged) if dev in cuda]


def _gpu_rows(
    db: ExportDb, table: str, keys: tuple[str, ...]
) -> tuple[dict[int, dict[str, Any]], bool]:
    """``({device id: fields}, whether the table tells CUDA devices apart)`` of one GPU table;
    empty fields (NULL, 0, blank) are None.

    Non-CUDA adapters (no SMs, compute capability 0) are skipped where the table has those
    columns; a layout without them keeps every row."""
    key = col_sql(db, table, *keys)
    if key == "NULL":
        return {}, False
    cols = {"id": key} | {f: col_sql(db, table, *names) for f, names in _GPU_COLUMNS.items()}
    # a layout without SM / capability columns cannot tell adapters apart: keep every row
    described = cols["sm"] != "NULL" or cols["major"] != "NULL"
    raw = db.fetch(f"SELECT {', '.join(cols.values())} FROM {table}", list(cols)).rows(named=True)
    # one bad field (text, a blob) costs that field, never the analysis
    rows = [{k: (v if k in ("name", "chip") else as_int(v)) for k, v in r.items()} for r in raw]
    strings = _string_ids(db, [r["name"] for r in rows])
    out: dict[int, dict[str, Any]] = {}
    for r in rows:
        dev = r.pop("id")
        if dev is None or (described and not (r["sm"] or r["major"])):
            continue  # not a CUDA device (no SMs, no compute capability)
        if not 0 <= dev < MAX_INDEX:
            continue  # damage (an id no device has); it would match no row
        name = _device_name(r["name"], None, strings)
        r["name"] = None if name == UNKNOWN_DEVICE else name
        r["chip"] = _device_name(r["chip"], None, {})
        r["chip"] = None if r["chip"] == UNKNOWN_DEVICE else r["chip"]
        # the capability is one field (a major from one table never pairs with another's minor)
        major, minor = r.pop("major"), r.pop("minor")
        r["cc"] = f"{major}.{minor or 0}" if major else None
        # 0 means "not recorded" in every field here: no GPU has 0 SMs, 0 bytes or 0 Hz
        out.setdefault(dev, {k: v or None for k, v in r.items()})
    return out, described


def _device_info(dev: int, r: dict[str, Any]) -> DeviceInfo:
    """One device from its merged fields. ``clockRate`` is Hz in current exports; a value below
    10 MHz is taken as kHz (CUDA's own unit)."""
    clock = r.get("clock")
    clock_khz = None if not clock else (clock // 1000 if clock >= 10_000_000 else clock)
    return DeviceInfo(
        rank=0,
        device=dev,
        name=_device_name(r.get("name"), r.get("chip"), {}),
        sm_count=r.get("sm"),
        compute_capability=r.get("cc"),
        memory_bytes=r.get("mem"),
        memory_bandwidth_bytes_per_s=r.get("bw"),
        clock_khz=clock_khz,
        vendor="NVIDIA",
    )


def _string_ids(db: ExportDb, values: list[object]) -> dict[int, str]:
    """``StringIds`` values for the integer ids among ``values`` (older layouts store the GPU
    name as a string id)."""
    ids = {v for v in values if isinstance(v, int) and not isinstance(v, bool)}
    if not ids or not {"id", "value"} <= set(db.columns("StringIds")):
        return {}
    listed = ", ".join(str(i) for i in sorted(ids))
    rows = db.fetch(f"SELECT id, value FROM StringIds WHERE id IN ({listed})", ["id", "value"])
    return {i: v for i, v in rows.rows() if isinstance(i, int) and isinstance(v, str)}


def _device_name(raw: object, chip: object, strings: dict[int, str]) -> str:
    """Text name, else the string id's text, else the chip name, else ``UNKNOWN_DEVICE``."""
    for value in (raw, strings.get(raw) if isinstance(raw, int) else None, chip):
        if isinstance(value, str) and (text := " ".join(value.split())):
            return text
    return UNKNOWN_DEVICE


def session_start_ns(db: ExportDb) -> int | None:
    table = "TARGET_INFO_SESSION_START_TIME"
    if "utcEpochNs" not in db.columns(table):
        return None
    rows = db.fetch(f"SELECT utcEpochNs FROM {table}", ["t"]).get_column("t").to_list()
    values = [v for v in (as_int(r) for r in rows) if v is not None]
    return values[0] if values else None


def lost_data_warnings(db: ExportDb) -> list[str]:
    """Diagnostics about lost or dropped events, ``"nsys: <text> (xN)"``, in first-seen order."""
    table = "DIAGNOSTIC_EVENT"
    if "text" not in db.columns(table):
        return []
    where = ""
    if "severity" in db.columns(table):
        levels = _warning_levels(db)
        where = f" WHERE severity IN ({', '.join(map(str, levels))})"
    # CAST: a blob or number becomes text in SQLite; the connection decodes it leniently
    sql = f"SELECT CAST(text AS TEXT) FROM {table}{where} ORDER BY rowid"
    texts = db.fetch(sql, ["text"])
    counts: dict[str, int] = {}
    for text in texts.get_column("text").drop_nulls().to_list():
        # control characters (a NUL from a blob) would reach the terminal: they become spaces
        line = " ".join("".join(c if c.isprintable() else " " for c in text).split())
        if LOST_DATA_RE.search(line):
            counts[line] = counts.get(line, 0) + 1
    return [f"nsys: {t}" + (f" (x{n})" if n > 1 else "") for t, n in counts.items()]


def _warning_levels(db: ExportDb) -> list[int]:
    table = "ENUM_DIAGNOSTIC_SEVERITY_LEVEL"
    if db.has(table):
        rows = db.fetch(f"SELECT id, name FROM {table}", ["id", "name"]).rows()
        found = [
            v
            for i, n in rows
            if str(n).lower() in ("warning", "error") and (v := as_int(i)) is not None
        ]
        if found:
            return found
    return [2, 3]


def names(db: ExportDb, pids: set[int]) -> dict[str, Any]:
    """Process and thread names of the processes that have events (``PROCESSES`` lists all)."""
    out: dict[str, Any] = {"processes": [], "threads": []}
    if {"pid", "name"} <= set(db.columns("PROCESSES")):
        for pid, name in db.fetch("SELECT pid, name FROM PROCESSES", ["pid", "name"]).rows():
            if as_int(pid) in pids:
                out["processes"].append({"pid": as_int(pid), "name": str(name or "")})
    if {"nameId", "globalTid"} <= set(db.columns("ThreadNames")) and db.has("StringIds"):
        sql = (
            f"SELECT {PID_SQL.format(col='t.globalTid')}, {TID_SQL.format(col='t.globalTid')}, "
            "s.value FROM ThreadNames t JOIN StringIds s ON s.id = t.nameId"
        )
        seen: set[tuple[int, int]] = set()
        for raw_pid, raw_tid, name in db.fetch(sql, ["pid", "tid", "name"]).rows():
            pid, tid = as_int(raw_pid), as_int(raw_tid)
            if pid is None or tid is None or pid not in pids or (pid, tid) in seen:
                continue
            seen.add((pid, tid))
            out["threads"].append({"pid": pid, "tid": tid, "name": str(name or "")})
    return out
