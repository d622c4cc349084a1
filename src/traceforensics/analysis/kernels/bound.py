"""What bounds a kernel, from measured throughput (Nsight Compute), and the name both a trace
and an ncu report agree on.

Class rule, NVIDIA's own (the ``SOLBottleneck`` rule of Nsight Compute's SpeedOfLight
section), on ``sm`` = Compute (SM) Throughput and ``mem`` = Memory Throughput, % of peak
(DRAM Throughput stands in for ``mem`` when a report lacks it)::

    sm < 60 and mem < 60          -> latency   (too little work in flight; "small grid" when
                                                 the launch fills less than one wave of SMs)
    otherwise the larger of the two -> compute / memory; within 10 points of each other
                                       the kernel is also ``balanced``
    either figure missing          -> unknown

Base name (``base_name``): ncu and the tracers demangle differently (``<unnamed>`` against
``(anonymous namespace)``, spacing inside templates), so kernels are joined on the function's
bare name: no leading ``void``, no argument list, no template arguments, no namespace.
"""

from __future__ import annotations

import re
from typing import Final

#: Below this % of peak on both compute and memory a kernel is latency-bound.
LATENCY_BOUND_PCT: Final = 60.0
#: Compute and memory within this many points of each other: balanced.
BALANCED_PCT: Final = 10.0
#: Fewer waves of blocks per SM than this: the grid cannot fill the GPU.
SMALL_GRID_WAVES: Final = 1.0


def bound_class(sm_pct: float | None, mem_pct: float | None) -> str:
    """``compute``, ``memory``, ``latency`` or ``unknown`` (module docstring)."""
    if sm_pct is None or mem_pct is None:
        return "unknown"
    if sm_pct < LATENCY_BOUND_PCT and mem_pct < LATENCY_BOUND_PCT:
        return "latency"
    return "compute" if sm_pct >= mem_pct else "memory"


def balanced(sm_pct: float | None, mem_pct: float | None) -> bool:
    """Whether compute and memory throughput are within ``BALANCED_PCT`` of each other."""
    return sm_pct is not None and mem_pct is not None and abs(sm_pct - mem_pct) < BALANCED_PCT


def small_grid(waves_per_sm: float | None) -> bool:
    """Whether a launch fills less than one wave of the GPU's SMs (None: not measured)."""
    return waves_per_sm is not None and waves_per_sm < SMALL_GRID_WAVES


_SPACE: Final = re.compile(r"\s+")


def base_name(name: str) -> str:
    """The bare function name of a kernel name as any demangler writes it (module docstring):
    ``void at::native::(anonymous namespace)::f<float, 4>(float*, int)`` -> ``f``."""
    text = _SPACE.sub(" ", name.strip())
    text = text.removeprefix("void ")
    text = _strip_templates(_cut_args(text))
    text = text.split("::")[-1].strip()
    return text.split(" ")[-1] if text else ""


def _cut_args(text: str) -> str:
    """``text`` before its argument list: the first ``(`` outside template brackets that is
    not part of ``(anonymous namespace)``."""
    depth = 0
    i = 0
    while i < len(text):
        c = text[i]
        if c == "<":
            depth += 1
        elif c == ">":
            depth = max(depth - 1, 0)
        elif c == "(" and depth == 0:
            if text.startswith("(anonymous namespace)", i):
                i += len("(anonymous namespace)")
                continue
            return text[:i]
        i += 1
    return text


def _strip_templates(text: str) -> str:
    """``text`` without anything inside ``<...>`` (nested)."""
    out: list[str] = []
    depth = 0
    for c in text:
        if c == "<":
            depth += 1
        elif c == ">":
            depth = max(depth - 1, 0)
        elif depth == 0:
            out.append(c)
    return "".join(out)
