"""``TraceSession``: the event table, its args side table and trace-level metadata.

A session is what every ingester returns and every analysis consumes. It can be saved to a
directory (``events.parquet``, ``args.parquet``, ``meta.json``) and loaded back unchanged;
``meta.json`` records each table file's size and checksum, checked before it is read back
(``integrity``).
"""

from __future__ import annotations

import json
from collections.abc import Iterable
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

import polars as pl

from traceforensics.model.errors import SchemaError
from traceforensics.model.integrity import (
    FileRecord,
    check_file,
    check_sidecar,
    file_record,
    missing_record,
    sealed,
)
from traceforensics.model.schema import (
    ARGS_SCHEMA,
    BUSY_KINDS,
    EVENT_SCHEMA,
    REQUIRED_COLUMNS,
    conform_args,
    conform_events,
    empty_args,
)

if TYPE_CHECKING:
    import pandas as pd

SESSION_FORMAT_VERSION = 1
#: The table files of a saved session (``TraceSession.save``).
EVENTS_FILE, ARGS_FILE = "events.parquet", "args.parquet"
#: The name of a GPU the trace does not name (never an empty string).
UNKNOWN_DEVICE = "unknown"


@dataclass
class DeviceInfo:
    """One GPU as the trace describes it. Memory in bytes, clocks in kHz (as CUDA reports)."""

    rank: int
    device: int
    name: str = UNKNOWN_DEVICE
    sm_count: int | None = None
    compute_capability: str | None = None
    memory_bytes: int | None = None
    memory_bandwidth_bytes_per_s: int | None = None
    clock_khz: int | None = None
    vendor: str | None = None


@dataclass
class InputInfo:
    """One input file and what was read from it."""

    path: str
    format: str
    rank: int
    format_version: str | None = None


@dataclass
class TraceMeta:
    """Trace-level facts. ``clock_base_ns`` is the absolute wall-clock epoch ns of time 0 on the
    table's clock when known (so ``start_ns + clock_base_ns`` is wall-clock time)."""

    source_format: str
    format_version: str | None = None
    inputs: list[InputInfo] = field(default_factory=list)
    devices: list[DeviceInfo] = field(default_factory=list)
    distributed: dict[str, Any] = field(default_factory=dict)
    clock_base_ns: int | None = None
    clock_is_wall: bool = False
    warnings: list[str] = field(default_factory=list)
    extra: dict[str, Any] = field(default_factory=dict)
    #: ``{"code", "message"}`` of the ingest facts that have a code (``analysis.diagnostics``
    #: lists the codes); a warning's ``message`` is its text in ``warnings``, unchanged
    diagnostics: list[dict[str, str]] = field(default_factory=list)

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> TraceMeta:
        data = dict(data)
        data["inputs"] = [InputInfo(**i) for i in data.get("inputs", [])]
        data["devices"] = [DeviceInfo(**d) for d in data.get("devices", [])]
        return cls(**data)


def _unique(ids: pl.Series) -> bool:
    """Whether the (null-free) ``ids`` are distinct. Ingesters number rows in order, and
    strictly increasing ids are distinct without the hash set ``n_unique`` builds (80 MB at
    the end of a 10M-row load, when the whole table is held): a 1-bit mask is compared."""
    if ids.len() < 2 or bool((ids.slice(1) > ids.slice(0, ids.len() - 1)).all()):
        return True
    return ids.n_unique() == ids.len()


class TraceSession:
    """A loaded trace: ``events`` (unified table), ``args`` (side table), ``meta``."""

    def __init__(
        self,
        events: pl.DataFrame,
        meta: TraceMeta,
        args: pl.DataFrame | None = None,
    ) -> None:
        self._events = events
        self._args = args if args is not None else empty_args()
        self.meta = meta
        # the tables ``validate`` last passed (the loaders validate, and ``load_path`` again)
        self._valid: tuple[pl.DataFrame, pl.DataFrame] | None = None

    def event_columns(self, names: Iterable[str]) -> pl.DataFrame:
        """The event columns ``names`` (in that order); ``SchemaError`` for a column the
        session does not hold."""
        wanted = list(names)
        missing = set(wanted) - set(self._events.columns)
        if missing:
            raise SchemaError(f"not columns of this session: {sorted(missing)}")
        return self._events.select(wanted)

    @property
    def events(self) -> pl.DataFrame:
        return self._events

    @events.setter
    def events(self, frame: pl.DataFrame) -> None:
        self._events, self._valid = frame, None

    @property
    def args(self) -> pl.DataFrame:
        return self._args

    @args.setter
    def args(self, frame: pl.DataFrame) -> None:
        self._args, self._valid = frame, None

    def __reduce__(self) -> tuple[type[TraceSession], tuple[Any, ...]]:
        return (type(self), (self.events, self.meta, self.args))

    # -- construction helpers -------------------------------------------------------------
    @classmethod
    def from_frames(
        cls, events: pl.DataFrame, meta: TraceMeta, args: pl.DataFrame | None = None
    ) -> TraceSession:
        """Conform partial frames to the schema, validate, and wrap them."""
        session = cls(
            conform_events(events),
            meta,
            conform_args(args) if args is not None else None,
        )
        session.validate()
        return session

    def only(self, columns: Iterable[str], arg_keys: Iterable[str]) -> TraceSession:
        """This session holding only the event ``columns`` (in table order) and the args under
        ``arg_keys``, for a consumer that reads nothing else (``tf analyze`` keeps what the
        analysis reads: at 10M kernels + 10M API calls the kernels' ``grid``/``block`` lists
        and the per-row name args alone hold ~700 MB). The other columns are gone, not
        nulled, so a reader of one fails loudly; the kept columns share this session's
        buffers. The result is no longer a full event table (``validate`` refuses it)."""
        keep = set(columns)
        unknown = keep - set(EVENT_SCHEMA)
        if unknown:
            raise SchemaError(f"not event table columns: {sorted(unknown)}")
        keys = list(dict.fromkeys(arg_keys))
        events, args = self.events, self.args
        return TraceSession(
            events.select(c for c in events.columns if c in keep),
            self.meta,
            args.filter(pl.col("key").is_in(keys)),  # categorical: no text per row
        )

    # -- checks ---------------------------------------------------------------------------
    def validate(self) -> None:
        """Raise ``SchemaError`` unless the tables match the schema exactly.

        Rules: column names, order and dtypes equal ``EVENT_SCHEMA``/``ARGS_SCHEMA``;
        ``dur_ns >= 0``; no nulls in ``REQUIRED_COLUMNS``; ``event_id`` unique; GPU work rows
        (kernel, memcpy, memset) carry a device.
        """
        ev = self.events
        if self._valid is not None and self._valid[0] is ev and self._valid[1] is self.args:
            return  # (these very frames passed: polars frames are not changed in place here)
        if dict(ev.schema) != EVENT_SCHEMA:
            got = {k: str(v) for k, v in ev.schema.items()}
            raise SchemaError(f"event table schema mismatch: {got}")
        if dict(self.args.schema) != ARGS_SCHEMA:
            raise SchemaError(f"args table schema mismatch: {dict(self.args.schema)}")
        if ev.height == 0:
            return
        checks = ev.select(
            [pl.col(c).null_count().alias(c) for c in REQUIRED_COLUMNS]
            + [
                (pl.col("dur_ns") < 0).sum().alias("_neg_dur"),
                (pl.col("kind").is_in(BUSY_KINDS) & pl.col("device").is_null())
                .sum()
                .alias("_gpu_without_device"),
            ]
        ).row(0, named=True)
        nulls = {c: checks[c] for c in REQUIRED_COLUMNS if checks[c]}
        if nulls:
            raise SchemaError(f"null values in required columns: {nulls}")
        if checks["_neg_dur"]:
            raise SchemaError(f"{checks['_neg_dur']} events have dur_ns < 0")
        if not _unique(ev.get_column("event_id")):
            raise SchemaError("event_id is not unique")
        if checks["_gpu_without_device"]:
            raise SchemaError(f"{checks['_gpu_without_device']} GPU work rows have no device")
        self._valid = (ev, self.args)

    # -- persistence ----------------------------------------------------------------------
    def save(self, directory: str | Path) -> Path:
        """Write ``events.parquet``, ``args.parquet`` and ``meta.json`` (the metadata, each
        table file's size and CRC-32, and a SHA-256 of the rest: ``integrity``) into
        ``directory``."""
        out = Path(directory)
        out.mkdir(parents=True, exist_ok=True)
        files: dict[str, FileRecord] = {}
        for name, table in ((EVENTS_FILE, self.events), (ARGS_FILE, self.args)):
            table.write_parquet(out / name)
            files[name] = file_record(out / name)
        sidecar = sealed(
            {"session_format": SESSION_FORMAT_VERSION, "meta": self.meta.to_dict(), "files": files}
        )
        (out / "meta.json").write_text(json.dumps(sidecar, indent=1), encoding="utf-8")
        return out

    @classmethod
    def load(cls, directory: str | Path, *, require_checks: bool = False) -> TraceSession:
        """Read a session written by ``save``; validates it. ``meta.json`` is checked against
        its SHA-256, each table file against its size and CRC-32 (``integrity``;
        ``CorruptTraceError`` when one changed since it was saved). A session saved before
        the checks existed is read unchecked, unless ``require_checks``."""
        src = Path(directory)
        sidecar = json.loads((src / "meta.json").read_text(encoding="utf-8"))
        records = check_sidecar(src / "meta.json", sidecar, required=require_checks)
        if sidecar.get("session_format") != SESSION_FORMAT_VERSION:
            raise SchemaError(
                f"{src}: saved session format {sidecar.get('session_format')!r} is not "
                f"{SESSION_FORMAT_VERSION}; load the trace again and save it with this version"
            )
        meta = TraceMeta.from_dict(sidecar["meta"])
        events, args = _saved_tables(_SavedFiles(src, records), meta)
        return cls(events, meta, args)

    # -- views ----------------------------------------------------------------------------
    def to_pandas(self) -> pd.DataFrame:
        """The event table as a pandas DataFrame (for notebooks), with an ``end_ns`` column."""
        return self.events.with_columns(
            (pl.col("start_ns") + pl.col("dur_ns")).alias("end_ns")
        ).to_pandas()

    def kind(self, *kinds: str) -> pl.DataFrame:
        """Rows of the given kinds."""
        return self.events.filter(pl.col("kind").is_in(list(kinds)))

    def args_for(self, key: str) -> pl.DataFrame:
        """``event_id`` and ``value`` of one arg key."""
        return self.args.filter(pl.col("key") == key).select("event_id", "value")

    @property
    def ranks(self) -> list[int]:
        return sorted(self.events.get_column("rank").unique().drop_nulls().to_list())

    def __repr__(self) -> str:
        return (
            f"TraceSession({self.meta.source_format}, {self.events.height} events, "
            f"{len(self.meta.devices)} devices)"
        )


class _SavedFiles:
    """The table files of a saved session (``directory``) and their records from its
    ``meta.json`` (None for a session saved without them): ``path`` checks a file against its
    record before it is read."""

    def __init__(self, directory: Path, records: dict[str, FileRecord] | None) -> None:
        self.directory = directory
        self.records = records

    def path(self, name: str) -> Path:
        path = self.directory / name
        if self.records is not None:
            record = self.records.get(name)
            if record is None:
                raise missing_record(self.directory / "meta.json", name)
            check_file(path, record)
        return path


def _saved_tables(saved: _SavedFiles, meta: TraceMeta) -> tuple[pl.DataFrame, pl.DataFrame]:
    """The validated ``(events, args)`` of a saved session (``TraceSession.save``), each file
    checked against its record first."""
    events = conform_events(pl.read_parquet(saved.path(EVENTS_FILE)))
    args = conform_args(pl.read_parquet(saved.path(ARGS_FILE)))
    TraceSession(events, meta, args).validate()
    return events, args
