"""Read a rocprof Chrome trace (v1 ``results.json``, v2 ``--plugin json``) into a session.

Rows (``X`` events) take their meaning from their process's lane (``lanes``):

- ``api`` lanes (v1 ``CPU HIP API``/``CPU HSA API``) -> ``cuda_api``; v2's ``CPU`` lane ->
  ``cuda_api`` for ``hip*``/``hsa_*`` names, else ``annotation`` (roctx ranges), as v1's
  ``Markers and Ranges``;
- ``gpu`` -> ``kernel``; ``barrier`` -> ``gpu_sync``; ``copy`` -> ``memcpy`` (``memset`` for a
  ``Fill*``/``Memset*`` name); ``blit`` -> ``memset`` for fills, ``gpu_sync`` for
  ``Marker``/``Barrier``, else ``kernel``. A copy's direction is read from its name
  (``CopyHostToDevice`` -> ``h2d``, ...; else ``unknown``).
- Times: v1's ``args.BeginNs``/``EndNs`` (exact ns) when both are integers, else ``ts``/``dur``
  (µs, written as text or numbers) x 1000. rocprof's clock is the host's monotonic clock, not
  wall-clock time.
- Device: v1 ``GPU<n>`` labels, v1 copies' ``args.dev-id``, v2 ``tid - 1`` (``GPU``) or ``tid``
  (``HIPBLITKERNELS``). Work no lane places (v2 copies, v1 HSA async copies) goes to the
  trace's only GPU; with none or several, to the lowest number, with a warning.
- Stream: v1 ``tid`` (rocprof's stream index); v2 draws one lane per process, so its ``pid``.
- Host rows: ``tid`` = the thread; ``pid`` = v1's ``args.pid`` (the OS process), else null.
- Correlation: v2's ``args.cid``; v1 has none, so its ``DataFlow`` flows (``flows``).
- Bytes of a copy or fill: the ``sizeBytes(N)`` in its call's argument text (v1 only).
- ``category``: the label of the row's process (v1 writes no ``cat``).
- Events on processes rocprof does not name are left out, with a warning.
"""

from __future__ import annotations

import re
from collections import Counter
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import polars as pl

from traceforensics.ingest.rocprof.decode import Event, decode, integer, us_to_ns
from traceforensics.ingest.rocprof.flows import flow_correlation
from traceforensics.ingest.rocprof.lanes import lane_of, producer_of
from traceforensics.ingest.rocprof.meta import devices_of
from traceforensics.model.comm import COMM_KERNEL_RE, NOT_COMM_KERNEL_RE
from traceforensics.model.errors import CorruptTraceError
from traceforensics.model.schema import conform_events
from traceforensics.model.session import InputInfo, TraceMeta, TraceSession

FORMAT = "rocprof"
#: What ``_rows`` counts, as the warning says it.
_COUNTED = {
    "unnamed": "events on processes rocprof does not name were left out",
    "untimed": "events without a readable ts/dur were left out",
    "clamped": "events ended before they began; their durations were set to 0",
}
_API_NAME = re.compile(r"^(hip|hsa_)")
_FILL = re.compile(r"(?i)^(fill|memset)")
_SYNC = re.compile(r"(?i)^(marker|barrier)|<barrier packet>")
_DIRECTIONS = (
    ("h2d", r"HostToDevice|HtoD"),
    ("d2h", r"DeviceToHost|DtoH"),
    ("d2d", r"DeviceToDevice|DtoD"),
    ("h2h", r"HostToHost|HtoH"),
    ("p2p", r"(?i)peer|p2p"),
)


def _kind(lane: str, name: str) -> str:
    if lane in ("api", "cpu"):
        return "cuda_api" if lane == "api" or _API_NAME.match(name) else "annotation"
    if lane == "ranges":
        return "annotation"
    if lane == "barrier" or (lane == "blit" and _SYNC.search(name)):
        return "gpu_sync"
    if lane in ("copy", "blit") and _FILL.match(name):
        return "memset"
    return "memcpy" if lane == "copy" else "kernel"


def _device(lane: str, label: int | None, tid: int | None, args: dict[str, Any]) -> int | None:
    """The GPU number a row's lane (or v1's ``dev-id``) gives, None when it gives none that
    can be a device index (0 to 2^31 - 1)."""
    if label is not None:
        device: int | None = label
    elif lane == "gpu":  # v2: agent + 1
        device = tid - 1 if tid is not None else None
    elif lane == "blit":
        device = tid
    else:
        device = integer(args.get("dev-id")) if lane == "copy" else None
    return device if device is not None and 0 <= device < 1 << 31 else None


def _rows(
    events: list[Event],
    labels: Mapping[Any, str],
    lanes: Mapping[Any, tuple[str, int | None]],
    v2: bool,
) -> tuple[dict[str, list[Any]], list[tuple[Any, Any, Any, int]], Counter[str]]:
    """Column lists of the rows, the flow ends ``(id, pid, tid, ts_us)``, and the counts of
    events left out (``unnamed`` process, ``untimed``) or ``clamped`` (an end before the
    start: duration 0)."""
    cols: dict[str, list[Any]] = {
        k: []
        for k in (
            "kind", "name", "category", "start_ns", "dur_ns", "device", "stream", "pid", "tid",
            "jpid", "jtid", "start_us", "end_us", "correlation", "call_args",
        )
    }  # fmt: skip
    flows: list[tuple[Any, Any, Any, int]] = []
    counts: Counter[str] = Counter()
    for ev in events:
        if ev.ph in ("s", "t", "f") and ev.id is not None:
            ts = us_to_ns(ev.ts)
            if ts is not None and isinstance(ev.pid, (int, str)):
                flows.append((str(ev.id), str(ev.pid), str(ev.tid), ts // 1000))
            continue
        if ev.ph != "X":
            continue
        lane = lanes.get(ev.pid) if isinstance(ev.pid, (int, str)) else None
        if lane is None:
            counts["unnamed"] += 1
            continue
        args = ev.args if isinstance(ev.args, dict) else {}
        begin, end = integer(args.get("BeginNs")), integer(args.get("EndNs"))
        if begin is None or end is None:
            begin, dur = us_to_ns(ev.ts), us_to_ns(ev.dur)
            end = begin + dur if begin is not None and dur is not None else None
        if begin is None or end is None:
            counts["untimed"] += 1
            continue
        if end < begin:
            counts["clamped"] += 1
            end = begin
        name = str(ev.name) if ev.name is not None else str(args.get("Name", ""))
        kind = _kind(lane[0], name)
        tid = integer(ev.tid)
        gpu = kind not in ("cuda_api", "annotation")
        cols["kind"].append(kind)
        cols["name"].append(name)
        cols["category"].append(labels[ev.pid])
        cols["start_ns"].append(begin)
        cols["dur_ns"].append(end - begin)
        cols["device"].append(_device(lane[0], lane[1], tid, args) if gpu else None)
        cols["stream"].append((integer(ev.pid) if v2 else tid) if gpu else None)
        cols["pid"].append(integer(args.get("pid")))
        cols["tid"].append(None if gpu else tid)
        cols["jpid"].append(str(ev.pid))
        cols["jtid"].append(str(ev.tid))
        cols["start_us"].append(begin // 1000)
        cols["end_us"].append(-(-end // 1000))
        cols["correlation"].append(integer(args.get("cid")) if kind != "annotation" else None)
        call_args = args.get("args") if kind == "cuda_api" else None
        cols["call_args"].append(call_args if isinstance(call_args, str) else None)
    return cols, flows, counts


def _labels(events: list[Event]) -> dict[Any, str]:
    """``pid -> process_name`` label of the metadata events."""
    out: dict[Any, str] = {}
    for ev in events:
        if ev.ph == "M" and ev.name == "process_name" and isinstance(ev.args, dict):
            label = ev.args.get("name")
            if isinstance(label, str) and isinstance(ev.pid, (int, str)):
                out[ev.pid] = label
    return out


def _place_unplaced(frame: pl.DataFrame, src: str) -> tuple[pl.DataFrame, list[str]]:
    """Work rows without a device go to the trace's only GPU (the lowest, with a warning, when
    it has none or several)."""
    gpu = pl.col("kind").is_in(["kernel", "memcpy", "memset", "gpu_sync"])
    missing = frame.filter(gpu & pl.col("device").is_null()).height
    if not missing:
        return frame, []
    known = sorted(set(frame.filter(gpu).get_column("device").drop_nulls().to_list()))
    target = known[0] if known else 0
    placed = frame.with_columns(
        pl.when(gpu & pl.col("device").is_null())
        .then(pl.lit(target))
        .otherwise(pl.col("device"))
        .alias("device")
    )
    if len(known) == 1:
        return placed, []
    why = "the trace names no GPU" if not known else f"the trace has {len(known)} GPUs"
    return placed, [
        f"{src}: {missing} GPU operations name no GPU (rocprof's COPY lane) and {why}; they "
        f"are counted on GPU {target}"
    ]


def _with_bytes(frame: pl.DataFrame) -> pl.DataFrame:
    """``bytes`` of copies and fills: the ``sizeBytes(N)`` of the call that queued them (v1
    writes each call's arguments as text in ``args.args``; v2 writes none: null)."""
    sizes = (
        frame.filter((pl.col("kind") == "cuda_api") & pl.col("correlation").is_not_null())
        .select(
            "correlation",
            pl.col("call_args").str.extract(r"\bsizeBytes\((\d+)\)").cast(pl.Int64).alias("bytes"),
        )
        .drop_nulls("bytes")
        .unique("correlation", keep="first")
    )
    moved = pl.col("kind").is_in(["memcpy", "memset"])
    return frame.join(sizes, on="correlation", how="left", maintain_order="left").with_columns(
        pl.when(moved).then(pl.col("bytes")).alias("bytes")
    )


def _copy_kind() -> pl.Expr:
    """``copy_kind`` of memcpy rows from their names (``_DIRECTIONS``, first match)."""
    out = pl.lit("unknown")
    for direction, pattern in reversed(_DIRECTIONS):
        out = pl.when(pl.col("name").str.contains(pattern)).then(pl.lit(direction)).otherwise(out)
    return pl.when(pl.col("kind") == "memcpy").then(out).alias("copy_kind")


def load_rocprof(path: Path) -> TraceSession:
    """One rocprof Chrome trace as a session (rules in the module docstring)."""
    events, other = decode(path)
    labels = _labels(events)
    producer = producer_of(set(labels.values()))
    if producer is None:
        raise CorruptTraceError(
            f"{path}: no rocprof lanes (process_name CPU HIP API, GPU<n>, COPY, ...) were "
            "found; give the results.json rocprof wrote, unchanged"
        )
    lanes = {pid: lane for pid, label in labels.items() if (lane := lane_of(label)) is not None}
    cols, flow_ends, counts = _rows(events, labels, lanes, producer == "rocprof-v2")
    frame = pl.DataFrame(
        cols,
        schema_overrides={
            k: pl.Int64 for k in ("start_ns", "dur_ns", "stream", "pid", "tid", "correlation")
        }
        | {"device": pl.Int32, "start_us": pl.Int64, "end_us": pl.Int64}
        | {k: pl.String for k in ("kind", "name", "category", "jpid", "jtid", "call_args")},
    ).with_row_index("event_id")
    frame = frame.with_columns(pl.col("event_id").cast(pl.Int64))
    if frame.get_column("correlation").null_count() == frame.height:
        flows = pl.DataFrame(
            flow_ends, schema=["fid", "jpid", "jtid", "ts_us"], orient="row"
        ).with_columns(pl.col("ts_us").cast(pl.Int64))
        frame = frame.with_columns(flow_correlation(frame, flows))
    frame = _with_bytes(frame)
    src = str(path)
    frame, warnings = _place_unplaced(frame, src)
    frame = frame.with_columns(_copy_kind(), pl.lit(0, dtype=pl.Int32).alias("rank"))
    warnings += [f"{src}: {counts[key]} {text}" for key, text in _COUNTED.items() if counts[key]]
    if frame.filter(pl.col("device").is_not_null()).is_empty():
        warnings.append(
            f"{src}: the trace holds no kernel or copy; rocprof records them with --hip-trace "
            "or --sys-trace"
        )
    version = producer.removeprefix("rocprof-")
    used = frame.filter(pl.col("device").is_not_null()).get_column("device").unique().to_list()
    meta = TraceMeta(
        source_format=FORMAT,
        format_version=version,
        inputs=[InputInfo(path=src, format=FORMAT, rank=0, format_version=version)],
        devices=devices_of(used, other),
        warnings=warnings,
        extra={FORMAT: {"producer": producer, "lanes": sorted(labels.values())}},
    )
    # RCCL kernels are communication, by the one table of names (model.comm)
    comm = pl.col("name").cast(pl.String).str.replace_all(NOT_COMM_KERNEL_RE, " ")
    frame = frame.with_columns(
        ((pl.col("kind") == "kernel") & comm.str.contains(COMM_KERNEL_RE))
        .fill_null(False)
        .alias("is_comm")
    )
    return TraceSession(conform_events(frame), meta)
