"""The row rules that need the whole file, as polars expressions over its decoded parts.

``decode.Decoded`` holds a file's rows as parts (a chunk at a time); the rules here need every
row and the metadata (which may follow the rows), and make the partial event table::

    parts (kind, times, name, category, pid/tid codes, correlation, external_id)
      + rule args (GPU and runtime rows)  + metadata (GPU labels, the CPU process)
      + launch flows (the correlation fallback)
    -> event_id, kind, start_ns, dur_ns, rank, device, stream, pid, tid, name, category,
       correlation, external_id, bytes, copy_kind, src_mem, dst_mem, grid, block, is_comm

- host ids: ``pid``/``tid`` parsed from the raw values (``gpu.parse_int``), once per distinct
  value; GPU rows (``GPU_ROW_KINDS``) get ``pid`` = the recording process (the pid labelled
  ``CPU``) and no tid;
- device of a GPU row: ``args.device``, else the pid's ``GPU n`` label, else the numeric pid
  (``gpu.device_from_pid``); stream: ``args.stream`` (an int), else the tid (``7``,
  ``"stream 7"``); a GPU work row with no device is dropped (warned; all of them: refused);
- correlation: ``args.correlation``, else a launch-flow endpoint on the row's thread at or
  after its start and not after its end (``flows.fill_correlation_from_flows``);
- copies (memcpy/memset rows): ``bytes`` from ``args.bytes``, else the size the launching
  runtime call carries (the last such call of that correlation); ``copy_kind``/``src_mem``/
  ``dst_mem`` from the name (``gpu.memcpy_kinds``, ROCm ``args.kind``), ``dst_mem`` of a
  memset from its name;
- ``grid``/``block`` of kernels; ``is_comm``: kernels named as communication (``model.comm``)
  or carrying ``Collective name``, host ops named as collectives (``gpu.is_comm_host``).

``start_ns = baseTimeNanoseconds + ns(ts)`` when the file has a base; ``event_id = id_offset +
row position`` (dropped rows leave gaps).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import polars as pl

from traceforensics.ingest.kineto import categories as cats
from traceforensics.ingest.kineto import gpu
from traceforensics.ingest.kineto.colscan import KEPT_KEYS
from traceforensics.ingest.kineto.decode import ROW_KINDS, Array, Decoded
from traceforensics.ingest.kineto.flows import cpu_pid, fill_correlation_from_flows, gpu_labels
from traceforensics.model.errors import CorruptTraceError
from traceforensics.model.schema import COPY_KIND_DTYPE, EVENT_SCHEMA, MEM_KIND_DTYPE

_RULE_COLUMNS = ("device", "stream", "bytes", "api_bytes", "rocm_kind", "grid", "block")


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


def _warnings(src: Path, d: Decoded) -> list[str]:
    """What the decode noted, one line each: unknown categories, dropped and clamped times."""
    out: list[str] = []
    if d.unknown_cats:
        out.append(
            f"{src}: {sum(d.unknown_cats.values())} events of unknown categories "
            f"{sorted(map(str, d.unknown_cats))} were read as annotation"
        )
    if d.bad_times:
        out.append(
            f"{src}: {d.bad_times} events with a ts/dur that is not a number of µs (e.g. "
            f"{repr(d.bad_example)[:40]}) were dropped"
        )
    if d.negative_dur:
        out.append(f"{src}: {d.negative_dur} events had a negative dur; clamped to 0")
    return out


def _joined(part: dict[str, list[Array]], name: str, dtype: Any = np.int64) -> Array:
    """Column ``name`` of a part (``decode.Decoded``), its chunks joined (always a copy: a
    chunk the early scan sent is a view of its answer's mapping, which the table must not
    hold) and let go."""
    chunks = part.pop(name, [])
    if not chunks:
        return np.zeros((0, 3) if name in _DIMS else 0, dtype=dtype)
    return np.concatenate(chunks)


def _nullable(
    part: dict[str, list[Array]], name: str, dtype: Any, at: Array | None = None, n: int = 0
) -> pl.Series:
    """A nullable column of a part: its values, null where ``<name>_valid`` is False; with
    ``at`` (the rows the part holds), a column of ``n`` rows, null elsewhere."""
    values, valid = _joined(part, name), _joined(part, name + "_valid", bool)
    if at is not None:
        values, valid = _spread(values, at, n), _spread(valid, at, n)
    out = pl.Series(name, values, dtype=dtype)
    return out if valid.all() else out.scatter(np.flatnonzero(~valid), None)


def _dims(part: dict[str, list[Array]], name: str) -> pl.Series:
    """A ``grid``/``block`` column (``List(Int32)``) of a part's [k, 3] block, null where the
    row has none."""
    block, valid = _joined(part, name, np.int32), _joined(part, name + "_valid", bool)
    lists = pl.Series(name, block).arr.to_list() if len(block) else pl.Series(name, [], _DIM)
    if valid.all():
        return lists
    return pl.select(pl.when(pl.lit(pl.Series(valid))).then(pl.lit(lists)).alias(name)).to_series()


def _spread(values: Array, at: Array, n: int) -> Array:
    """``values`` of the rows at ``at`` as a column of ``n`` rows (zero elsewhere)."""
    out = np.zeros(n, dtype=values.dtype)
    out[at] = values
    return out


def _texts(d: Decoded, column: str, codes: Array) -> pl.Series:
    """The categorical column of ``codes`` into the file's distinct values of ``column``."""
    values = list(d.distinct.get(column, {}))
    return pl.Series(values, dtype=pl.String).cast(pl.Categorical).gather(codes)


def _rows(d: Decoded) -> tuple[pl.DataFrame, pl.DataFrame]:
    """``(every row, with its device and stream args; the other rule args of the rows that
    carry them, by position)``: the rule args a few columns need stay sparse."""
    r, u, n = d.rows, d.rule, d.n_rows
    at = _joined(u, "pos")
    rows = pl.DataFrame(
        {
            "pos": np.arange(n, dtype=np.int64),
            "kind": pl.Series(ROW_KINDS, dtype=EVENT_SCHEMA["kind"]).gather(
                _joined(r, "kind", np.int8).astype(np.uint32)
            ),
            "start_ns": _joined(r, "start_ns"),
            "dur_ns": _joined(r, "dur_ns"),
            "name": _texts(d, "name", _joined(r, "name", np.uint32)),
            "category": _texts(d, "category", _joined(r, "category", np.uint32)),
            "pid_code": _joined(r, "pid", np.uint32),
            "tid_code": _joined(r, "tid", np.uint32),
            "correlation": _nullable(r, "correlation", pl.Int64),
            "external_id": _nullable(r, "external_id", pl.Int64),
            "device": _nullable(u, "device", pl.Int32, at, n),
            "stream": _nullable(u, "stream", pl.Int64, at, n),
        }
    )
    rocm_kind = pl.Series(list(d.distinct.get("rocm_kind", {})), dtype=pl.String)
    rule = pl.DataFrame(
        {
            "pos": at,
            "bytes": _nullable(u, "bytes", pl.Int64),
            "api_bytes": _nullable(u, "api_bytes", pl.Int64),
            "rocm_kind": rocm_kind.gather(_joined(u, "rocm_kind", np.uint32)),
            "grid": _dims(u, "grid"),
            "block": _dims(u, "block"),
            "collective": _joined(u, "collective", bool),
        }
    )
    return rows, rule


def _args(d: Decoded, id_offset: int) -> pl.DataFrame:
    """The args side table: (event_id, key, value), key and value categorical."""
    k = d.kept
    return pl.DataFrame(
        {
            "event_id": _joined(k, "pos") + np.int64(id_offset),
            "key": pl.Series(KEPT_KEYS, dtype=pl.Categorical).gather(_joined(k, "key", np.uint32)),
            "value": _texts(d, "kept", _joined(k, "value", np.uint32)),
        }
    )


_DIM = pl.List(pl.Int32)
_DIMS = ("grid", "block")


def _by_raw(d: Decoded, column: str, fn: Any, dtype: Any) -> pl.Series:
    """``fn`` of each distinct raw value of ``column`` (``pid``/``tid``), indexed by its code."""
    return pl.Series([fn(v) for v in d.distinct.get(column, {})], dtype=dtype)


def _flow_correlation(d: Decoded, rows: pl.DataFrame) -> tuple[pl.Series, int]:
    """The correlation column with the launch flows' fallback filled, and how many were."""
    correlation = rows.get_column("correlation")
    missing = rows.filter(
        pl.col("kind").is_in(sorted(cats.CORRELATED_KINDS)) & pl.col("correlation").is_null()
    )
    if missing.height == 0 or not d.flows:
        return correlation, 0
    pids, tids = list(d.distinct.get("pid", {})), list(d.distinct.get("tid", {}))
    values: list[int | None] = [None] * rows.height
    candidates = missing.get_column("pos").to_list()
    pid_raw: list[Any] = [None] * rows.height
    tid_raw: list[Any] = [None] * rows.height
    for i, p, t in missing.select("pos", "pid_code", "tid_code").iter_rows():
        pid_raw[i], tid_raw[i] = pids[p], tids[t]
    filled = fill_correlation_from_flows(
        d.flows,
        candidates,
        values,
        pid_raw=pid_raw,
        tid_raw=tid_raw,
        start_ns=rows.get_column("start_ns").to_numpy(),
        dur_ns=rows.get_column("dur_ns").to_numpy(),
    )
    if not filled:
        return correlation, 0
    return correlation.fill_null(pl.Series(values, dtype=pl.Int64)), filled


def _extra(rows: pl.DataFrame, rule: pl.DataFrame) -> pl.DataFrame:
    """The columns only copies and kernels fill, by position (the rows that have them):
    ``bytes``, ``copy_kind``, ``src_mem``, ``dst_mem`` of memcpy/memset rows (the kinds once
    per distinct (kind, name, ROCm kind)); ``grid``, ``block``, ``collective`` of kernels."""
    kind = pl.col("kind")
    rows = rows.select("pos", "kind", "name", "correlation")
    api = (
        rows.filter(kind == "cuda_api")
        .join(rule.select("pos", "api_bytes"), on="pos")
        .filter(pl.col("api_bytes").is_not_null() & pl.col("correlation").is_not_null())
        .group_by("correlation", maintain_order=True)
        .agg(pl.col("api_bytes").last())
    )
    mem = rows.filter(kind.is_in(["memcpy", "memset"])).join(
        rule.select("pos", "bytes", "rocm_kind"), on="pos", how="left", maintain_order="left"
    )
    names = mem.select("kind", "name", "rocm_kind").unique(maintain_order=True)
    kinds = [
        gpu.memcpy_kinds(n, k) if kind == "memcpy" else (None, None, gpu.memset_dst(n))
        for kind, n, k in names.iter_rows()
    ]
    names = names.with_columns(
        pl.Series("copy_kind", [k[0] for k in kinds], dtype=COPY_KIND_DTYPE),
        pl.Series("src_mem", [k[1] for k in kinds], dtype=MEM_KIND_DTYPE),
        pl.Series("dst_mem", [k[2] for k in kinds], dtype=MEM_KIND_DTYPE),
    )
    mem = (
        mem.join(names, on=["kind", "name", "rocm_kind"], how="left", nulls_equal=True)
        .join(api, on="correlation", how="left")
        .select("pos", pl.coalesce("bytes", "api_bytes").alias("bytes"), *_COPY_KINDS)
    )
    kernels = (
        rows.filter(kind == "kernel")
        .select("pos")
        .join(rule.select("pos", "grid", "block", "collective"), on="pos")
    )
    return pl.concat([mem, kernels], how="diagonal").sort("pos")


_COPY_KINDS = ("copy_kind", "src_mem", "dst_mem")


def _is_comm(rows: pl.DataFrame) -> pl.Expr:
    """``is_comm`` (see the module docstring); each name is tested once."""
    names = rows.get_column("name").unique().to_list()
    kernels = [n for n in names if n is not None and gpu.is_comm_kernel(n)]
    host = [n for n in names if n is not None and gpu.is_comm_host(n)]
    kind = pl.col("kind")
    name = pl.col("name").cast(pl.String)
    collective = pl.col("collective").fill_null(False)
    return ((kind == "kernel") & (name.is_in(kernels) | collective)) | (
        kind.is_in(sorted(cats.HOST_COMM_KINDS)) & name.is_in(host)
    )


def extract(src: Path, d: Decoded, rank: int, id_offset: int, base_ns: int | None) -> Extracted:
    """The partial event table and args table of one file's decoded rows (``d`` is
    consumed). The schema requires a device on GPU work rows: one the rules cannot place is
    dropped (warned), not guessed; if every GPU work row is unplaceable, ``CorruptTraceError``
    (dropping them all would report a "CPU-only" trace)."""
    warnings = _warnings(src, d)
    if d.n_rows == 0 and d.first_time_error is not None:
        raise d.first_time_error  # no event has a usable time: refused with the reason
    args = _args(d, id_offset)
    rows, rule = _rows(d)
    labels, host_pid = gpu_labels(d.meta), cpu_pid(d.meta)
    is_gpu = pl.col("kind").is_in(sorted(cats.GPU_ROW_KINDS))
    pid_code, tid_code = rows.get_column("pid_code"), rows.get_column("tid_code")
    rows = rows.with_columns(
        _by_raw(d, "pid", lambda v: gpu.device_from_pid(v, labels), pl.Int32)
        .gather(pid_code)
        .alias("pid_device"),
        _by_raw(d, "tid", gpu.parse_stream, pl.Int64).gather(tid_code).alias("tid_stream"),
        _by_raw(d, "pid", gpu.parse_int, pl.Int64).gather(pid_code).alias("pid_int"),
        _by_raw(d, "tid", gpu.parse_int, pl.Int64).gather(tid_code).alias("tid_int"),
    ).with_columns(
        pl.when(is_gpu).then(pl.coalesce("device", "pid_device")).alias("device"),
        pl.when(is_gpu).then(pl.coalesce("stream", "tid_stream")).alias("stream"),
        pl.when(is_gpu).then(pl.lit(host_pid, dtype=pl.Int64)).otherwise("pid_int").alias("pid"),
        pl.when(is_gpu).then(None).otherwise("tid_int").alias("tid"),
    )
    correlation, flow_filled = _flow_correlation(d, rows)
    rows = rows.with_columns(correlation.alias("correlation")).drop(
        "pid_code", "tid_code", "pid_device", "tid_stream", "pid_int", "tid_int"
    )
    work = rows.filter(pl.col("kind").is_in(sorted(cats.WORK_KINDS)) & is_gpu)
    lost = work.filter(pl.col("device").is_null()).get_column("pos")
    if lost.len() and lost.len() == work.height:
        raise CorruptTraceError(
            f"{src}: none of the {lost.len()} GPU ops has a device index (no args.device and "
            "a pid that is not a GPU index); re-export the trace with a current PyTorch"
        )
    events = rows.join(_extra(rows, rule), on="pos", how="left", maintain_order="left")
    del rule
    events = events.select(
        (pl.col("pos") + id_offset).alias("event_id"),
        "kind",
        pl.col("start_ns") + (base_ns or 0),
        "dur_ns",
        pl.lit(rank, dtype=pl.Int32).alias("rank"),
        "device",
        "stream",
        "pid",
        "tid",
        "name",
        "category",
        "correlation",
        "external_id",
        "bytes",
        *_COPY_KINDS,
        "grid",
        "block",
        _is_comm(rows).alias("is_comm"),
    )
    gpu_rows = rows.filter(is_gpu)
    if lost.len():
        warnings.append(f"{src}: {lost.len()} GPU rows without a device index were dropped")
        keep = ~pl.col("event_id").is_in((lost + id_offset).implode())
        events, args = events.filter(keep), args.filter(keep)
    return Extracted(
        events=events,
        args=args,
        devices_seen=sorted(gpu_rows.get_column("device").drop_nulls().unique().to_list()),
        runtime_names=sorted(
            rows.filter(pl.col("kind") == "cuda_api")
            .get_column("name")
            .cast(pl.String)
            .unique()
            .to_list()
        ),
        legacy_categories=bool(
            rows.get_column("category").cast(pl.String).is_in(sorted(cats.LEGACY_CATEGORIES)).any()
        ),
        float_timestamps=d.float_timestamps,
        flow_filled=flow_filled,
        ids_used=d.n_rows,
        warnings=warnings,
    )


__all__ = ["Extracted", "extract"]
