"""Memory over time (issue 48): per device, allocated and reserved bytes, the peak and the op
then, allocation churn per step, the allocator's calls and the GPU idle they caused.

``analyze_memory(ctx, idle)`` -> one ``DeviceMemory`` per (rank, device) with ``[memory]``
events (``events.memory_rows``; the CPU is device -1), in (rank, device) order; [] when the
trace has none. The rules live in the modules: ``events`` (the rows), ``timeline`` (peak,
op, fragmentation), ``churn`` (steps, churn, allocator calls). The allocator's idle is the
idle pass's ``memory_management`` time (never classified again here); a GPU without memory
events gets no record (its allocator idle is in the idle findings already).
"""

from __future__ import annotations

import polars as pl

from traceforensics.analysis.cause_table import MEMORY_MANAGEMENT
from traceforensics.analysis.context import AnalysisContext
from traceforensics.analysis.idle.gaps import IdleAnalysis
from traceforensics.analysis.memory.churn import (
    allocator_calls,
    gpu_idle_during,
    host_step_ranges,
    idle_spans,
    outermost,
    steady_allocator_idle,
    step_churn,
    union_ns,
    vmm_calls,
)
from traceforensics.analysis.memory.events import CACHING_TYPE, CPU_TYPE, memory_rows
from traceforensics.analysis.memory.results import AllocatorCall, DeviceMemory, StepChurn
from traceforensics.analysis.memory.timeline import downsample, peak_of

__all__ = ["AllocatorCall", "DeviceMemory", "StepChurn", "analyze_memory"]

#: Allocator calls listed per device (``top_allocator_calls``: most GPU idle first).
TOP_CALLS = 5
_DEVICE_TYPES = {CPU_TYPE: "cpu", 1: "cuda"}


def analyze_memory(ctx: AnalysisContext, idle: IdleAnalysis) -> list[DeviceMemory]:
    """One record per device with memory events (module docstring)."""
    rows = memory_rows(ctx.session)
    if rows.height == 0:
        return []
    steps = host_step_ranges(ctx)
    calls = allocator_calls(ctx)
    capacity = {(d.rank, d.device): d.memory_bytes for d in ctx.session.meta.devices}
    out: list[DeviceMemory] = []
    vmm = vmm_calls(ctx)
    for key, dev_rows in rows.group_by(["rank", "device_type", "device"], maintain_order=True):
        rank, device = int(str(key[0])), int(str(key[2]))
        rec = _record(ctx, idle, rank, device, dev_rows, steps.filter(pl.col("rank") == rank))
        if int(str(key[1])) == CACHING_TYPE:
            rec.vmm_calls = vmm.get(rank, 0)
            _add_allocator(ctx, idle, rec, calls.filter(pl.col("rank") == rank))
            cap = capacity.get((rank, device))
            if cap:
                rec.memory_bytes = cap
                rec.peak_reserved_share = rec.peak_reserved_bytes / cap
        out.append(rec)
    return sorted(out, key=lambda m: (m.rank, m.device, m.device_type))


def _record(
    ctx: AnalysisContext,
    idle: IdleAnalysis,
    rank: int,
    device: int,
    rows: pl.DataFrame,
    steps: pl.DataFrame,
) -> DeviceMemory:
    peak = peak_of(rows, ctx.session)
    b = rows.get_column("bytes")
    dtype = int(rows.item(0, "device_type"))
    # steps matched by (name, occurrence) in time order: steps sharing a name stay apart
    dev_steps = sorted(
        (s for s in idle.steps if (s.rank, s.device) == (rank, device)), key=lambda s: s.start_ns
    )
    step_idle = {
        k: s.idle_by_cause.get(MEMORY_MANAGEMENT, 0)
        for k, s in zip(_occurrences([s.name for s in dev_steps]), dev_steps, strict=True)
    }
    found = list(step_churn(rows, steps).iter_rows(named=True))
    churn = [
        StepChurn(**r, allocator_idle_ns=step_idle.get(k, 0))
        for k, r in zip(_occurrences([str(r["step"]) for r in found]), found, strict=True)
    ]
    return DeviceMemory(
        rank=rank,
        device=device,
        peak_allocated_bytes=peak.peak_allocated_bytes,
        peak_reserved_bytes=peak.peak_reserved_bytes,
        peak_at_ns=peak.peak_at_ns,
        device_type=_DEVICE_TYPES.get(dtype, f"type {dtype}"),
        reserved_known=bool(rows.get_column("reserved_known").all()),
        totals_recorded=bool(rows.get_column("totals_recorded").all()),
        segments=bool(rows.get_column("segments").all()),
        allocated_before_bytes=int(rows.get_column("allocated_before_bytes").sum()),
        peak_reserved_at_ns=peak.peak_reserved_at_ns,
        peak_op=peak.peak_op,
        reserved_at_peak_bytes=peak.reserved_at_peak_bytes,
        fragmentation_bytes=peak.fragmentation_bytes,
        n_events=rows.height,
        first_ns=int(rows.item(0, "start_ns")),
        last_ns=int(rows.item(-1, "start_ns")),
        mallocs=int((b > 0).sum()),
        malloc_bytes=int(b.filter(b > 0).sum()),
        frees=int((b < 0).sum()),
        free_bytes=-int(b.filter(b < 0).sum()),
        churn=churn,
        series=downsample(rows),
    )


def _occurrences(names: list[str]) -> list[tuple[str, int]]:
    """``(name, k)``: the k-th time (from 0) the name occurs in ``names``, in order."""
    seen: dict[str, int] = {}
    out = []
    for n in names:
        out.append((n, seen.get(n, 0)))
        seen[n] = seen.get(n, 0) + 1
    return out


def _add_allocator(
    ctx: AnalysisContext, idle: IdleAnalysis, rec: DeviceMemory, calls: pl.DataFrame
) -> None:
    """The allocator's calls of the record's rank (each counts on every device of its rank),
    their idle on this device, and the idle pass's ``memory_management`` time."""
    key = (rec.rank, rec.device)
    dev_idle = idle.device(*key)
    rec.allocator_idle_ns = dev_idle.idle_by_cause.get(MEMORY_MANAGEMENT, 0) if dev_idle else 0
    rec.loop_allocator_idle_ns = rec.allocator_idle_ns
    if key not in ctx.devices:
        return
    g = ctx.devices.index(key)
    rec.loop_allocator_idle_ns = steady_allocator_idle(ctx, g, rec.allocator_idle_ns)
    if calls.height == 0:
        return
    rec.empty_cache_calls = int(calls.get_column("name").str.contains("(?i)empty_cache").sum())
    rec.allocator_call_ns = union_ns(calls)
    # a call inside another (the cudaFree inside an empty_cache range) is part of it
    calls = outermost(calls).with_columns(gpu_idle_during(ctx, g, outermost(calls)))
    rec.allocator_calls = calls.height
    rec.free_calls = int(calls.get_column("name").str.contains("Free").sum())
    hit = calls.filter(pl.col("gpu_idle_ns") > 0)
    rec.idle_calls = idle_spans(ctx, g, hit)
    top = hit.sort(["gpu_idle_ns", "start_ns"], descending=[True, False]).head(TOP_CALLS)
    rec.top_allocator_calls = [
        AllocatorCall(str(n), int(s), int(e) - int(s), int(i))
        for n, s, e, i in top.select("name", "start_ns", "end_ns", "gpu_idle_ns").iter_rows()
    ]
