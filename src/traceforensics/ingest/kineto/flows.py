"""What Kineto's non-row events tell us: ``M`` metadata (which pid is which GPU, which pid is
the CPU process) and launch flows (``s``/``f`` pairs whose ``id`` is the correlation id).

Flow fallback for ``correlation``: when a runtime/driver call or a GPU activity has no
``args.correlation`` (hand-made or converted traces), a launch flow endpoint (cat ``ac2g``,
``async``, ``async_cpu_to_gpu`` or ``async_gpu``) on the same (pid, tid) supplies it. The
endpoint binds to the row that starts at exactly its ``ts`` (what kineto writes), else to the
row of that thread that encloses its ``ts`` (Chrome's binding rule for ``s`` and ``bp: "e"``)::

    thread 25738   |== cudaLaunchKernel ==|        s(id=42) at ts of the call -> corr 42
    stream 7                 |== kernel ==|        f(id=42, bp=e) at ts of the kernel -> 42
"""

from __future__ import annotations

from array import array
from itertools import compress
from typing import Any

import numpy as np
import numpy.typing as npt

from traceforensics.ingest.kineto import gpu
from traceforensics.ingest.kineto.colscan import (
    ARG_VALUE_KEYS,
    CODED_KEYS,
    FLOAT,
    INT,
    MISSING,
    Scanned,
    distinct_codes,
    slot_values,
    values_at,
)
from traceforensics.ingest.kineto.timeconv import slots_ns, slots_usable, us_to_ns, usable_us

_NAME, _PID, _TID, _ID = (CODED_KEYS.index(k) for k in ("name", "pid", "tid", "id"))
_TS = 0  # (the first number slot)
_ARG_KEY = {key: i for i, key in enumerate(ARG_VALUE_KEYS)}


def _args(event: dict[str, Any]) -> dict[str, Any]:
    """``args`` of a metadata event; missing or not an object (damaged) is empty."""
    a = event.get("args")
    return a if type(a) is dict else {}


def gpu_labels(meta: list[dict[str, Any]]) -> dict[Any, int]:
    """pid -> device index from ``process_labels`` (``"GPU 3"``) or ``process_name``
    metadata; labels win over names."""
    by_name: dict[Any, int] = {}
    by_label: dict[Any, int] = {}
    for e in meta:
        kind = e.get("name")
        a = _args(e)
        if kind == "process_labels":
            dev = gpu.device_from_label(a.get("labels"))
            if dev is not None:
                by_label[gpu.key_of(e.get("pid"))] = dev
        elif kind == "process_name":
            dev = gpu.device_from_label(a.get("name"))
            if dev is not None:
                by_name[gpu.key_of(e.get("pid"))] = dev
    return by_name | by_label


def cpu_pid(meta: list[dict[str, Any]]) -> int | None:
    """The recording process: the single pid labelled ``CPU``, else None."""
    pids = {
        gpu.parse_int(e.get("pid"))
        for e in meta
        if e.get("name") == "process_labels" and _args(e).get("labels") == "CPU"
    }
    pids.discard(None)
    return pids.pop() if len(pids) == 1 else None


def thread_key(value: Any) -> Any:
    """Same key for ``"25738"``/``25738`` and ``"stream 7"``/``7`` (1.9 mixes them)."""
    parsed = gpu.parse_stream(value)
    return gpu.key_of(value) if parsed is None else parsed


#: Launch-flow endpoints of one thread: ``(ts ns, flow id)`` as two int64 arrays (16 bytes a
#: flow: a trace has about one endpoint per two events).
FlowPoints = tuple["array[int]", "array[int]"]


def add_flow_arrays(
    points: dict[Any, FlowPoints],
    key: Any,
    ts_ns: npt.NDArray[np.int64],
    flow_ids: npt.NDArray[np.int64],
) -> None:
    """Record one thread's endpoints (int64 arrays: in range by construction)."""
    if key not in points:
        points[key] = (array("q"), array("q"))
    points[key][0].frombytes(np.ascontiguousarray(ts_ns, dtype=np.int64).tobytes())
    points[key][1].frombytes(np.ascontiguousarray(flow_ids, dtype=np.int64).tobytes())


def fill_correlation_from_flows(
    points: dict[Any, FlowPoints],
    candidates: list[int],
    correlation: list[int | None],
    *,
    pid_raw: list[Any],
    tid_raw: list[Any],
    start_ns: npt.NDArray[np.int64],
    dur_ns: npt.NDArray[np.int64],
) -> int:
    """Fill ``correlation[i]`` for candidate rows lacking one; returns how many were filled.

    ``points``: launch-flow endpoints by ``(thread_key(pid), thread_key(tid))``;
    ``start_ns``/``dur_ns`` of the rows on the same clock (no base). A row takes the first
    endpoint (by time, then id) at or after its start that is not after its end."""
    missing = [i for i in candidates if correlation[i] is None]
    if not missing or not points:
        return 0
    ordered: dict[Any, tuple[npt.NDArray[np.int64], npt.NDArray[np.int64]]] = {}
    filled = 0
    for i in missing:
        key = (thread_key(pid_raw[i]), thread_key(tid_raw[i]))
        if key not in points:
            continue
        if key not in ordered:
            ts = np.frombuffer(points[key][0], dtype=np.int64)
            ids = np.frombuffer(points[key][1], dtype=np.int64)
            order = np.lexsort((ids, ts))
            ordered[key] = (ts[order], ids[order])
        ts, ids = ordered[key]
        start = int(start_ns[i])
        pos = int(np.searchsorted(ts, start, side="left"))
        if pos < len(ts) and int(ts[pos]) <= start + int(dur_ns[i]):
            correlation[i] = int(ids[pos])
            filled += 1
    return filled


def add_endpoints(points: dict[Any, FlowPoints], s: Scanned, flows: npt.NDArray[np.int64]) -> None:
    """Add the launch-flow endpoints at ``flows`` of a scanned chunk to ``points`` (the
    correlation fallback), grouped by thread (``thread_key``, once per distinct (pid, tid)
    pair); one without a number ``ts`` within int64 ns or an id (``gpu.parse_int``) is
    none."""
    if not flows.size:
        return
    id_codes = s.codes[flows, _ID]
    present = distinct_codes(id_codes, len(s.values))[0]
    ids = np.zeros(len(s.values), dtype=np.int64)
    has_id = np.zeros(len(s.values), dtype=bool)
    for code in present.tolist():
        parsed = gpu.parse_int(s.values[code])
        if parsed is not None:
            ids[code], has_id[code] = parsed, True
    tags = s.tags[flows, _TS]
    flows = flows[has_id[id_codes] & np.isin(tags, (INT, FLOAT))]
    tags, raw = s.tags[flows, _TS], s.numbers[flows, _TS]
    if slots_usable(np.stack([tags, np.full_like(tags, MISSING)], axis=1), raw[:, None]):
        ts_ns = slots_ns(tags, raw)
    else:  # a NaN or huge ts: that endpoint is not one
        ts = slot_values(s, _TS, flows)
        usable = np.asarray(usable_us(ts), dtype=bool)
        flows, ts_ns = flows[usable], us_to_ns(list(compress(ts, usable)))
    pair = s.codes[flows, _PID].astype(np.int64) * len(s.values) + s.codes[flows, _TID]
    distinct, inverse = np.unique(pair, return_inverse=True)
    keys: dict[Any, int] = {}
    key_code = np.asarray(
        [
            keys.setdefault(
                tuple(map(_thread, divmod(p, len(s.values)), (s.values,) * 2)), len(keys)
            )
            for p in distinct.tolist()
        ],
        dtype=np.int64,
    )
    code = key_code[inverse.reshape(-1)]
    order = np.argsort(code, kind="stable")  # each thread's endpoints in file order
    cuts = np.searchsorted(code[order], np.arange(len(keys) + 1))
    for key, c in keys.items():
        at = order[cuts[c] : cuts[c + 1]]
        add_flow_arrays(points, key, ts_ns[at], ids[s.codes[flows[at], _ID]])


def _thread(code: int, values: list[Any]) -> Any:
    return thread_key(gpu.key_of(values[code]))


def metadata(s: Scanned, events: npt.NDArray[np.int64]) -> list[dict[str, Any]]:
    """The metadata events at ``events`` of a scanned chunk: ``{"name", "pid", "args"}`` with
    the ``labels``/``name`` args (empty without an args object)."""
    out: list[dict[str, Any]] = [{} for _ in range(events.size)]
    at = {e: i for i, e in enumerate(events.tolist())}
    wanted = [_ARG_KEY["labels"], _ARG_KEY["name"]]
    hits = np.flatnonzero(np.isin(s.arg_events, events) & np.isin(s.arg_keys, wanted))
    for j in hits.tolist():
        out[at[int(s.arg_events[j])]][ARG_VALUE_KEYS[s.arg_keys[j]]] = s.values[s.arg_values[j]]
    names, pids = values_at(s, _NAME, events), values_at(s, _PID, events)
    return [{"name": n, "pid": p, "args": a} for n, p, a in zip(names, pids, out, strict=True)]
