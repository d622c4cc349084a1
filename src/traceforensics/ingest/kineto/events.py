"""One Kineto file's columns (``batches.Columns``) into a partial unified event table.

The per-event work happened while the file was decoded (``batches``); here the rules that need
the whole file run on columns: GPU placement (device labels come from metadata events that may
follow the rows), the correlation fallback from launch flows, copy sizes from the launching
runtime call, communication marks. Value-dependent rules (names, pids, tids) run once per
distinct value. Rows keep the file's order; ``event_id`` is ``id_offset + position``.

Timestamps: ``start_ns = baseTimeNanoseconds + ns(ts)`` when the file has a base, else
``ns(ts)``; ``ns`` is the exact rule of ``timeconv``. ``dur_ns = ns(dur)``, negatives clamped to
0 (warned); instants have ``dur_ns = 0``.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field
from itertools import compress
from pathlib import Path
from typing import Any, TypeVar

import numpy as np
import numpy.typing as npt
import polars as pl

from traceforensics.ingest.kineto import categories as cats
from traceforensics.ingest.kineto import gpu
from traceforensics.ingest.kineto.batches import Columns
from traceforensics.ingest.kineto.flows import cpu_pid, fill_correlation_from_flows, gpu_labels
from traceforensics.ingest.kineto.parts import ExternalPart, KeptPart
from traceforensics.ingest.kineto.payload import Payload, dim_series, gpu_payload, place_gpu_rows
from traceforensics.ingest.kineto.scanner import KEPT_KEYS
from traceforensics.model.errors import CorruptTraceError
from traceforensics.model.schema import (
    COPY_KIND_DTYPE,
    KIND_DTYPE,
    MEM_KIND_DTYPE,
)

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
    # ints within int64 parse to themselves: the common case for pid/tid
    if (
        fn is gpu.parse_int
        and set(map(type, values)) <= {int}
        and (not values or None not in (gpu.int64(min(values)), gpu.int64(max(values))))
    ):
        return list(values)
    try:
        table = {v: fn(v) for v in set(values)}
    except TypeError:  # an unhashable value (malformed event): no memo
        return [fn(v) for v in values]
    return list(map(table.__getitem__, values))


def _positions(kind: list[str], kinds: frozenset[str]) -> list[int]:
    """Row positions whose kind is one of ``kinds`` (decided once per distinct kind)."""
    member = {k: k in kinds for k in set(kind)}
    return list(compress(range(len(kind)), map(member.__getitem__, kind)))


def _warnings(src: Path, c: Columns) -> list[str]:
    """What the batches noted, one line each: unknown categories, dropped and clamped times."""
    out: list[str] = []
    if c.unknown_cats:
        out.append(
            f"{src}: {sum(c.unknown_cats.values())} events of unknown categories "
            f"{sorted(map(str, c.unknown_cats))} were read as annotation"
        )
    if c.bad_times:
        out.append(
            f"{src}: {c.bad_times} events with a ts/dur that is not a number of µs (e.g. "
            f"{repr(c.bad_example)[:40]}) were dropped"
        )
    if c.negative_dur:
        out.append(f"{src}: {c.negative_dur} events had a negative dur; clamped to 0")
    return out


def _concat(parts: list[npt.NDArray[np.int64]]) -> npt.NDArray[np.int64]:
    return np.concatenate(parts) if parts else np.zeros(0, dtype=np.int64)


def _category_series(cat: list[Any]) -> pl.Series:
    """``category`` column: the ``cat`` text, null where it is missing or not a string."""
    if not set(map(type, cat)) <= {str, type(None)}:
        cat = [c if type(c) is str else None for c in cat]
    return pl.Series(cat, dtype=pl.Categorical)


def _args_frame(parts: list[KeptPart], id_offset: int) -> pl.DataFrame:
    """The kept-args side table of the file (``parts.KeptPart``, taken out of ``parts`` one at
    a time: a part's texts are Python strings, its rows 16 bytes each, held as a polars frame
    once converted): positions shifted to event ids, key and value categorical."""
    frames = [_EMPTY_ARGS]
    for part in _drained(parts):
        texts = pl.Series(part.texts, dtype=pl.String).cast(pl.Categorical)
        frames.append(
            pl.DataFrame(
                {
                    "event_id": pl.Series(part.event + np.int64(id_offset), dtype=pl.Int64),
                    "key": _KEPT_KEY_SERIES.gather(part.key),
                    "value": texts.gather(part.value),
                }
            )
        )
    return pl.concat(frames, how="vertical")


_KEPT_KEY_SERIES = pl.Series(KEPT_KEYS, dtype=pl.Categorical)
_EMPTY_ARGS = pl.DataFrame(
    schema={"event_id": pl.Int64, "key": pl.Categorical, "value": pl.Categorical}
)


def _drained(items: list[T]) -> Iterator[T]:
    """``items`` in order, each let go by the list as it is taken (the list ends empty)."""
    items.reverse()  # pop() then takes them in order
    while items:
        yield items.pop()


def _external_series(parts: list[ExternalPart]) -> pl.Series:
    """The ``external_id`` column (Int64, null where a row has none) of the file's parts,
    taken out of ``parts`` one at a time (no joined copy of 10M ids beside them)."""
    series = [pl.Series([], dtype=pl.Int64)]
    for part in _drained(parts):
        one = pl.Series(part.ids, dtype=pl.Int64)
        if part.valid is not None and not part.valid.all():
            one = one.scatter(np.flatnonzero(~part.valid), None)
        series.append(one)
    return pl.concat(series)


def _event_frame(
    c: Columns,
    times: tuple[npt.NDArray[np.int64], npt.NDArray[np.int64]],
    *,
    rank: int,
    id_offset: int,
    rows: dict[str, list[Any]],
    external_id: pl.Series,
    pay: Payload,
) -> pl.DataFrame:
    """The partial event table in schema column order; ``rows`` holds the ``device``,
    ``stream``, ``pid``, ``tid`` and ``correlation`` lists. ``event_id = id_offset + row
    position``. Each list (of ``rows``, ``c`` and ``pay``) is let go once its column is built:
    a Python list is 8 bytes a row before its values, most columns 4 or 8 in all."""
    n = len(c.kind)

    def take(owner: Any, attr: str, dtype: Any) -> pl.Series:
        values = getattr(owner, attr)
        setattr(owner, attr, [])
        return pl.Series(values, dtype=dtype)

    kind = take(c, "kind", KIND_DTYPE)
    placed = {col: pl.Series(rows.pop(col), dtype=dt) for col, dt in _PLACEMENT.items()}
    name = take(c, "name", pl.Categorical)
    category = _category_series(c.cat)
    c.cat = []
    correlation = pl.Series(rows.pop("correlation"), dtype=pl.Int64)
    copies = {col: take(pay, attr, dt) for col, (attr, dt) in _COPY_COLUMNS.items()}
    dims = {col: dim_series(col, n, *pv) for col, pv in pay.dims.items()}
    pay.dims = {}
    return pl.DataFrame(
        {
            "event_id": np.arange(id_offset, id_offset + n, dtype=np.int64),
            "kind": kind,
            "start_ns": times[0],
            "dur_ns": times[1],
            "rank": pl.repeat(rank, n, dtype=pl.Int32, eager=True),
            **placed,
            "name": name,
            "category": category,
            "correlation": correlation,
            "external_id": external_id,
            **copies,
            **dims,
            "is_comm": take(pay, "is_comm", pl.Boolean),
        }
    )


#: ``_event_frame``'s placement columns, in schema order.
_PLACEMENT: dict[str, Any] = {
    "device": pl.Int32,
    "stream": pl.Int64,
    "pid": pl.Int64,
    "tid": pl.Int64,
}
#: ``_event_frame``'s copy columns: column -> (``Payload`` field, dtype), in schema order.
_COPY_COLUMNS: dict[str, tuple[str, Any]] = {
    "bytes": ("nbytes", pl.Int64),
    "copy_kind": ("copy_kind", COPY_KIND_DTYPE),
    "src_mem": ("src_mem", MEM_KIND_DTYPE),
    "dst_mem": ("dst_mem", MEM_KIND_DTYPE),
}


def _unplaced(
    src: Path, kind: list[str], device: list[int | None], gpu_idx: list[int]
) -> list[int]:
    """Row positions of the GPU work rows that have no device index, to be dropped.

    The schema requires a device on GPU work rows; one we cannot place is dropped (warned),
    not guessed. If *every* GPU work row is unplaceable, ``CorruptTraceError``: dropping
    them all would report a "CPU-only" trace.
    """
    lost = [i for i in gpu_idx if device[i] is None and kind[i] in cats.WORK_KINDS]
    if lost and len(lost) == sum(1 for i in gpu_idx if kind[i] in cats.WORK_KINDS):
        raise CorruptTraceError(
            f"{src}: none of the {len(lost)} GPU ops has a device index (no args.device and "
            "a pid that is not a GPU index); re-export the trace with a current PyTorch"
        )
    return lost


def extract(src: Path, c: Columns, rank: int, id_offset: int, base_ns: int | None) -> Extracted:
    """Build the partial event table and args table of one file's columns.

    ``c`` is consumed: each row list is let go as soon as what it feeds is built (the lists
    hold ~8 bytes a row each, the args structs far more: at 10M rows the columns and the
    table under construction were the peak of the whole run)."""
    warnings = _warnings(src, c)
    if c.rows == 0 and c.first_time_error is not None:
        raise c.first_time_error  # no event has a usable time: refused with the reason
    kind = c.kind
    start_ns, dur_ns = _concat(c.start_parts), _concat(c.dur_parts)
    c.start_parts, c.dur_parts = [], []

    # host ids for every row, then GPU rows get device/stream instead of an OS thread
    pid: list[int | None] = map_unique(c.pid_raw, gpu.parse_int)
    tid: list[int | None] = map_unique(c.tid_raw, gpu.parse_int)
    gpu_idx = _positions(kind, cats.GPU_ROW_KINDS)
    device, stream = place_gpu_rows(
        gpu_idx,
        c.args,
        pid_raw=c.pid_raw,
        tid_raw=c.tid_raw,
        labels=gpu_labels(c.meta),
        host_pid=cpu_pid(c.meta),
        pid=pid,
        tid=tid,
    )
    correlation = c.correlation
    flow_filled = fill_correlation_from_flows(
        c.flows,
        _positions(kind, cats.CORRELATED_KINDS),
        correlation,
        pid_raw=c.pid_raw,
        tid_raw=c.tid_raw,
        start_ns=start_ns,
        dur_ns=dur_ns,
    )
    c.pid_raw, c.tid_raw, c.flows = [], [], {}
    if base_ns is not None:
        start_ns = start_ns + np.int64(base_ns)
    pay = gpu_payload(kind, c.name, c.args, gpu_idx, correlation)
    c.args = []
    # what the metadata needs from the row lists, before they go
    lost = _unplaced(src, kind, device, gpu_idx)
    devices_seen = sorted({d for d in device if d is not None})
    runtime_names = sorted(set(compress(c.name, map("cuda_api".__eq__, kind))))
    legacy = any(x in cats.LEGACY_CATEGORIES for x in set(map_unique(c.cat, str)))
    ids_used = len(kind)
    args = _args_frame(c.arg_parts, id_offset)  # (empties the list)
    external = _external_series(c.external_parts)  # (empties the list)
    rows = {"device": device, "stream": stream, "pid": pid, "tid": tid, "correlation": correlation}
    del kind, device, stream, pid, tid, correlation, gpu_idx
    events = _event_frame(
        c,
        (start_ns, dur_ns),
        rank=rank,
        id_offset=id_offset,
        rows=rows,
        external_id=external,
        pay=pay,
    )
    if lost:
        warnings.append(f"{src}: {len(lost)} GPU rows without a device index were dropped")
        keep = ~pl.col("event_id").is_in(pl.Series([id_offset + i for i in lost]).implode())
        events, args = events.filter(keep), args.filter(keep)
    return Extracted(
        events=events,
        args=args,
        devices_seen=devices_seen,
        runtime_names=runtime_names,
        legacy_categories=legacy,
        float_timestamps=c.float_timestamps,
        flow_filled=flow_filled,
        ids_used=ids_used,
        warnings=warnings,
    )
