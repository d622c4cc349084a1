"""Columnar extraction of one Kineto file's events into a partial unified event table.

Each field is pulled out of the event list with one list comprehension; rules that depend on a
value (names, pids, tids, categories) run once per *unique* value through dict lookups; per-row
Python work is limited to the subsets that need it (GPU rows, memcpy rows, args-table rows).
No per-event dict or object is built. Rows keep the file's order; ``event_id`` is
``id_offset + position``.

Timestamps: ``start_ns = baseTimeNanoseconds + ns(ts)`` when the file has a base, else
``ns(ts)``; ``ns`` is the exact rule of ``timeconv``. ``dur_ns = ns(dur)``, negatives clamped to
0 (warned); instants have ``dur_ns = 0``.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable, Hashable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, TypeVar

import numpy as np
import polars as pl

from traceforensics.ingest.kineto import categories as cats
from traceforensics.ingest.kineto import gpu
from traceforensics.ingest.kineto.flows import (
    cpu_pid,
    fill_correlation_from_flows,
    gpu_labels,
    metadata_events,
)
from traceforensics.ingest.kineto.payload import (
    Payload,
    args_table,
    dim_series,
    gpu_payload,
    place_gpu_rows,
)
from traceforensics.ingest.kineto.reader import RawTrace
from traceforensics.ingest.kineto.timeconv import TimeValueError, us_to_ns, usable_us
from traceforensics.model.errors import CorruptTraceError
from traceforensics.model.schema import (
    COPY_KIND_DTYPE,
    KIND_DTYPE,
    MEM_KIND_DTYPE,
)

_EMPTY: dict[str, Any] = {}
T = TypeVar("T")


@dataclass
class Extracted:
    """One file's partial event table, args side table and what meta needs from the rows."""

    events: pl.DataFrame
    args: pl.DataFrame
    devices_seen: list[int]
    runtime_names: list[str]
    legacy_categories: bool
    float_timestamps: bool
    flow_filled: int = 0
    ids_used: int = 0
    warnings: list[str] = field(default_factory=list)


def map_unique(values: Sequence[Any], fn: Callable[[Any], T]) -> list[T]:
    """``[fn(v) for v in values]`` computed once per distinct value."""
    if fn is gpu.parse_int and all(type(v) is int for v in values):
        return list(values)  # ints parse to themselves: the common case for pid/tid
    try:
        table = {v: fn(v) for v in set(values)}
    except TypeError:  # an unhashable value (malformed event): no memo
        return [fn(v) for v in values]
    return [table[v] for v in values]


def _ints(values: list[Any]) -> list[int | None]:
    if all(type(v) is int for v in values):
        return values
    return [v if type(v) is int else gpu.parse_int(v) for v in values]


def _kind_of(cat: Hashable) -> str:
    """Kind of an ``X`` event from its category (instants become ``marker`` elsewhere)."""
    if isinstance(cat, str):
        return cats.KIND_BY_CAT.get(cat, cats.UNKNOWN_KIND)
    return cats.UNKNOWN_KIND


def _row_events(all_events: list[Any]) -> list[dict[str, Any]]:
    """Events that become rows: ``X``/``i``/``I`` phases except the ``Trace`` span."""
    return [
        e
        for e in all_events
        if type(e) is dict
        and cats.is_str_in(e.get("ph"), cats.ROW_PHASES)
        and not cats.is_str_in(e.get("cat"), cats.SKIPPED_CATEGORIES)
    ]


def _times(
    ph: list[Any], ts_raw: list[Any], dur_raw: list[Any], base_ns: int | None
) -> tuple[np.ndarray, np.ndarray, int]:
    """``start_ns``, ``dur_ns`` (instants 0, negatives clamped) and the clamped count."""
    start_ns = us_to_ns(ts_raw)
    if base_ns is not None:
        start_ns = start_ns + np.int64(base_ns)
    dur_ns = us_to_ns(dur_raw, missing=0)
    dur_ns[np.fromiter((p != "X" for p in ph), dtype=bool, count=len(ph))] = 0
    negative = int((dur_ns < 0).sum())
    if negative:
        np.maximum(dur_ns, 0, out=dur_ns)
    return start_ns, dur_ns, negative


@dataclass
class _Columns:
    """The per-row fields of one file's row events, in file order.

    ``*_raw`` lists hold the values exactly as the JSON had them (the flow fallback and GPU
    placement need the raw pid/tid/ts/dur); ``kind``, ``name`` and ``args`` are cleaned;
    ``start_ns``/``dur_ns`` are int64 ns (see the module docstring for the rule).
    """

    ph: list[Any]
    cat: list[Any]
    kind: list[str]
    name: list[str]
    pid_raw: list[Any]
    tid_raw: list[Any]
    args: list[dict[str, Any]]
    ts_raw: list[Any]
    dur_raw: list[Any]
    start_ns: np.ndarray
    dur_ns: np.ndarray


def _kinds(ph: list[Any], cat: list[Any], src: Path, warnings: list[str]) -> list[str]:
    """``kind`` of each row: from ``cat`` for ``X`` events, ``marker`` for instants.

    An ``X`` event of a category not in ``KIND_BY_CAT`` is read as ``annotation``; the
    categories concerned are reported once in ``warnings``.
    """
    kind = map_unique(cat, _kind_of)
    if any(p != "X" for p in ph):
        kind = [k if p == "X" else "marker" for p, k in zip(ph, kind, strict=True)]
    unknown = Counter(
        c if isinstance(c, str) else str(c)  # a list or dict ``cat`` is unhashable
        for c, k, p in zip(cat, kind, ph, strict=True)
        if p == "X" and k == cats.UNKNOWN_KIND and not cats.is_str_in(c, cats.KIND_BY_CAT)
    )
    if unknown:
        warnings.append(
            f"{src}: {sum(unknown.values())} events of unknown categories "
            f"{sorted(map(str, unknown))} were read as annotation"
        )
    return kind


def _names(name_raw: list[Any]) -> list[str]:
    """``name`` of each row as text: a missing name is ``""``, a non-string one its ``str``."""
    if all(type(v) is str for v in name_raw):
        return name_raw  # the common case: no copy
    return ["" if v is None else str(v) for v in name_raw]


def _arg_dicts(rows: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """``args`` of each row; a missing or non-dict ``args`` is the shared empty dict."""
    args = [e.get("args") or _EMPTY for e in rows]
    if not all(type(a) is dict for a in args):
        args = [a if type(a) is dict else _EMPTY for a in args]
    return args


def _read_columns(
    rows: list[dict[str, Any]], src: Path, base_ns: int | None, warnings: list[str]
) -> _Columns:
    """Pull every field out of ``rows`` with one comprehension each (the per-event work of
    the loader: keep these as plain comprehensions, no per-event call of our own)."""
    ph = [e.get("ph") for e in rows]
    cat = [e.get("cat") for e in rows]
    kind = _kinds(ph, cat, src, warnings)
    name = _names([e.get("name") for e in rows])
    pid_raw = [e.get("pid") for e in rows]
    tid_raw = [e.get("tid") for e in rows]
    args = _arg_dicts(rows)
    ts_raw = [e.get("ts") for e in rows]
    dur_raw = [e.get("dur") for e in rows]
    try:
        start_ns, dur_ns, negative = _times(ph, ts_raw, dur_raw, base_ns)
    except TimeValueError:
        kept = _drop_bad_times(rows, ts_raw, dur_raw, src, warnings)
        if not kept:
            raise  # no event has a usable time: the trace is refused with the reason
        return _read_columns(kept, src, base_ns, warnings)
    if negative:
        warnings.append(f"{src}: {negative} events had a negative dur; clamped to 0")
    return _Columns(ph, cat, kind, name, pid_raw, tid_raw, args, ts_raw, dur_raw, start_ns, dur_ns)


def _drop_bad_times(
    rows: list[dict[str, Any]], ts: list[Any], dur: list[Any], src: Path, warnings: list[str]
) -> list[dict[str, Any]]:
    """``rows`` without the events whose ``ts``/``dur`` is not a finite number of µs that fits
    int64 ns (one bad field costs its event; the drop is warned once, with an example)."""
    ok = [a and b for a, b in zip(usable_us(ts), usable_us(dur, missing=0), strict=True)]
    bad = [i for i, k in enumerate(ok) if not k]
    if len(bad) == len(rows):
        return []
    first = rows[bad[0]]
    example = first.get("ts") if not usable_us([first.get("ts")])[0] else first.get("dur")
    warnings.append(
        f"{src}: {len(bad)} events with a ts/dur that is not a number of µs (e.g. "
        f"{repr(example)[:40]}) were dropped"
    )
    return [r for r, k in zip(rows, ok, strict=True) if k]


def _linking_ids(
    all_events: list[Any], c: _Columns
) -> tuple[list[int | None], list[int | None], int]:
    """``(external_id, correlation, flow_filled)``: the ids that tie host ops, runtime calls
    and GPU activity together.

    ``external_id`` is ``args["External id"]`` (or the lower-case spelling) of every row;
    ``correlation`` is ``args.correlation`` of ``CORRELATED_KINDS`` rows, completed from the
    launch flow events where missing (``flow_filled`` = rows so completed).
    """
    args = c.args
    external_id = _ints([a.get("External id", a.get("external id")) for a in args])
    correlation: list[int | None] = [None] * len(args)
    corr_idx = [i for i, k in enumerate(c.kind) if k in cats.CORRELATED_KINDS]
    for i in corr_idx:
        correlation[i] = gpu.parse_int(args[i].get("correlation"))
    flow_filled = fill_correlation_from_flows(
        all_events,
        corr_idx,
        correlation,
        pid_raw=c.pid_raw,
        tid_raw=c.tid_raw,
        ts_raw=c.ts_raw,
        dur_raw=c.dur_raw,
    )
    return external_id, correlation, flow_filled


def _category_series(cat: list[Any]) -> pl.Series:
    """``category`` column: the ``cat`` text, null where it is missing or not a string."""
    if not all(type(c) is str or c is None for c in cat):
        cat = [c if type(c) is str else None for c in cat]
    return pl.Series(cat, dtype=pl.Categorical)


def _event_frame(
    c: _Columns,
    *,
    rank: int,
    id_offset: int,
    placement: tuple[list[int | None], list[int | None], list[int | None], list[int | None]],
    external_id: list[int | None],
    correlation: list[int | None],
    pay: Payload,
) -> pl.DataFrame:
    """The partial event table in schema column order; ``placement`` is ``(device, stream,
    pid, tid)``. ``event_id = id_offset + row position``."""
    n = len(c.kind)
    device, stream, pid, tid = placement
    return pl.DataFrame(
        {
            "event_id": np.arange(id_offset, id_offset + n, dtype=np.int64),
            "kind": pl.Series(c.kind, dtype=KIND_DTYPE),
            "start_ns": c.start_ns,
            "dur_ns": c.dur_ns,
            "rank": pl.Series([rank] * n, dtype=pl.Int32),
            "device": pl.Series(device, dtype=pl.Int32),
            "stream": pl.Series(stream, dtype=pl.Int64),
            "pid": pl.Series(pid, dtype=pl.Int64),
            "tid": pl.Series(tid, dtype=pl.Int64),
            "name": pl.Series(c.name, dtype=pl.Categorical),
            "category": _category_series(c.cat),
            "correlation": pl.Series(correlation, dtype=pl.Int64),
            "external_id": pl.Series(external_id, dtype=pl.Int64),
            "bytes": pl.Series(pay.nbytes, dtype=pl.Int64),
            "copy_kind": pl.Series(pay.copy_kind, dtype=COPY_KIND_DTYPE),
            "src_mem": pl.Series(pay.src_mem, dtype=MEM_KIND_DTYPE),
            "dst_mem": pl.Series(pay.dst_mem, dtype=MEM_KIND_DTYPE),
            **{col: dim_series(col, n, *pv) for col, pv in pay.dims.items()},
            "is_comm": pl.Series(pay.is_comm, dtype=pl.Boolean),
        }
    )


def _drop_unplaced(
    src: Path,
    kind: list[str],
    device: list[int | None],
    gpu_idx: list[int],
    id_offset: int,
    tables: tuple[pl.DataFrame, pl.DataFrame],
    warnings: list[str],
) -> tuple[pl.DataFrame, pl.DataFrame]:
    """``(events, args)`` without the GPU work rows that have no device index.

    The schema requires a device on GPU work rows; one we cannot place is dropped (warned),
    not guessed. If *every* GPU work row is unplaceable, ``CorruptTraceError``: dropping
    them all would report a "CPU-only" trace.
    """
    frame, args_frame = tables
    lost = [i for i in gpu_idx if device[i] is None and kind[i] in cats.WORK_KINDS]
    if not lost:
        return frame, args_frame
    if len(lost) == sum(1 for i in gpu_idx if kind[i] in cats.WORK_KINDS):
        raise CorruptTraceError(
            f"{src}: none of the {len(lost)} GPU ops has a device index (no args.device and "
            "a pid that is not a GPU index); re-export the trace with a current PyTorch"
        )
    warnings.append(f"{src}: {len(lost)} GPU rows without a device index were dropped")
    lost_ids = pl.Series([id_offset + i for i in lost], dtype=pl.Int64).implode()
    keep = ~pl.col("event_id").is_in(lost_ids)
    return frame.filter(keep), args_frame.filter(keep)


def extract(raw: RawTrace, rank: int, id_offset: int, base_ns: int | None) -> Extracted:
    """Build the partial event table and args table of one parsed file."""
    src = raw.path
    warnings: list[str] = []
    c = _read_columns(_row_events(raw.events), src, base_ns, warnings)
    kind = c.kind

    # host ids for every row, then GPU rows get device/stream instead of an OS thread
    pid: list[int | None] = map_unique(c.pid_raw, gpu.parse_int)
    tid: list[int | None] = map_unique(c.tid_raw, gpu.parse_int)
    gpu_idx = [i for i, k in enumerate(kind) if k in cats.GPU_ROW_KINDS]
    meta = metadata_events(raw.events)
    device, stream = place_gpu_rows(
        gpu_idx,
        c.args,
        pid_raw=c.pid_raw,
        tid_raw=c.tid_raw,
        labels=gpu_labels(meta),
        host_pid=cpu_pid(meta),
        pid=pid,
        tid=tid,
    )
    external_id, correlation, flow_filled = _linking_ids(raw.events, c)
    pay = gpu_payload(kind, c.name, c.args, gpu_idx, correlation)
    frame = _event_frame(
        c,
        rank=rank,
        id_offset=id_offset,
        placement=(device, stream, pid, tid),
        external_id=external_id,
        correlation=correlation,
        pay=pay,
    )
    tables = (frame, args_table(kind, c.args, id_offset))
    frame, args_frame = _drop_unplaced(src, kind, device, gpu_idx, id_offset, tables, warnings)
    return Extracted(
        events=frame,
        args=args_frame,
        devices_seen=sorted({d for d in device if d is not None}),
        runtime_names=sorted({c.name[i] for i, k in enumerate(kind) if k == "cuda_api"}),
        legacy_categories=any(x in cats.LEGACY_CATEGORIES for x in set(map_unique(c.cat, str))),
        float_timestamps=any(type(v) is float for v in c.ts_raw),
        flow_filled=flow_filled,
        ids_used=len(kind),
        warnings=warnings,
    )
