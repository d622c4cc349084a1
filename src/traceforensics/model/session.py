"""``TraceSession``: the event table, its args side table and trace-level metadata.

A session is what every ingester returns and every analysis consumes. It can be saved to a
directory (``events.parquet``, ``args.parquet``, ``meta.json``) and loaded back unchanged;
``meta.json`` records each table file's size and checksum, checked before it is read back
(``integrity``).
"""

from __future__ import annotations

import json
import threading
from collections.abc import Callable, Iterable
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


#: Reads a deferred session's ``(events, args)`` when they are first needed.
Tables = Callable[[], tuple[pl.DataFrame, pl.DataFrame]]
#: Reads some event columns of a deferred session without the rest (``event_columns``).
ColumnReader = Callable[[list[str]], pl.DataFrame]
#: What reading a damaged saved table raises: polars' errors, and the panic some corrupt
#: Parquet files cause, which is not an ``Exception``.
DAMAGED_FILE: tuple[type[BaseException], ...] = (Exception, pl.exceptions.PanicException)


class TraceSession:
    """A loaded trace: ``events`` (unified table), ``args`` (side table), ``meta``.

    The tables may be deferred (``deferred``): a session read back from the cache holds its
    metadata at once and reads its tables the first time ``events`` or ``args`` is read, so
    a consumer that needs only the metadata (a repeat ``tf analyze`` served from the analysis
    cache) never reads them."""

    def __init__(
        self,
        events: pl.DataFrame,
        meta: TraceMeta,
        args: pl.DataFrame | None = None,
    ) -> None:
        self._events: pl.DataFrame | None = events
        self._args: pl.DataFrame | None = args if args is not None else empty_args()
        self._pending: Tables | None = None
        self._columns: ColumnReader | None = None
        self._reading = threading.Lock()
        self.meta = meta
        # the tables ``validate`` last passed (the loaders validate, and ``load_path`` again)
        self._valid: tuple[pl.DataFrame, pl.DataFrame] | None = None

    @classmethod
    def deferred(
        cls, meta: TraceMeta, tables: Tables, columns: ColumnReader | None = None
    ) -> TraceSession:
        """A session of ``meta`` whose tables ``tables()`` gives when they are first read (once;
        an error it raises is raised by that read). ``columns(names)``, when given, reads
        those event columns alone while the tables are unread (``event_columns``)."""
        session = cls(pl.DataFrame(), meta, pl.DataFrame())
        session._events = session._args = None
        session._pending, session._columns = tables, columns
        return session

    def event_columns(self, names: Iterable[str]) -> pl.DataFrame:
        """The event columns ``names`` (in that order): of a deferred session whose tables
        are unread, read alone (a renderer that needs two columns of a cached session does
        not read the table); else ``events.select``. ``SchemaError`` for a column the
        session does not hold, read or not."""
        wanted = list(names)
        columns = self._columns
        if self._pending is not None and columns is not None:
            return columns(wanted)
        events = self.events
        missing = set(wanted) - set(events.columns)
        if missing:
            raise SchemaError(f"not columns of this session: {sorted(missing)}")
        return events.select(wanted)

    @property
    def is_deferred(self) -> bool:
        """Whether the tables are still unread (``deferred``)."""
        return self._pending is not None

    def _tables(self) -> tuple[pl.DataFrame, pl.DataFrame]:
        if self._pending is not None:
            # once, whichever thread reads first (the passes run in threads); the column
            # reader goes with the reader: a part of a session (``only``) then no longer
            # holds the whole session it was cut from
            with self._reading:
                pending = self._pending
                if pending is not None:
                    self._events, self._args = pending()
                    self._pending = self._columns = None
        assert self._events is not None and self._args is not None
        return self._events, self._args

    @property
    def events(self) -> pl.DataFrame:
        return self._tables()[0]

    @events.setter
    def events(self, frame: pl.DataFrame) -> None:
        self._tables()
        self._events, self._valid = frame, None

    @property
    def args(self) -> pl.DataFrame:
        return self._tables()[1]

    @args.setter
    def args(self, frame: pl.DataFrame) -> None:
        self._tables()
        self._args, self._valid = frame, None

    def __reduce__(self) -> tuple[type[TraceSession], tuple[Any, ...]]:
        # (a deferred session's reader is a closure: the tables travel, read)
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

        def tables() -> tuple[pl.DataFrame, pl.DataFrame]:
            events, args = self._tables()
            return (
                events.select(c for c in events.columns if c in keep),
                args.filter(pl.col("key").is_in(keys)),  # categorical: no text per row
            )

        def some(names: list[str]) -> pl.DataFrame:
            if not keep.issuperset(names):
                raise SchemaError(f"not kept columns: {sorted(set(names) - keep)}")
            return self.event_columns(names)

        if self.is_deferred:  # still unread: so is the part
            return TraceSession.deferred(self.meta, tables, some)
        events, args = tables()
        return TraceSession(events, self.meta, args)

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
    def load(
        cls,
        directory: str | Path,
        *,
        defer: bool = False,
        fallback: Tables | None = None,
        require_checks: bool = False,
    ) -> TraceSession:
        """Read a session written by ``save``; validates it. With ``defer`` only the metadata
        is read now and the tables when first read (``deferred``); if they then cannot be
        read or do not validate, ``fallback()`` gives them instead (else the error is raised
        by that read); ``event_columns`` reads some event columns alone meanwhile (their
        dtypes checked; the whole tables, read later, are validated). ``fallback`` is for
        ``defer`` only.

        ``meta.json`` is checked against its SHA-256 now, each table file against its size and
        CRC-32 before it is first read (``integrity``; ``CorruptTraceError`` when one changed
        since it was saved). A session saved before the checks existed is read unchecked,
        unless ``require_checks`` (the session cache: it reads only entries it wrote)."""
        src = Path(directory)
        sidecar = json.loads((src / "meta.json").read_text(encoding="utf-8"))
        records = check_sidecar(src / "meta.json", sidecar, required=require_checks)
        if sidecar.get("session_format") != SESSION_FORMAT_VERSION:
            raise SchemaError(
                f"{src}: saved session format {sidecar.get('session_format')!r} is not "
                f"{SESSION_FORMAT_VERSION}; load the trace again and save it with this version"
            )
        meta = TraceMeta.from_dict(sidecar["meta"])
        saved = _SavedFiles(src, records)
        if not defer:
            events, args = _saved_tables(saved, meta)
            return cls(events, meta, args)

        def tables() -> tuple[pl.DataFrame, pl.DataFrame]:
            try:
                return _saved_tables(saved, meta)
            except DAMAGED_FILE:
                if fallback is None:
                    raise
                return fallback()

        def some(names: list[str]) -> pl.DataFrame:
            unknown = set(names) - set(EVENT_SCHEMA)
            if unknown:
                raise SchemaError(f"not event table columns: {sorted(unknown)}")
            try:
                return _saved_columns(saved, names)
            except DAMAGED_FILE:  # unreadable: from the whole tables (or the fallback's) then
                session._tables()
                return session.event_columns(names)

        session = cls.deferred(meta, tables, some)
        return session

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
    record once, the first time it is asked for (one check at a time: a deferred session's
    tables may be asked for from several threads)."""

    def __init__(self, directory: Path, records: dict[str, FileRecord] | None) -> None:
        self.directory = directory
        self.records = records
        self.checked: set[str] = set()
        self._lock = threading.Lock()

    def path(self, name: str) -> Path:
        path = self.directory / name
        with self._lock:
            if name not in self.checked and self.records is not None:
                record = self.records.get(name)
                if record is None:
                    raise missing_record(self.directory / "meta.json", name)
                check_file(path, record)
            self.checked.add(name)  # (only once it passed)
        return path


def _saved_tables(saved: _SavedFiles, meta: TraceMeta) -> tuple[pl.DataFrame, pl.DataFrame]:
    """The validated ``(events, args)`` of a saved session (``TraceSession.save``), each file
    checked against its record first."""
    events = conform_events(pl.read_parquet(saved.path(EVENTS_FILE)))
    args = conform_args(pl.read_parquet(saved.path(ARGS_FILE)))
    TraceSession(events, meta, args).validate()
    return events, args


def _saved_columns(saved: _SavedFiles, names: list[str]) -> pl.DataFrame:
    """The event columns ``names`` of a saved session, their dtypes checked (the whole file
    is checked against its record first: a damaged page may hold any column)."""
    part = pl.read_parquet(saved.path(EVENTS_FILE), columns=names)
    if dict(part.schema) != {n: EVENT_SCHEMA[n] for n in names}:
        raise SchemaError(f"{saved.directory}: saved event columns {dict(part.schema)}")
    return part
