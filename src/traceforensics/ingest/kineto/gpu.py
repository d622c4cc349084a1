"""GPU-side parsing rules: device and stream ids, memcpy direction/memory kinds, comm detection.

Communication kernels follow the one rule of ``model.comm`` (shared with the nsys reader);
``is_comm_kernel`` here is that function. Host-side collectives are decided here
(``is_comm_host``).

All rules work on *unique* values (names, pids, tids) and are applied to columns through dict
lookups, so their cost does not grow with the number of events.

Device of a GPU row (kernel, memcpy, memset, sync, GPU annotation), first that applies:
1. ``args.device`` (an int) — ROCm traces can have ``pid`` different from the device index;
2. the ``process_labels``/``process_name`` metadata of the row's ``pid`` saying ``GPU <n>``;
3. the ``pid`` itself when it is an integer (or a string holding a number).

Stream: ``args.stream`` when it is an int, else the ``tid`` (int, or ``"stream 7"``,
``"stream 7 (sync)"`` in PyTorch 1.8/1.9).
"""

from __future__ import annotations

import re
from typing import Any

from traceforensics.model import comm
from traceforensics.model.units import MAX_INDEX

_STREAM_RE = re.compile(r"^\s*(?:stream\s+)?(-?\d+)")
_GPU_LABEL_RE = re.compile(r"\bGPU\s+(\d+)\b")
_MEMCPY_RE = re.compile(r"^Memcpy\s+(\w+)(?:\s*\(\s*(\w+)\s*->\s*(\w+)\s*\))?")
_MEMSET_RE = re.compile(r"^Memset\s*\(\s*(\w+)\s*\)")
_DIGITS_RE = re.compile(r"-?\d+")

#: Memcpy direction token (name or ROCm ``args.kind``) -> ``copy_kind``.
COPY_KIND_BY_TOKEN: dict[str, str] = {
    "htod": "h2d",
    "dtoh": "d2h",
    "dtod": "d2d",
    "htoh": "h2h",
    "ptop": "p2p",
}
#: Memory kind token in "(Pageable -> Device)" -> ``src_mem``/``dst_mem``.
MEM_KIND_BY_TOKEN: dict[str, str] = {
    "pageable": "pageable",
    "pinned": "pinned",
    "device": "device",
    "managed": "managed",
    "array": "array",
}

#: Host op name prefixes of collectives (lower-cased comparison).
COMM_HOST_PREFIXES: tuple[str, ...] = (
    "nccl:",
    "c10d::",
    "gloo",
    "record_param_comms",
    "nccl",
    "rccl",
)


def parse_index(value: Any) -> int | None:
    """A device index or rank: ``parse_int`` within ``[0, MAX_INDEX)``, else None."""
    v = parse_int(value)
    return v if v is not None and 0 <= v < MAX_INDEX else None


def parse_int(value: Any) -> int | None:
    """An int64 from an int or an all-digits string (``"25738"``); anything else, or a value
    beyond int64 (no id or index is: the table's columns are Int64), -> None."""
    if type(value) is int:
        return int64(value)
    if isinstance(value, str):
        text = value.strip()
        digits = text.removeprefix("-")
        # ASCII only: "²".isdigit() is True but int("²") fails
        if digits.isascii() and digits.isdigit():
            return _digits_int64(text.startswith("-"), digits)
    return None


INT64_MIN, INT64_MAX = -(2**63), 2**63 - 1


def int64(value: int) -> int | None:
    """``value`` when it fits int64, else None (no id, index or stream is beyond it)."""
    return value if INT64_MIN <= value <= INT64_MAX else None


def _digits_int64(negative: bool, digits: str) -> int | None:
    """The int64 of ASCII ``digits`` (with a sign), else None. The leading zeros go first:
    ``int()`` of more than 4300 digits raises, and over 19 significant ones is beyond int64."""
    significant = digits.lstrip("0") or "0"
    if len(significant) > 19:
        return None
    return int64(-int(significant) if negative else int(significant))


def parse_stream(value: Any) -> int | None:
    """Stream id from a tid or ``args.stream``: ``7``, ``"7"``, ``"stream 7"``, ``"stream 7
    (sync)"``. ROCm's ``"0x0"`` hex strings on host rows are not streams of a GPU row: None;
    so is a number beyond int64."""
    if type(value) is int:
        return int64(value)
    if isinstance(value, str):
        match = _STREAM_RE.match(value)
        if match and not value.strip().lower().startswith("0x"):
            number = match.group(1)
            return _digits_int64(number.startswith("-"), number.removeprefix("-"))
    return None


def device_from_label(label: Any) -> int | None:
    """``"GPU 3"`` (process_labels / process_name metadata) -> 3."""
    if isinstance(label, str):
        match = _GPU_LABEL_RE.search(label)
        if match:
            return int(match.group(1))
    return None


def key_of(value: Any) -> Any:
    """``value`` usable as a dict key: scalars as they are, a list or dict (a damaged ``pid`` or
    ``tid``) as its ``repr``, so it costs that event's lookup, not the trace."""
    return value if value is None or isinstance(value, str | int | float) else repr(value)


def device_from_pid(pid: Any, label_map: dict[Any, int]) -> int | None:
    """Device index for a GPU row without ``args.device``: metadata label, else numeric pid
    (within ``[0, MAX_INDEX)``: anything else is no index)."""
    found = _device_from_pid(pid, label_map)
    return found if found is not None and 0 <= found < MAX_INDEX else None


def _device_from_pid(pid: Any, label_map: dict[Any, int]) -> int | None:
    if pid in label_map:
        return label_map[pid]
    if type(pid) is int:
        return pid
    if isinstance(pid, str):
        from_label = device_from_label(pid)
        if from_label is not None:
            return from_label
        match = _DIGITS_RE.search(pid)
        if match:
            return int(match.group(0))
    return None


def memcpy_kinds(name: str, rocm_kind: Any = None) -> tuple[str, str | None, str | None]:
    """``(copy_kind, src_mem, dst_mem)`` from a memcpy name such as
    ``"Memcpy HtoD (Pageable -> Device)"``; ROCm ``args.kind`` (``"HtoD"``) when the name has
    no direction. Unknown tokens give ``"unknown"`` (direction) / None (memory kind); ROCm's
    ``Host`` memory is not classified (pageable or pinned is not known)."""
    copy_kind = "unknown"
    src = dst = None
    match = _MEMCPY_RE.match(name)
    if match:
        copy_kind = COPY_KIND_BY_TOKEN.get(match.group(1).lower(), "unknown")
        if match.group(2):
            src = MEM_KIND_BY_TOKEN.get(match.group(2).lower(), "unknown")
            dst = MEM_KIND_BY_TOKEN.get(match.group(3).lower(), "unknown")
    if copy_kind == "unknown" and isinstance(rocm_kind, str):
        copy_kind = COPY_KIND_BY_TOKEN.get(rocm_kind.strip().lower(), "unknown")
    return copy_kind, src, dst


def memset_dst(name: str) -> str | None:
    """Destination memory kind of ``"Memset (Device)"`` -> ``"device"``."""
    match = _MEMSET_RE.match(name)
    if match:
        return MEM_KIND_BY_TOKEN.get(match.group(1).lower(), "unknown")
    return None


#: Communication kernels by name: ``model.comm``'s rule, the one the nsys reader applies too.
is_comm_kernel = comm.is_comm_kernel


def is_comm_host(name: str) -> bool:
    """Host-side collective ops: ``nccl:all_reduce``, ``c10d::allreduce_``, ``gloo:*``,
    ``record_param_comms``."""
    return name.lstrip().lower().startswith(COMM_HOST_PREFIXES)
