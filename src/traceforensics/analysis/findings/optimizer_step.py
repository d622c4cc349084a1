"""The optimizer's share of the step: ``optimizer.step()`` taking a large part of the window.

PyTorch records ``Optimizer.step#<Optimizer>.step`` around each call (nsys shows the same
range through NVTX, and user ranges saying "optimizer" count too; ``zero_grad`` ranges are left
to their own finding, ``zero_grad``). Rule, per device:

- the **optimizer time**: the GPU time of the kernels and memsets launched inside those ranges
  (collectives left out: the communication findings count them) plus the device's idle
  inside them (the GPU waiting while the host ran the update), within the device's window
  (``zero_grad.range_work``: the same measure as the ``zero_grad`` finding); ranges are the
  host's annotations and operators (a Python frame named ``zero_grad`` is not one), nested
  ranges count once;
- a finding when the optimizer time is at least ``OPTIMIZER_SHARE`` of the window;
- ``recoverable`` is the idle inside the ranges: the GPU waiting while the host works through
  the update (the smaller GPU time of a multi-tensor update is not counted: a floor);
- **fused or not**: the trace shows a multi-tensor update when a kernel launched inside the
  ranges is a multi-tensor/foreach/fused optimizer kernel (``facts.FUSED_OPTIMIZER_RE``).
  Not fused (one launch per parameter and operation), confidence ``medium``: the remedy names
  the flag the optimizer's class has (``Optimizer.step#<Class>.step``: ``fused=True`` for
  Adam/AdamW/SGD/Adagrad, ``foreach=True`` for PyTorch's other optimizers; a class of its
  own: compile the step or write it with ``torch._foreach_*``). Already multi-tensor,
  confidence ``low``: never "use fused" again; the host's share is left (compile the step,
  capture it in a graph), and the update's own cost (sharded or lower-precision state).
"""

from __future__ import annotations

import re
from typing import Final

import polars as pl

from traceforensics.analysis.context import AnalysisContext
from traceforensics.analysis.devices import DeviceRecord
from traceforensics.analysis.facts import FUSED_OPTIMIZER_RE
from traceforensics.analysis.findings.busy_losses import EVIDENCE_KEPT, window_share
from traceforensics.analysis.findings.remedies import OPTIMIZER_FUSED_REMEDY, remedy
from traceforensics.analysis.findings.results import OPTIMIZER_STEP, Finding
from traceforensics.analysis.findings.zero_grad import range_work
from traceforensics.analysis.idle.results import Evidence
from traceforensics.analysis.names import OPTIMIZER_RE
from traceforensics.analysis.program import Program
from traceforensics.model.units import fmt_ns, fmt_pct

#: The optimizer's share of the device's window from which it is a finding.
OPTIMIZER_SHARE: Final = 0.10
#: Host kinds whose ranges say optimizer (Python frames left out: ``optimizer.py(..): zero_grad``).
_KINDS: Final = ("annotation", "cpu_op")
#: PyTorch optimizers with ``fused=True`` (CUDA), and with ``foreach=True`` (PyTorch 2.x).
FUSED_CLASSES: Final = frozenset({"Adam", "AdamW", "SGD", "Adagrad"})
FOREACH_CLASSES: Final = FUSED_CLASSES | frozenset(
    {"Adadelta", "Adamax", "ASGD", "NAdam", "RAdam", "RMSprop", "Rprop"}
)
_CLASS_RE: Final = re.compile(r"^Optimizer\.step#(\w+)\.step")


def _per_parameter_remedy(rows: pl.DataFrame, program: Program) -> str:
    """The remedy of a per-parameter update, with the flag the optimizer's class has."""
    text = remedy(OPTIMIZER_STEP, program)
    if program.framework != "pytorch":
        return text
    found = {m.group(1) for n in rows.get_column("name").to_list() if (m := _CLASS_RE.match(n))}
    if not found or found <= FUSED_CLASSES:
        return text
    named = ", ".join(sorted(found))
    if found <= FOREACH_CLASSES:
        return f"build {named} with foreach=True: a few multi-tensor kernels update every parameter"
    return (
        f"{named} has no fused/foreach flag: compile its step (torch.compile) or write the update "
        "with torch._foreach_* ops, so a few multi-tensor kernels update every parameter"
    )


def optimizer_step_finding(
    ctx: AnalysisContext, rec: DeviceRecord, program: Program
) -> list[Finding]:
    """The device's ``optimizer_step`` finding, or none (rules in the module docstring)."""
    work = range_work(ctx, rec, OPTIMIZER_RE, leave_out=r"zero_grad", kinds=_KINDS)
    if work is None or rec.window_ns <= 0:
        return []
    spent = work.gpu_ns + work.idle_ns
    share = window_share(spent, rec)
    if share < OPTIMIZER_SHARE:
        return []
    fused_re = re.compile(FUSED_OPTIMIZER_RE)
    fused = sorted(n for n in work.names if fused_re.search(n))
    ranges = work.spans
    head = (
        f"the optimizer takes {fmt_pct(share)} of the window: {fmt_ns(spent)} in {ranges} "
        f"optimizer.step ranges ({work.launched} kernels, {fmt_ns(work.gpu_ns)} of GPU work, "
        f"{fmt_ns(work.idle_ns)} of GPU idle)"
    )
    if fused:
        remedy_generic = (
            "the update already runs multi-tensor kernels: shard the optimizer state across "
            "data-parallel ranks or keep it in lower precision"
        )
        title = f"{head}; the update is already multi-tensor ({len(fused)} fused/foreach kernels)"
        advice = OPTIMIZER_FUSED_REMEDY if program.framework == "pytorch" else remedy_generic
        confidence = "low"
    else:
        title = f"{head}; one launch per parameter (no fused/foreach kernel)"
        advice, confidence = _per_parameter_remedy(work.rows, program), "medium"
    evidence = [
        Evidence(OPTIMIZER_STEP, "annotation", name, int(s), int(d), tid, "optimizer range")
        for name, s, d, tid in work.rows.head(EVIDENCE_KEPT).iter_rows()
    ]
    figures = {
        "optimizer_ns": spent,
        "gpu_ns": work.gpu_ns,
        "idle_ns": work.idle_ns,
        "kernels": work.launched,
        "ranges": ranges,
        "optimizer_share": round(share, 6),
        "fused_kernels": fused[:EVIDENCE_KEPT],
    }
    return [
        Finding(
            OPTIMIZER_STEP,
            rec.rank,
            rec.device,
            work.idle_ns,
            window_share(work.idle_ns, rec),
            title,
            advice,
            confidence,
            evidence,
            figures,
        )
    ]


__all__ = ["OPTIMIZER_SHARE", "optimizer_step_finding"]
