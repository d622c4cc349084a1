"""Typed results of the kernel analysis (short kernels, op throughput, MFU) and their JSON.

``KernelAnalysis.to_json()`` returns::

    {"short_kernels": [{"name", "launching_op", "count", "total_ns", "mean_ns",
                        "recoverable_ns", "remedy", ...extra}],
     "ops": [{"op", "shapes", "dtype", "flops", "bytes", "kernel_ns", "tflops",
              "peak_tflops", "mfu", "bound", "suspect", "suspect_reason", ...extra}],
     "mfu": {"devices": [...], "steps": [...]},
     "ncu": null | {"launches", "matched", "shape_mismatches", "kernels_covered",
                    "unmatched_names", "kernels": [KernelBoundRow], "process_id",
                    "report_device", "launches_left_out", "shifted"},
     ...extra top-level keys}

``ncu`` is null unless an Nsight Compute report was given (``tf analyze --ncu``,
``kernels.ncu_join``); then every ``ops[]`` row and every ``ncu.kernels[]`` row (the top kernels
by time per device) says where its ``bound`` comes from: ``source: "ncu"`` (measured, with
``ncu`` = ``NcuFigures``) or ``"estimate"`` (the roofline model; ``ncu`` null, or the
measured figures when they give no class: ``ncu.bound == "unknown"``).

Every ns value is an int; ratios are floats (or null when unknown), normally in [0, 1]: a
figure above 1 (or measured against a guessed peak) is kept as computed and its row flagged
``suspect`` with a ``suspect_reason`` (rule in ``suspect``), never clamped or hidden.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from typing import Any


@dataclass
class ShortKernelRow:
    """Short kernels of one (rank, device, normalized name, launching op) group."""

    name: str
    launching_op: str
    count: int
    total_ns: int
    mean_ns: int
    recoverable_ns: int
    remedy: str
    remedy_code: str
    rank: int
    device: int
    share_of_busy: float | None
    host_launch_ns: int
    idle_between_ns: int
    launch_bound_count: int
    context: str | None

    def to_json(self) -> dict[str, Any]:
        return asdict(self)


@dataclass
class OpRow:
    """One (op, shapes, dtype, rank, device) group whose FLOPs are known."""

    op: str
    shapes: str
    dtype: str | None
    flops: int
    bytes: int | None
    kernel_ns: int
    tflops: float | None
    peak_tflops: float | None
    mfu: float | None
    bound: str | None
    family: str
    peak_dtype: str | None
    count: int
    kernel_count: int
    membw_share: float | None
    arithmetic_intensity: float | None
    rank: int
    device: int
    #: set by ``suspect.flag_suspects``: the figures cannot be taken at face value, and why
    suspect: bool = False
    suspect_reason: str | None = None
    #: ``estimate`` (``bound`` from the roofline model) or ``ncu`` (measured: ``ncu``); an
    #: estimate may carry measured figures without a class (``ncu.bound == "unknown"``)
    source: str = "estimate"
    ncu: NcuFigures | None = None

    def to_json(self) -> dict[str, Any]:
        return asdict(self)


@dataclass
class NcuFigures:
    """Nsight Compute's measured figures of the launches matched to one kernel or op: means
    over those launches (nulls left out; None when no launch has the figure). Percentages of
    peak (0-100), ``duration_ns`` integer ns. ``bound`` = ``bound.bound_class(sm_pct, mem_pct
    or dram_pct)``: ``compute``, ``memory``, ``latency`` or ``unknown``; ``balanced`` and
    ``small_grid`` as in ``kernels.bound``."""

    launches: int
    duration_ns: int | None
    sm_pct: float | None
    mem_pct: float | None
    dram_pct: float | None
    achieved_occupancy_pct: float | None
    theoretical_occupancy_pct: float | None
    waves_per_sm: float | None
    bound: str
    balanced: bool
    small_grid: bool

    def to_json(self) -> dict[str, Any]:
        return asdict(self)


@dataclass
class KernelBoundRow:
    """One of a device's top kernels by total time (``options.kernels.top``) and what bounds
    it: measured (``source: "ncu"``, ``bound`` = ``ncu.bound``) or the roofline estimate of
    the op that charged its FLOPs (``source: "estimate"``; None where no FLOPs model covers
    it; ``ncu`` then null, or figures whose class is ``unknown``)."""

    rank: int
    device: int
    name: str
    count: int
    total_ns: int
    source: str
    bound: str | None
    ncu: NcuFigures | None

    def to_json(self) -> dict[str, Any]:
        return asdict(self)


@dataclass
class NcuJoin:
    """How an Nsight Compute report joined the trace (``kernels.ncu_join``): ``launches``
    profiled, ``matched`` to a trace launch on some device, ``shape_mismatches`` pairs dropped
    because grid or block differ, ``unmatched_names`` base names of the report absent from
    the trace (first 10), ``kernels_covered`` rows of ``kernels`` measured (known class).
    ``process_id``/``report_device``: the report's (``Process ID``, ``Device``) joined (None
    where the report has no such column), ``launches_left_out`` the launches of its other
    processes or devices (not joined); ``shifted`` (device, kernel name) groups paired at an
    offset other than 0 (the report started at another launch than the trace)."""

    launches: int
    matched: int
    shape_mismatches: int
    kernels_covered: int
    unmatched_names: list[str]
    kernels: list[KernelBoundRow]
    process_id: int | None = None
    report_device: int | None = None
    launches_left_out: int = 0
    shifted: int = 0

    def warning(self, report: str) -> str | None:
        """One line when part of ``report`` was not joined (other processes or devices)."""
        if not self.launches_left_out:
            return None
        return (
            f"{report}: {self.launches_left_out} of {self.launches} launches are of other "
            f"processes or devices than process {self.process_id} device {self.report_device}"
            " and were not joined; profile one rank (ncu without --target-processes all, or "
            "a report per rank) to measure them"
        )

    def to_json(self) -> dict[str, Any]:
        return {**asdict(self), "kernels": [k.to_json() for k in self.kernels]}


@dataclass
class FamilyRow:
    """All FLOPs-known ops of one family (gemm, conv, attention, elementwise) on a device."""

    family: str
    rank: int
    device: int
    flops: int
    bytes: int | None
    kernel_ns: int
    tflops: float | None
    peak_tflops: float | None
    mfu: float | None
    membw_share: float | None
    bound: str | None
    op_count: int
    #: set by ``suspect.flag_suspects``: the figures cannot be taken at face value, and why
    suspect: bool = False
    suspect_reason: str | None = None

    def to_json(self) -> dict[str, Any]:
        return asdict(self)


@dataclass
class MfuRow:
    """Model FLOPs utilization of one device over a window (whole trace or one step).

    ``window_ns`` = first GPU work start to last GPU work end on the device; for a step, the
    step's window from the step table (``steps[]``; FLOPs: kernels that started on the GPU
    inside it). ``peak_tflops`` is the FLOPs-weighted effective peak, so ``tflops /
    peak_tflops == mfu``."""

    rank: int
    device: int
    step: int | None
    window_start_ns: int
    window_ns: int
    flops: int
    tflops: float | None
    peak_tflops: float | None
    mfu: float | None
    kernel_ns: int
    flops_known_kernel_ns: int
    device_name: str
    peak_source: str | None
    peak_how: str
    #: set by ``suspect.flag_suspects``: the figures cannot be taken at face value, and why
    suspect: bool = False
    suspect_reason: str | None = None

    def to_json(self) -> dict[str, Any]:
        d = asdict(self)
        if self.step is None:
            d.pop("step")
        return d


@dataclass
class UnknownFlops:
    """Kernels no FLOPs model covers: counted and shown, never guessed."""

    count: int
    kernel_ns: int
    share_of_kernel_ns: float | None
    top: list[dict[str, Any]] = field(default_factory=list)
    #: every (launching op, name) group, ``top``'s order: ranks analysed apart add theirs up
    #: before the job's top 10 is cut (not in the JSON)
    groups: list[dict[str, Any]] = field(default_factory=list, repr=False)

    def to_json(self) -> dict[str, Any]:
        out = asdict(self)
        out.pop("groups")
        return out


@dataclass
class KernelAnalysis:
    """Everything ``analyze_kernels`` found. ``options`` echoes the thresholds used."""

    short_kernels: list[ShortKernelRow]
    ops: list[OpRow]
    families: list[FamilyRow]
    mfu_by_device: list[MfuRow]
    mfu_by_step: list[MfuRow]
    unknown_flops_kernels: UnknownFlops
    short_kernel_us: float
    short_kernel_count: int
    short_kernel_ns: int
    kernel_count: int
    peaks: list[dict[str, Any]] = field(default_factory=list)
    #: the Nsight Compute join (``tf analyze --ncu``), None without a report
    ncu: NcuJoin | None = None

    @classmethod
    def empty(cls, short_kernel_us: float) -> KernelAnalysis:
        """An analysis that found nothing (the kernels pass failed: ``analysis_failed``)."""
        return cls([], [], [], [], [], UnknownFlops(0, 0, None), short_kernel_us, 0, 0, 0)

    def to_json(self) -> dict[str, Any]:
        return {
            "short_kernels": [r.to_json() for r in self.short_kernels],
            "ops": [r.to_json() for r in self.ops],
            "mfu": {
                "devices": [r.to_json() for r in self.mfu_by_device],
                "steps": [r.to_json() for r in self.mfu_by_step],
            },
            "op_families": [r.to_json() for r in self.families],
            "unknown_flops_kernels": self.unknown_flops_kernels.to_json(),
            "short_kernel_summary": {
                "threshold_us": self.short_kernel_us,
                "count": self.short_kernel_count,
                "total_ns": self.short_kernel_ns,
                "kernel_count": self.kernel_count,
            },
            "peaks": self.peaks,
            "ncu": None if self.ncu is None else self.ncu.to_json(),
        }
