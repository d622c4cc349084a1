"""Terminal lines for the kernel analysis: short kernels, op throughput, families, MFU.

Pure formatting of a ``KernelAnalysis``; returns lines, prints nothing. A suspect figure
(``kernels.suspect``: above peak, above the bandwidth, or against a guessed peak) is printed
as computed with a ``!`` after its MFU, and each reason once under its table. With an Nsight
Compute report (``kernels.ncu``) a measured class is printed with a ``*`` (the op table's
``bound``, the measured kernels' ``class``); an estimate has none.
"""

from __future__ import annotations

from collections.abc import Iterable

from traceforensics.analysis.kernels.results import (
    FamilyRow,
    KernelAnalysis,
    KernelBoundRow,
    MfuRow,
    OpRow,
)
from traceforensics.report.format import fmt_ns, fmt_pct, truncate


def _pct(x: float | None) -> str:
    return "-" if x is None else fmt_pct(x)


def _tf(x: float | None) -> str:
    return "-" if x is None else f"{x:.2f}"


def _mark(r: OpRow | FamilyRow | MfuRow) -> str:
    return "!" if r.suspect else " "


def _reasons(rows: Iterable[OpRow | FamilyRow | MfuRow]) -> list[str]:
    """One ``! reason`` line per distinct reason among the rows shown, first seen first."""
    seen = dict.fromkeys(r.suspect_reason for r in rows if r.suspect and r.suspect_reason)
    return [f"  ! {reason}" for reason in seen]


def short_kernel_lines(a: KernelAnalysis, top: int = 10, width: int = 60) -> list[str]:
    """Short kernels ranked by recoverable time, one line each plus its remedy."""
    out = [
        f"Short kernels (< {a.short_kernel_us:g} µs): {a.short_kernel_count} of "
        f"{a.kernel_count} kernels, {fmt_ns(a.short_kernel_ns)} GPU time"
    ]
    if not a.short_kernels:
        return [*out, "  none"]
    out.append(
        f"  {'recoverable':>11} {'count':>6} {'mean':>9} {'busy':>6} {'launch-bd':>9}  "
        "kernel  <- launching op"
    )
    for r in a.short_kernels[:top]:
        out.append(
            f"  {fmt_ns(r.recoverable_ns):>11} {r.count:>6} {fmt_ns(r.mean_ns):>9} "
            f"{_pct(r.share_of_busy):>6} {r.launch_bound_count:>9}  "
            f"{truncate(r.name, width)}  <- {truncate(r.launching_op, 40)}"
        )
        out.append(f"  {'':>11} -> {r.remedy}")
    return out


def op_lines(a: KernelAnalysis, top: int = 10, width: int = 48) -> list[str]:
    """Top ops by kernel time with achieved TFLOPS, MFU, bandwidth share and bound."""
    out = ["Achieved throughput per op (FLOPs from shapes, spread over the op's kernels)"]
    if not a.ops:
        out.append("  no op with known FLOPs launched kernels (record_shapes off?)")
    else:
        bw = 8 if a.ncu is not None else 7  # room for the measured marker
        out.append(
            f"  {'kernel':>9} {'TFLOPS':>8} {'peak':>8} {'MFU':>6}  {'membw':>6} {'bound':>{bw}} "
            f"{'dtype':>5}  op shapes"
        )
        for r in a.ops[:top]:
            bound = f"{r.bound}*" if r.source == "ncu" else r.bound or "-"
            out.append(
                f"  {fmt_ns(r.kernel_ns):>9} {_tf(r.tflops):>8} {_tf(r.peak_tflops):>8} "
                f"{_pct(r.mfu):>6}{_mark(r)} {_pct(r.membw_share):>6} {bound:>{bw}} "
                f"{r.dtype or '-':>5}  {r.op} x{r.count} {truncate(r.shapes, width)}"
            )
        out.extend(_reasons(a.ops[:top]))
    u = a.unknown_flops_kernels
    out.append(
        f"  unknown FLOPs: {u.count} kernels, {fmt_ns(u.kernel_ns)} "
        f"({_pct(u.share_of_kernel_ns)} of kernel time) - not counted, never guessed"
    )
    return out


def family_lines(a: KernelAnalysis) -> list[str]:
    """One line per op family and device."""
    if not a.families:
        return []  # nothing with FLOPs: no heading over an empty table
    out = ["Per op family"]
    for r in a.families:
        out.append(
            f"  {r.family:<12} dev {r.rank}:{r.device} {fmt_ns(r.kernel_ns):>9} "
            f"{_tf(r.tflops):>8} TFLOPS  MFU {_pct(r.mfu):>6}{_mark(r)} "
            f"membw {_pct(r.membw_share):>6}  {r.bound or '-'}"
        )
    return [*out, *_reasons(a.families)]


def _mfu_line(r: MfuRow) -> str:
    label = f"step {r.step}" if r.step is not None else "window"
    return (
        f"  rank {r.rank} dev {r.device} {label:<10} {fmt_ns(r.window_ns):>9}  "
        f"{_tf(r.tflops):>8} TFLOPS of {_tf(r.peak_tflops)}  MFU {_pct(r.mfu)}{_mark(r).strip()}"
    )


def mfu_lines(a: KernelAnalysis, max_steps: int = 20) -> list[str]:
    """MFU per device for the window, then per step."""
    out = ["Model FLOPs utilization (known FLOPs / peak over the GPU-active window)"]
    for r in a.mfu_by_device:
        peak = r.peak_source or "not in the peak table, no peak known: pass --peak-tflops"
        out.append(_mfu_line(r))
        out.append(f"    {r.device_name or '(unnamed device)'}: {peak}")
    out.extend(_mfu_line(r) for r in a.mfu_by_step[:max_steps])
    if len(a.mfu_by_step) > max_steps:
        out.append(f"  ... {len(a.mfu_by_step) - max_steps} more steps")
    return [*out, *_reasons([*a.mfu_by_device, *a.mfu_by_step[:max_steps]])]


def _num(x: float | None, unit: str = "%") -> str:
    return "-" if x is None else f"{x:.0f}{unit}"


def _bound_line(r: KernelBoundRow, width: int) -> str:
    """One kernel: its class (``*`` measured) and the figures the class read: SM, memory
    (Memory Throughput, else DRAM Throughput: what ``bound_class`` used), DRAM beside it."""
    m = r.ncu
    cls = f"{r.bound}*" if r.source == "ncu" else r.bound or "-"
    if m is None:
        sm, mem, dram, occ, waves = "-", "-", "-", "-", "-"
    else:
        sm, occ = _num(m.sm_pct), _num(m.achieved_occupancy_pct)
        mem, dram = _num(m.mem_pct if m.mem_pct is not None else m.dram_pct), _num(m.dram_pct)
        waves = "-" if m.waves_per_sm is None else f"{m.waves_per_sm:.1f}"
    return (
        f"  {r.rank}:{r.device} {fmt_ns(r.total_ns):>9} x{r.count:<6} {cls:>8} {sm:>4} "
        f"{mem:>4} {dram:>4} {occ:>4} {waves:>6}  {truncate(r.name, width)}"
    )


def bound_lines(a: KernelAnalysis, top: int = 10, width: int = 60) -> list[str]:
    """The top kernels by time with what bounds them: measured by Nsight Compute (``*``:
    SM and memory throughput, the two the class reads, then DRAM throughput, achieved
    occupancy, waves per SM) or the roofline estimate of their op; nothing without a
    report."""
    j = a.ncu
    if j is None:
        return []
    out = [
        f"Kernel bounds (Nsight Compute: {j.matched} of {j.launches} profiled launches matched; "
        f"* measured, else estimated)",
        f"  dev {'time':>9} {'count':<7} {'class':>8} {'SM':>4} {'mem':>4} {'DRAM':>4} "
        f"{'occ':>4} {'waves':>6}  kernel",
    ]
    per_device: dict[tuple[int, int], int] = {}
    for r in j.kernels:
        seen = per_device.get((r.rank, r.device), 0)
        per_device[(r.rank, r.device)] = seen + 1
        if seen < top:
            out.append(_bound_line(r, width))
    if j.shape_mismatches:
        out.append(f"  {j.shape_mismatches} launch pairs left out: grid or block differ")
    if j.shifted:
        out.append(f"  {j.shifted} kernel names paired at an offset (other first launches)")
    if j.unmatched_names:
        out.append(f"  not in the trace: {truncate(', '.join(j.unmatched_names), width + 40)}")
    return out


def kernel_report_lines(a: KernelAnalysis, top: int = 10) -> list[str]:
    """Every section, separated by blank lines."""
    return [
        *short_kernel_lines(a, top),
        "",
        *op_lines(a, top),
        "",
        *([*bound_lines(a, top), ""] if a.ncu is not None else []),
        *([*family_lines(a), ""] if a.families else []),
        *mfu_lines(a),
    ]
