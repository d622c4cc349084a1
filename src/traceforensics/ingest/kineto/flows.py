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
from typing import Any

import numpy as np
import numpy.typing as npt

from traceforensics.ingest.kineto import gpu


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


def add_flow_points(
    points: dict[Any, FlowPoints], key: Any, ts_ns: list[int], flow_ids: list[int]
) -> None:
    """Record one thread's endpoints; ids or times beyond int64 (damaged) are not ones."""
    lo, hi = -(2**63), 2**63
    if not all(lo <= v < hi for v in flow_ids) or not all(lo <= v < hi for v in ts_ns):
        kept = [
            (t, f) for t, f in zip(ts_ns, flow_ids, strict=True) if lo <= t < hi and lo <= f < hi
        ]
        ts_ns, flow_ids = [t for t, _ in kept], [f for _, f in kept]
    if key not in points:
        points[key] = (array("q"), array("q"))
    points[key][0].extend(ts_ns)
    points[key][1].extend(flow_ids)


def add_flow_arrays(
    points: dict[Any, FlowPoints],
    key: Any,
    ts_ns: npt.NDArray[np.int64],
    flow_ids: npt.NDArray[np.int64],
) -> None:
    """``add_flow_points`` for endpoints already in int64 arrays (in range by construction)."""
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
