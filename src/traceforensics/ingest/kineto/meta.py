"""Trace-level metadata of Kineto files: rank, format version, devices, vendor, clock.

Rank of a file, first that applies: ``distributedInfo.rank``; a number in the file name
(``rank-3``, ``rank_3``, ``rank3``; ``..._3.json`` only when several files are loaded, since
``tensorboard_trace_handler`` names a lone file ``<host>_<pid>.<ms>.pt.trace.json``); the
file's position in the input list.
If two files end up with the same rank, every file falls back to its position (with a warning).
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import Any

from traceforensics.ingest.detect import rank_from_name
from traceforensics.ingest.kineto.gpu import parse_index, parse_int
from traceforensics.model.session import UNKNOWN_DEVICE, DeviceInfo

#: Top-level keys that only ROCm (roctracer) builds write.
_ROCM_KEYS = ("roctracer_version", "hip_runtime_version", "hip_driver_version")
_AMD_NAME_HINTS = ("amd", "radeon", "instinct", "mi300", "mi250", "mi210")


def rank_from_top(top: dict[str, Any]) -> int | None:
    """``distributedInfo.rank`` as an int (it can be written as a string), else None."""
    info = top.get("distributedInfo")
    if isinstance(info, dict):
        return parse_index(info.get("rank"))
    return None


def assign_ranks(
    paths: Sequence[Path], tops: Sequence[dict[str, Any]]
) -> tuple[list[int], str, str]:
    """One rank per file (rules in the module docstring), a warning ('' when none) and which
    rules gave the ranks (``distributedInfo``, ``file name``, ``file order``; several joined
    by ``+`` when files differ)."""
    ranks: list[int] = []
    sources: list[str] = []
    for index, (path, top) in enumerate(zip(paths, tops, strict=True)):
        rank, source = rank_from_top(top), "distributedInfo"
        if rank is None:
            rank, source = rank_from_name(path, explicit_only=len(paths) == 1), "file name"
        if rank is None:
            rank, source = index, "file order"
        ranks.append(rank)
        sources.append(source)
    if len(set(ranks)) != len(ranks):
        return (
            list(range(len(paths))),
            (
                f"rank numbers {ranks} of the input files collide; ranks were assigned in file "
                "order instead"
            ),
            "file order",
        )
    return ranks, "", "+".join(dict.fromkeys(sources))


def device_properties(top: dict[str, Any]) -> list[Any]:
    """The trace's ``deviceProperties`` list; anything else there (a number, text, a dict:
    a damaged or hand-made trace) reads as no list at all."""
    props = top.get("deviceProperties")
    return props if isinstance(props, list) else []


def detect_vendor(top: dict[str, Any], runtime_names: Iterable[str]) -> str:
    """``"amd"`` for ROCm traces (roctracer keys, hip* API names, AMD device names), else
    ``"nvidia"``."""
    if any(key in top for key in _ROCM_KEYS):
        return "amd"
    for prop in device_properties(top):
        if isinstance(prop, dict):
            name = str(prop.get("name", "")).lower()
            if any(hint in name for hint in _AMD_NAME_HINTS):
                return "amd"
    if any(name.startswith("hip") for name in runtime_names):
        return "amd"
    return "nvidia"


def _capability(prop: dict[str, Any]) -> str | None:
    major, minor = parse_int(prop.get("computeMajor")), parse_int(prop.get("computeMinor"))
    if major is None:
        return None
    return f"{major}.{minor or 0}"


def _name(value: object) -> str:
    """The device name with whitespace collapsed; ``UNKNOWN_DEVICE`` when absent or blank
    (ROCm traces often write ``""``)."""
    text = " ".join(value.split()) if isinstance(value, str) else ""
    return text or UNKNOWN_DEVICE


def devices_for(
    top: dict[str, Any], rank: int, seen_devices: Iterable[int], vendor: str
) -> list[DeviceInfo]:
    """``DeviceInfo`` per ``deviceProperties`` entry plus, named "unknown", every GPU index
    seen in events but not listed there (e.g. files without ``deviceProperties``)."""
    out: dict[int, DeviceInfo] = {}
    for index, prop in enumerate(device_properties(top)):
        if not isinstance(prop, dict):
            continue
        dev = parse_index(prop.get("id"))
        dev = index if dev is None else dev
        out[dev] = DeviceInfo(
            rank=rank,
            device=dev,
            name=_name(prop.get("name")),
            sm_count=parse_int(prop.get("numSms")),
            compute_capability=_capability(prop),
            memory_bytes=parse_int(prop.get("totalGlobalMem")),
            vendor=vendor,
        )
    for dev in seen_devices:
        if dev not in out:
            out[dev] = DeviceInfo(rank=rank, device=dev, vendor=vendor)
    return [out[d] for d in sorted(out)]


def format_version(top: dict[str, Any], legacy_cats: bool, float_ts: bool) -> str:
    """``"<schemaVersion> (<PyTorch era>)"``: the schema number has stayed 1 for ever, so the
    era is derived from format features (capitalised categories = 1.8/1.9; float or relative
    timestamps = 2.4+)."""
    schema = top.get("schemaVersion")
    schema_text = str(schema) if schema is not None else "none"
    if legacy_cats:
        era = "pytorch 1.8-1.9"
    elif "baseTimeNanoseconds" in top:
        era = "pytorch 2.4+ relative ts"
    elif float_ts:
        era = "pytorch 2.4+"
    else:
        era = "pytorch 1.10-2.3"
    return f"{schema_text} ({era})"


#: A ``baseTimeNanoseconds`` at or past this (year ~2116) cannot be an epoch time: any event
#: time added to it would leave int64 ns.
_BASE_LIMIT_NS = 1 << 62


def base_time_ns(top: dict[str, Any]) -> int | None:
    """``baseTimeNanoseconds`` as an int (None when absent, not a number, negative or beyond
    ``_BASE_LIMIT_NS``: a damaged base costs the base, the times stay relative)."""
    value = top.get("baseTimeNanoseconds")
    if isinstance(value, float):
        base = int(value) if value.is_integer() else None
    else:
        base = parse_int(value)
    return base if base is not None and 0 <= base < _BASE_LIMIT_NS else None
