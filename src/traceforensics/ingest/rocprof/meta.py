"""The GPUs of a rocprof trace: what v1's ``otherData`` (rocminfo, flattened) says of them.

v1 (``tblextr.py``) ends its file with ``"otherData"``: every ``rocminfo`` line as a key, the
section names joined to it and all blanks removed (``"Agent2.MarketingName":
"AMDInstinctMI210"``; older releases join with ``_``). The GPU agents
(``AgentN.DeviceType == "GPU"``), in agent order, are HIP devices 0, 1, ... Each named device
gets ``MarketingName`` (else ``Name``, the gfx target), ``ComputeUnit`` as its CU count and
``MaxClockFreq.(MHz)`` as its clock. v2 writes no system facts: its GPUs are named
``unknown``. Every device is ``vendor="amd"``: rocprof runs on ROCm only.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from typing import Any

from traceforensics.model.session import UNKNOWN_DEVICE, DeviceInfo

_AGENT_KEY = re.compile(r"^Agent(\d+)[._]([^._]+(?:\.\(MHz\))?)$")


def _int(text: object) -> int | None:
    """The leading integer of a rocminfo value (``"104"``, ``"1700"``, ``"65536(0x10000)"``)."""
    match = re.match(r"\s*(\d+)", text) if isinstance(text, str) else None
    return int(match.group(1)) if match else None


def gpu_agents(other: object) -> list[dict[str, str]]:
    """The GPU agents' fields (``Name``, ``MarketingName``, ``ComputeUnit``, ...), in agent
    order; empty when ``other`` is not v1's flattened rocminfo."""
    if not isinstance(other, dict):
        return []
    agents: dict[int, dict[str, str]] = {}
    for key, value in other.items():
        match = _AGENT_KEY.match(str(key))
        if match and isinstance(value, str):
            agents.setdefault(int(match.group(1)), {})[match.group(2)] = value
    return [fields for _, fields in sorted(agents.items()) if fields.get("DeviceType") == "GPU"]


def devices_of(used: Iterable[int], other: Any) -> list[DeviceInfo]:
    """One ``DeviceInfo`` per device number in ``used`` (rank 0), named from ``other``."""
    agents = gpu_agents(other)
    out: list[DeviceInfo] = []
    for device in sorted(set(used)):
        fields = agents[device] if 0 <= device < len(agents) else {}
        name = fields.get("MarketingName") or fields.get("Name") or UNKNOWN_DEVICE
        mhz = _int(fields.get("MaxClockFreq.(MHz)"))
        out.append(
            DeviceInfo(
                rank=0,
                device=device,
                name=name,
                sm_count=_int(fields.get("ComputeUnit")),
                clock_khz=mhz * 1000 if mhz is not None else None,
                vendor="amd",
            )
        )
    return out
