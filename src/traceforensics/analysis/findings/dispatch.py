"""CPU work that is the framework dispatching many small ops: the launch remedy, not "move it".

A ``cpu_compute`` gap means the launching thread was busy with something other than a launch
call. In an eager program that something is usually the framework itself: Python running
``forward()``, module calls and ATen dispatch between many short kernels. Moving that "off the
critical path" is no advice; fewer, larger kernels are (CUDA graphs, ``torch.compile``, a
larger batch: the ``launch_overhead`` remedy, with its preconditions: a step already replayed
as a graph is told to fuse kernels instead).

Rule (per device): the ``cpu_compute`` finding is **dispatch-bound** when

1. its kernels are short: the median kernel duration in the device's window is at most
   ``DISPATCH_KERNEL_MEDIAN_NS`` (a kernel shorter than an eager op's host dispatch cost);
2. at least ``DISPATCH_SHARE`` of the ``cpu_compute`` idle of the device's kept gaps (the
   longest ones, with evidence) lies in gaps no longer than ``DISPATCH_GAP_MAX_NS`` whose
   ``cpu_compute`` evidence is framework dispatch: a Python frame, or a range whose name says
   module/op dispatch (``DISPATCH_NAME_RE``: ``forward``/``backward``, ``_call_impl``,
   ``nn.Module``, ``aten::``, autograd nodes, ``## forward ##``-style user ranges). A longer gap
   is one piece of host work (cuDNN autotuning inside ``aten::cudnn_convolution``, a data
   transform), not the dispatch of many ops.

The finding keeps its category (``cpu_compute``), idle time and evidence; its title says it is
dispatch-bound and its figures carry ``dispatch_bound`` (true) and ``median_kernel_ns``.
"""

from __future__ import annotations

import re
from dataclasses import replace
from typing import Final

import polars as pl

from traceforensics.analysis.context import AnalysisContext
from traceforensics.analysis.devices import DeviceRecord
from traceforensics.analysis.findings.busy_losses import window_kernels
from traceforensics.analysis.findings.preconditions import checked
from traceforensics.analysis.findings.results import Finding
from traceforensics.analysis.idle import causes as c
from traceforensics.analysis.idle.results import Gap
from traceforensics.analysis.program import Program
from traceforensics.model.units import fmt_ns

#: Largest median kernel duration (ns) of a device whose CPU gaps can be dispatch-bound.
DISPATCH_KERNEL_MEDIAN_NS: Final = 50_000
#: Longest gap (ns) counted as dispatch of many ops rather than one piece of host work.
DISPATCH_GAP_MAX_NS: Final = 50_000_000
#: Share of the kept gaps' cpu_compute idle that must be dispatch.
DISPATCH_SHARE: Final = 0.5
#: Host range names that are framework op dispatch (Python frames count whatever their name).
DISPATCH_NAME_RE: Final = re.compile(
    r"forward|backward|_call_impl|nn\.Module|^aten::|^autograd::|Backward\d*$|^## ",
    re.IGNORECASE,
)


def median_kernel_ns(ctx: AnalysisContext, rec: DeviceRecord) -> int | None:
    """Median duration (ns) of the device's kernels inside its window; None without kernels."""
    dur = window_kernels(ctx, rec).select((pl.col("end_ns") - pl.col("start_ns")).median())
    value = dur.item() if dur.height else None
    return None if value is None else int(value)


def _is_dispatch(gap: Gap) -> bool:
    return gap.dur_ns <= DISPATCH_GAP_MAX_NS and any(
        e.cause == c.CPU_COMPUTE and (e.kind == "python" or DISPATCH_NAME_RE.search(e.name))
        for e in gap.evidence
    )


def dispatch_share(gaps: list[Gap]) -> float:
    """Share of the gaps' ``cpu_compute`` idle in dispatch gaps (rule 2); 0 without any."""
    total = sum(g.causes.get(c.CPU_COMPUTE, 0) for g in gaps)
    if total <= 0:
        return 0.0
    return sum(g.causes.get(c.CPU_COMPUTE, 0) for g in gaps if _is_dispatch(g)) / total


def dispatch_finding(
    finding: Finding, gaps: list[Gap], median_ns: int | None, program: Program
) -> Finding:
    """``finding`` (a ``cpu_compute`` one) worded as dispatch-bound when the rule holds
    (module docstring), else unchanged. ``gaps``: the device's kept gaps."""
    if finding.category != c.CPU_COMPUTE or median_ns is None:
        return finding
    if median_ns > DISPATCH_KERNEL_MEDIAN_NS or dispatch_share(gaps) < DISPATCH_SHARE:
        return finding
    text, note, rule = checked("launch_overhead", program)
    title = (
        f"{finding.title}: dispatch-bound - the launching thread was running the framework's "
        f"op dispatch (Python, module calls) between short kernels (median {fmt_ns(median_ns)})"
    )
    figures = {**finding.figures, "dispatch_bound": True, "median_kernel_ns": median_ns}
    if rule is not None:
        title += f" ({note})" if note else ""
        figures["precondition"] = rule
    return replace(finding, title=title, remedy=text, figures=figures)


__all__ = [
    "DISPATCH_GAP_MAX_NS",
    "DISPATCH_KERNEL_MEDIAN_NS",
    "DISPATCH_NAME_RE",
    "DISPATCH_SHARE",
    "dispatch_finding",
    "dispatch_share",
    "median_kernel_ns",
]
