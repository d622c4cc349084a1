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

import bisect
from typing import Any

from traceforensics.ingest.kineto import categories as cats
from traceforensics.ingest.kineto import gpu

_FLOW_PHASES = frozenset({"s", "t", "f"})


def metadata_events(events: list[Any]) -> list[dict[str, Any]]:
    """The ``ph: "M"`` events."""
    return [e for e in events if type(e) is dict and e.get("ph") == "M"]


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


def _norm(value: Any) -> Any:
    """Same key for ``"25738"``/``25738`` and ``"stream 7"``/``7`` (1.9 mixes them)."""
    parsed = gpu.parse_stream(value)
    return gpu.key_of(value) if parsed is None else parsed


def fill_correlation_from_flows(
    events: list[Any],
    candidates: list[int],
    correlation: list[int | None],
    *,
    pid_raw: list[Any],
    tid_raw: list[Any],
    ts_raw: list[Any],
    dur_raw: list[Any],
) -> int:
    """Fill ``correlation[i]`` for candidate rows lacking one; returns how many were filled."""
    missing = [i for i in candidates if correlation[i] is None]
    if not missing:
        return 0
    by_thread: dict[tuple[Any, Any], list[tuple[float, int]]] = {}
    for e in events:
        if (
            type(e) is dict
            and cats.is_str_in(e.get("ph"), _FLOW_PHASES)
            and cats.is_str_in(e.get("cat"), cats.LAUNCH_FLOW_CATS)
            and isinstance(e.get("ts"), int | float)
        ):
            flow_id = gpu.parse_int(e.get("id"))
            if flow_id is not None:
                key = (_norm(e.get("pid")), _norm(e.get("tid")))
                by_thread.setdefault(key, []).append((e["ts"], flow_id))
    filled = 0
    for points in by_thread.values():
        points.sort()
    for i in missing:
        points = by_thread.get((_norm(pid_raw[i]), _norm(tid_raw[i])), [])
        start = ts_raw[i]
        if not points or not isinstance(start, int | float):
            continue
        dur = dur_raw[i] if isinstance(dur_raw[i], int | float) else 0
        pos = bisect.bisect_left(points, (start, -(2**63)))
        if pos < len(points) and points[pos][0] <= start + max(dur, 0):
            correlation[i] = points[pos][1]
            filled += 1
    return filled
