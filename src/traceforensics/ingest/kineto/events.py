"""One Kineto file's columns (``columns.Columns``) into a partial unified event table.

The per-event work happened while the file was decoded (``batches``); the rules that need the
whole file (GPU placement, the correlation fallback from launch flows, copy sizes, kernel dims,
communication marks) are ``rows.row_rules``, run here or already by the early-scan child
(``Columns.rules``); here their lists become polars columns. Rows keep the file's order;
``event_id`` is ``id_offset + position``.

Timestamps: ``start_ns = baseTimeNanoseconds + ns(ts)`` when the file has a base, else
``ns(ts)``; ``ns`` is the exact rule of ``timeconv``. ``dur_ns = ns(dur)``, negatives clamped to
0 (warned); instants have ``dur_ns = 0``.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, TypeVar

import numpy as np
import numpy.typing as npt
import polars as pl

from traceforensics.ingest.kineto.columns import Columns
from traceforensics.ingest.kineto.parts import ROW_KINDS, ExternalPart, KeptPart
from traceforensics.ingest.kineto.payload import Dims, Payload
from traceforensics.ingest.kineto.rows import IntRows, row_rules
from traceforensics.ingest.kineto.scanner import KEPT_KEYS
from traceforensics.model.errors import CorruptTraceError
from traceforensics.model.schema import (
    COPY_KIND_DTYPE,
    KIND_DTYPE,
    MEM_KIND_DTYPE,
)

T = TypeVar("T")
G = TypeVar("G", bound=np.generic)


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
                    "key": _KEPT_KEY_SERIES.gather(_index(part.key)),
                    "value": texts.gather(_index(part.value)),
                }
            )
        )
    return pl.concat(frames, how="vertical")


def _index(codes: npt.NDArray[np.integer[Any]]) -> pl.Series:
    """Non-negative codes as a gather index of polars' own type (UInt32): a numpy array of
    another int type is converted inside every gather (~0.3 ms per 100k codes here)."""
    return pl.Series(codes.astype(np.uint32))


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
        one = pl.Series(owned(part.ids), dtype=pl.Int64)
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
    rows: dict[str, IntRows],
    external_id: pl.Series,
    pay: Payload,
) -> pl.DataFrame:
    """The partial event table in schema column order; ``rows`` holds the ``device``,
    ``stream``, ``pid``, ``tid`` and ``correlation`` rows.
    ``event_id = id_offset + row position``. Each list (of ``rows`` and ``c``) is let go once
    its column is built: a Python list is 8 bytes a row before its values, most columns 4 or 8
    in all; ``pay``'s columns are sparse parts (``payload.Payload``)."""
    n = c.rows
    kind, name, category = _text_series(c)
    placed = {col: int_series(rows.pop(col), dt) for col, dt in _PLACEMENT.items()}
    correlation = int_series(rows.pop("correlation"), pl.Int64)
    copies = {
        col: _sparse(n, pay.mem_rows, getattr(pay, attr), dt)
        for col, (attr, dt) in _COPY_COLUMNS.items()
    }
    is_comm = np.zeros(n, dtype=bool)
    is_comm[pay.comm_rows] = True
    dims = {col: dim_series(col, n, pv) for col, pv in pay.dims.items()}
    pay.dims = {}
    return pl.DataFrame(
        {
            "event_id": np.arange(id_offset, id_offset + n, dtype=np.int64),
            "kind": kind,
            "start_ns": owned(times[0]),
            "dur_ns": owned(times[1]),
            "rank": pl.repeat(rank, n, dtype=pl.Int32, eager=True),
            **placed,
            "name": name,
            "category": category,
            "correlation": correlation,
            "external_id": external_id,
            **copies,
            **dims,
            "is_comm": pl.Series(is_comm),
        }
    )


def _text_series(c: Columns) -> tuple[pl.Series, pl.Series, pl.Series]:
    """The ``kind``, ``name`` and ``category`` columns: from the codes the early-scan child
    sent (``Columns.coded``: the distinct values gathered by code), else from the lists. Each
    is let go once its column is built."""
    coded, c.coded = c.coded, None
    if coded is not None:
        coded.settle()
        return (
            pl.Series(ROW_KINDS, dtype=KIND_DTYPE).gather(_index(coded.kind[0])),
            pl.Series(coded.names, dtype=pl.Categorical).gather(_index(coded.name[0])),
            _category_series(coded.cats).gather(_index(coded.cat[0])),
        )

    def take(attr: str) -> list[Any]:
        values: list[Any] = getattr(c, attr)
        setattr(c, attr, [])
        return values

    return (
        pl.Series(take("kind"), dtype=KIND_DTYPE),
        pl.Series(take("name"), dtype=pl.Categorical),
        _category_series(take("cat")),
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


def int_series(values: IntRows, dtype: Any) -> pl.Series:
    """The integer column ``dtype`` of a row list (null where it holds None)."""
    return pl.Series(values, dtype=dtype)


def owned(array: npt.NDArray[G]) -> npt.NDArray[G]:
    """``array``, copied when it is a view of memory it does not own. A polars column made of a
    numpy array is a view of it: one of the early scan's answer (``answer_file``, a view of
    its mapping) would hold the whole mapping (~6.4 MB for the 1x ResNet-50 trace) for as
    long as the table lives; a copy of the column's own rows costs ~0.1 ms a MB."""
    return array if array.base is None else array.copy()


def _sparse(n: int, rows: list[int], values: list[Any], dtype: Any) -> pl.Series:
    """A column of ``n`` rows: ``values`` at positions ``rows``, null elsewhere."""
    null = pl.Series(dtype=dtype).extend_constant(None, n)
    return null.scatter(rows, pl.Series(values, dtype=dtype)) if rows else null


def dim_series(name: str, n: int, dims: Dims) -> pl.Series:
    """A ``List(Int32)`` column of ``n`` rows: the [x, y, z] of ``dims`` (``payload``: row
    positions and their int32 [k, 3] block) at its positions, null elsewhere."""
    positions, values = dims
    block = np.zeros((n, 3), dtype=np.int32)
    present = np.zeros(n, dtype=bool)
    block[positions] = values
    present[positions] = True
    lists = pl.Series(name, block).arr.to_list()
    return pl.select(
        pl.when(pl.lit(pl.Series(present))).then(pl.lit(lists)).otherwise(None).alias(name)
    ).to_series()


def extract(src: Path, c: Columns, rank: int, id_offset: int, base_ns: int | None) -> Extracted:
    """Build the partial event table and args table of one file's columns.

    ``c`` is consumed: each row list is let go as soon as what it feeds is built (the lists
    hold ~8 bytes a row each, the args structs far more: at 10M rows the columns and the
    table under construction were the peak of the whole run). The row rules are those the
    early-scan child ran (``c.rules``), else ``rows.row_rules`` runs here.

    The schema requires a device on GPU work rows: one the rules cannot place is dropped
    (warned), not guessed. If *every* GPU work row is unplaceable, ``CorruptTraceError``:
    dropping them all would report a "CPU-only" trace."""
    warnings = _warnings(src, c)
    if c.rows == 0 and c.first_time_error is not None:
        raise c.first_time_error  # no event has a usable time: refused with the reason
    rules = c.rules if c.rules is not None else row_rules(c)
    c.rules = None
    lost = rules.lost
    if lost and len(lost) == rules.gpu_work:
        raise CorruptTraceError(
            f"{src}: none of the {len(lost)} GPU ops has a device index (no args.device and "
            "a pid that is not a GPU index); re-export the trace with a current PyTorch"
        )
    start_ns = rules.start_ns
    if base_ns is not None:
        start_ns = start_ns + np.int64(base_ns)
    ids_used = c.rows
    args = _args_frame(c.arg_parts, id_offset)  # (empties the list)
    external = _external_series(c.external_parts)  # (empties the list)
    rows: dict[str, IntRows] = {
        "device": rules.device,
        "stream": rules.stream,
        "pid": rules.pid,
        "tid": rules.tid,
        "correlation": rules.correlation,
    }
    pay = rules.pay
    rules.device, rules.stream, rules.pid, rules.tid, rules.correlation = [], [], [], [], []
    events = _event_frame(
        c,
        (start_ns, rules.dur_ns),
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
        devices_seen=rules.devices_seen,
        runtime_names=rules.runtime_names,
        legacy_categories=rules.legacy_categories,
        float_timestamps=c.float_timestamps,
        flow_filled=rules.flow_filled,
        ids_used=ids_used,
        warnings=warnings,
    )
