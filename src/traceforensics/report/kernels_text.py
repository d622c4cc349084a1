"""Terminal lines for the kernel analysis: short kernels, op throughput, families, MFU.

Pure formatting of a ``KernelAnalysis``; returns lines, prints nothing. A suspect figure
(``kernels.suspect``: above peak, above the bandwidth, or against a guessed peak) is printed
as computed with a ``!`` after its MFU, and each reason once under its table.
"""

from __future__ import annotations

from collections.abc import Iterable

from traceforensics.analysis.kernels.results import FamilyRow, KernelAnalysis, MfuRow, OpRow
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
        out.append(
            f"  {'kernel':>9} {'TFLOPS':>8} {'peak':>8} {'MFU':>6}  {'membw':>6} {'bound':>7} "
            f"{'dtype':>5}  op shapes"
        )
        for r in a.ops[:top]:
            out.append(
                f"  {fmt_ns(r.kernel_ns):>9} {_tf(r.tflops):>8} {_tf(r.peak_tflops):>8} "
                f"{_pct(r.mfu):>6}{_mark(r)} {_pct(r.membw_share):>6} {r.bound or '-':>7} "
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


def kernel_report_lines(a: KernelAnalysis, top: int = 10) -> list[str]:
    """Every section, separated by blank lines."""
    return [
        *short_kernel_lines(a, top),
        "",
        *op_lines(a, top),
        "",
        *([*family_lines(a), ""] if a.families else []),
        *mfu_lines(a),
    ]
