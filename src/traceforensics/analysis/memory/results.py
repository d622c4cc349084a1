"""Result types of the memory pass (``analysis.memory.analyze_memory``). Bytes and integer ns.

JSON (``DeviceMemory.to_json``, the ``memory`` section, docs/memory.md): every field below but
``series``, which only the figure reads.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Final

import polars as pl

#: ``reserved_unused``: at the peak the allocator holds at least this share more than is
#: allocated (reserved >= 1.5 x allocated) ...
RESERVED_UNUSED_RATIO: Final = 1.5
#: ... and at least this many bytes more (256 MiB: less is not worth a change).
RESERVED_UNUSED_MIN_BYTES: Final = 256 << 20
#: ``near_capacity``: the peak reserved bytes are at least this share of the device's memory.
NEAR_CAPACITY_SHARE: Final = 0.9


_BIN_UNITS: Final = (("GiB", 1 << 30), ("MiB", 1 << 20), ("KiB", 1 << 10))


def fmt_bin(nbytes: int) -> str:
    """Bytes in the largest binary unit they are at least 1 of (``2.60 GiB``, ``256 MiB``):
    the one formatter of the memory section, its figure and its findings."""
    for name, size in _BIN_UNITS:
        if abs(nbytes) >= size:
            v = nbytes / size
            return f"{v:.0f} {name}" if v == int(v) else f"{v:.2f} {name}"
    return f"{nbytes} B"


@dataclass
class StepChurn:
    """One step's allocation churn on one device (``churn.step_churn``) and the GPU idle the
    idle pass attributed to the allocator in that step (``allocator_idle_ns``: the
    ``memory_management`` time of the device's step of the same name and occurrence, in time
    order; 0 when none)."""

    step: str
    start_ns: int
    end_ns: int
    mallocs: int
    malloc_bytes: int
    frees: int
    free_bytes: int
    allocator_idle_ns: int = 0

    def to_json(self) -> dict[str, Any]:
        return dict(self.__dict__)


@dataclass
class AllocatorCall:
    """One allocator call (``churn.allocator_calls``) and the GPU idle while it ran."""

    name: str
    start_ns: int
    dur_ns: int
    gpu_idle_ns: int

    def to_json(self) -> dict[str, Any]:
        return dict(self.__dict__)


@dataclass
class DeviceMemory:
    """One device's memory record: the peak (``timeline.Peak``), the churn, the allocator.

    ``device`` -1 is the CPU (``device_type`` ``"cpu"``). ``totals_recorded`` False: the
    trace has no allocator totals (nsys, PyTorch 1.8/1.9), so allocated is the running sum of
    the recorded events from 0 at the first (``events``). ``reserved_known`` False: the trace
    records no reserved bytes for it (CPU, nsys), so reserved = allocated and
    ``fragmentation_bytes`` is 0. ``memory_bytes``: the device's memory when the trace says it
    (``meta.devices``), and ``peak_reserved_share`` = ``peak_reserved_bytes`` / it.
    ``segments``: the events are the driver's allocations (nsys: ``cudaMalloc``'d segments,
    what a caching allocator reserves), not the framework's blocks. ``allocated_before_bytes``:
    at least this much was allocated before the first event (per process: its first total
    minus its first ``Bytes``; for a running sum, the lift that keeps it >= 0).
    ``vmm_calls``: the rank's calls of the virtual-memory API (``churn.VMM_CALLS``: expandable
    segments in use); ``free_calls``: the allocator calls whose name has ``Free``.
    ``allocator_idle_ns``: the idle pass's ``memory_management`` time of the
    device (whole window); ``loop_allocator_idle_ns``: the same outside the device's one-off
    windows (the steady state the idle findings use, ``churn.steady_allocator_idle``).
    ``allocator_calls``/``allocator_call_ns``: the calls not inside another and the ns of their
    union.
    """

    rank: int
    device: int
    peak_allocated_bytes: int
    peak_reserved_bytes: int
    peak_at_ns: int
    device_type: str = "cuda"
    reserved_known: bool = True
    totals_recorded: bool = True
    segments: bool = False
    allocated_before_bytes: int = 0
    vmm_calls: int = 0
    free_calls: int = 0
    peak_reserved_at_ns: int = 0
    peak_op: str | None = None
    reserved_at_peak_bytes: int = 0
    fragmentation_bytes: int = 0
    memory_bytes: int | None = None
    peak_reserved_share: float | None = None
    n_events: int = 0
    first_ns: int = 0
    last_ns: int = 0
    mallocs: int = 0
    malloc_bytes: int = 0
    frees: int = 0
    free_bytes: int = 0
    churn: list[StepChurn] = field(default_factory=list)
    allocator_calls: int = 0
    allocator_call_ns: int = 0
    empty_cache_calls: int = 0
    allocator_idle_ns: int = 0
    loop_allocator_idle_ns: int = 0
    top_allocator_calls: list[AllocatorCall] = field(default_factory=list)
    #: ``start_ns, total_allocated, total_reserved`` (``timeline.downsample``): the figure's
    series: pl.DataFrame | None = field(default=None, repr=False)
    #: the spans the GPU was idle while an allocator call ran (``churn.idle_spans``): the figure's
    idle_calls: list[tuple[int, int]] = field(default_factory=list, repr=False)

    @property
    def reserved_unused(self) -> bool:
        """Reserved far above allocated at the peak (``RESERVED_UNUSED_*``; only where the
        trace records reserved bytes)."""
        frag = self.fragmentation_bytes
        return (
            self.reserved_known
            and frag >= RESERVED_UNUSED_MIN_BYTES
            and self.reserved_at_peak_bytes >= RESERVED_UNUSED_RATIO * self.peak_allocated_bytes
        )

    @property
    def near_capacity(self) -> bool:
        """The peak reserved bytes reach ``NEAR_CAPACITY_SHARE`` of the device's memory (False
        when the trace does not say the device's memory)."""
        share = self.peak_reserved_share
        return share is not None and share >= NEAR_CAPACITY_SHARE

    def to_json(self) -> dict[str, Any]:
        out = {k: v for k, v in self.__dict__.items() if k not in ("series", "idle_calls")}
        out["churn"] = [c.to_json() for c in self.churn]
        out["top_allocator_calls"] = [c.to_json() for c in self.top_allocator_calls]
        out["reserved_unused"] = self.reserved_unused
        out["near_capacity"] = self.near_capacity
        if self.peak_reserved_share is not None:
            out["peak_reserved_share"] = round(self.peak_reserved_share, 6)
        return out
