"""The memory findings (issue 48): ``allocator_churn``, and the two memory facts.

``allocator_churn``, per GPU memory record (``analysis.memory``) whose steady loop lost time
to the allocator: ``recoverable_ns`` = ``loop_allocator_idle_ns`` (the idle pass's
``memory_management`` time outside the device's one-off windows: the same steady state the
idle findings use, so the ``memory_management`` finding the build then drops had the same
time), confidence ``high`` (the host recorded the calls). Evidence: the allocator calls (none
inside another) with the most GPU idle while they ran. Titles in binary units (``fmt_bin``).
The remedy keeps only the clauses the trace does not show applied: ``empty_cache`` advice
only when an ``empty_cache`` range is in the trace, else a softened clause
(``SOFT_EMPTY_CACHE``) when the loop's allocator calls free memory
(``torch.cuda.empty_cache()`` records no op of its own), else none; ``expandable_segments``
advice (here and in ``reserved_unused``) only when the rank makes no call of the
virtual-memory API that expandable segments use (``DeviceMemory.vmm_calls``: ``cuMemCreate``,
``cuMemMap``, ``cuMemUnmap``, ...).

``reserved_unused`` (reserved at the peak >= 1.5 x allocated and >= 256 MiB more) and
``memory_near_capacity`` (peak reserved >= 90 % of the device's memory, only where the trace
says it) cost memory, not time: their ``recoverable_ns`` is 0, so they rank after every finding
that gives time back (``MEMORY_FACTS``: the build keeps them), with the bytes in ``figures``;
confidence ``high`` (the allocator's own totals) — ``DeviceMemory.reserved_unused`` /
``near_capacity`` say the same in the memory section.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from typing import Any

from traceforensics.analysis.context import AnalysisContext
from traceforensics.analysis.devices import DeviceRecord
from traceforensics.analysis.findings.busy_losses import window_share
from traceforensics.analysis.findings.remedies import remedy
from traceforensics.analysis.findings.results import (
    ALLOCATOR_CHURN,
    MEMORY_NEAR_CAPACITY,
    RESERVED_UNUSED,
    Finding,
)
from traceforensics.analysis.idle.results import Evidence, duration_text
from traceforensics.analysis.memory import DeviceMemory
from traceforensics.analysis.memory.results import fmt_bin
from traceforensics.analysis.program import Program
from traceforensics.model.units import fmt_ns, fmt_pct

#: The clause said instead of "no empty_cache in the loop" when no range is named empty_cache
#: but the loop frees device memory (``torch.cuda.empty_cache()`` records no profiler op).
SOFT_EMPTY_CACHE = "if the loop calls empty_cache (its cudaFree calls may be that), drop it"


def memory_findings(
    ctx: AnalysisContext,
    records: list[DeviceRecord],
    memory: Sequence[DeviceMemory],
    program: Program,
) -> list[Finding]:
    """The ``allocator_churn`` finding of every GPU whose loop lost time to the allocator, and
    the two memory facts of every GPU that shows them."""
    by_key = {(r.rank, r.device): r for r in records}
    out: list[Finding] = []
    for mem in memory:
        rec = by_key.get((mem.rank, mem.device))
        if rec is None:
            continue
        if mem.loop_allocator_idle_ns > 0:
            out.append(_churn_finding(mem, rec, program))
        out += _facts(mem, program)
    return out


#: Memory findings with no time to give back, kept (ranked last) by the build.
MEMORY_FACTS = frozenset({RESERVED_UNUSED, MEMORY_NEAR_CAPACITY})


def _facts(mem: DeviceMemory, program: Program) -> list[Finding]:
    """``reserved_unused`` and ``memory_near_capacity`` of one GPU (module docstring)."""
    out = []
    peak = fmt_bin(mem.peak_allocated_bytes)
    if mem.reserved_unused:
        title = (
            f"the allocator reserves {fmt_bin(mem.reserved_at_peak_bytes)} at the peak for "
            f"{peak} allocated: {fmt_bin(mem.fragmentation_bytes)} held unused"
        )
        figures: dict[str, Any] = {
            "reserved_at_peak_bytes": mem.reserved_at_peak_bytes,
            "peak_allocated_bytes": mem.peak_allocated_bytes,
            "fragmentation_bytes": mem.fragmentation_bytes,
        }
        out.append(_fact(RESERVED_UNUSED, mem, title, program, figures))
    if mem.near_capacity and mem.memory_bytes:
        share = mem.peak_reserved_share or 0.0
        title = (
            f"memory peaks at {fmt_bin(mem.peak_reserved_bytes)} reserved, {fmt_pct(share)} of "
            f"the device's {fmt_bin(mem.memory_bytes)}"
        )
        figures = {
            "peak_reserved_bytes": mem.peak_reserved_bytes,
            "memory_bytes": mem.memory_bytes,
            "peak_reserved_share": round(share, 6),
        }
        out.append(_fact(MEMORY_NEAR_CAPACITY, mem, title, program, figures))
    return out


def _fact(
    category: str, mem: DeviceMemory, title: str, program: Program, figures: dict[str, Any]
) -> Finding:
    return Finding(
        category, mem.rank, mem.device, 0, 0.0, title, _remedy(category, mem, program), "high",
        [], figures,
    )  # fmt: skip


def _churn_finding(mem: DeviceMemory, rec: DeviceRecord, program: Program) -> Finding:
    ns = mem.loop_allocator_idle_ns
    share = window_share(ns, rec)
    steps = [c for c in mem.churn[1:] if c.mallocs or c.frees]
    per_step = ""
    if steps:
        mallocs = sum(c.mallocs for c in steps) / len(steps)
        per_step = f"; {mallocs:.0f} mallocs per step"
    cache = f", {mem.empty_cache_calls} empty_cache" if mem.empty_cache_calls else ""
    title = (
        f"Allocator calls in the loop leave the GPU idle {fmt_ns(ns)} ({fmt_pct(share)} of "
        f"the window): {mem.allocator_calls} allocator calls{cache}{per_step}"
    )
    evidence = [
        Evidence(
            "memory_management",
            "cuda_api",
            c.name,
            c.start_ns,
            c.dur_ns,
            None,
            f"GPU idle {duration_text(c.gpu_idle_ns)} while it ran",
        )
        for c in mem.top_allocator_calls
    ]
    return Finding(
        ALLOCATOR_CHURN,
        mem.rank,
        mem.device,
        ns,
        share,
        title,
        _remedy(ALLOCATOR_CHURN, mem, program),
        "high",
        evidence,
        {
            "loop_allocator_idle_ns": ns,
            "allocator_idle_ns": mem.allocator_idle_ns,
            "allocator_calls": mem.allocator_calls,
            "empty_cache_calls": mem.empty_cache_calls,
        },
    )


def _remedy(category: str, mem: DeviceMemory, program: Program) -> str:
    """The remedy without the clauses the trace shows applied (module docstring); clauses
    are the parts between ", " or "; " outside parentheses, each kept with its separator."""
    parts = re.split(r"([,;] )(?![^()]*\))", remedy(category, program))
    seps, clauses = ["", *parts[1::2]], parts[0::2]
    kept: list[tuple[str, str]] = []
    for sep, c in zip(seps, clauses, strict=True):
        if "expandable" in c and mem.vmm_calls:
            continue
        if "empty_cache" in c and not mem.empty_cache_calls:
            if mem.free_calls:
                kept.append((sep, SOFT_EMPTY_CACHE))
            continue
        kept.append((sep, c))
    if not kept:
        return "".join(parts)
    return kept[0][1] + "".join(sep + c for sep, c in kept[1:])
