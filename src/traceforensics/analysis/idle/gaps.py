"""Idle-gap forensics: device-level idle gaps, each split exactly over causes, with evidence.

Busy time of a device is the union of its kernel, memcpy and memset intervals over all streams;
idle gaps are the holes of that union inside the analysis window::

    window:  [lo ........................................................ hi)
    stream 7:   |==k1==|      |=k2=|
    stream 9:       |====k3====|          |==k4==|
    busy:       |==============|=|  |     |======|
    gaps:                        (none)|==|      (window ends at the last work: default)

Every gap is attributed by ``attribution.attribute_gaps`` (the rule is documented there and in
docs/causes.md) through ``windows.window_gaps``; the largest gaps get evidence, and so does one
example gap per cause none of them shows (``examples``); per-step breakdowns come from
``step_idle``; HTA's per-stream view from ``streams``. ``window_gaps`` and its helpers are
re-exported here.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from traceforensics.analysis.busy import COMMUNICATION, KERNEL
from traceforensics.analysis.context import AnalysisContext, as_context, side_by_side
from traceforensics.analysis.idle.attribution import Parts
from traceforensics.analysis.idle.comm import comm_in_window
from traceforensics.analysis.idle.evidence import gap_evidence
from traceforensics.analysis.idle.examples import example_gaps
from traceforensics.analysis.idle.results import (
    DeviceIdle,
    Evidence,
    Gap,
    StepOutlier,
    StepStats,
    StepSummary,
    StreamIdle,
)
from traceforensics.analysis.idle.step_idle import step_breakdown
from traceforensics.analysis.idle.streams import stream_idle
from traceforensics.analysis.idle.windows import (
    WindowGaps,
    attribute_some,
    causes_dict,
    ending_ops,
    full_causes,
    gap_begin,
    window_gaps,
)
from traceforensics.analysis.options import AnalysisOptions
from traceforensics.model.memory import release_free_memory
from traceforensics.model.session import TraceSession
from traceforensics.model.units import I64


@dataclass
class IdleAnalysis:
    """Result of the idle pass (``analyze_idle``). All times are integer ns."""

    devices: list[DeviceIdle]
    gaps: list[Gap]
    steps: list[StepStats] = field(default_factory=list)
    step_summary: list[StepSummary] = field(default_factory=list)
    stream_gaps: list[StreamIdle] = field(default_factory=list)
    #: For each cause with idle time that no gap of ``gaps`` shows on a device, the device's
    #: gap with the most of it, with evidence (``examples``; in time order; not in the JSON).
    examples: list[Gap] = field(default_factory=list)

    def device(self, rank: int, device: int) -> DeviceIdle | None:
        return next((d for d in self.devices if (d.rank, d.device) == (rank, device)), None)


def analyze_idle(
    source: AnalysisContext | TraceSession, options: AnalysisOptions | None = None
) -> IdleAnalysis:
    """Device-level idle gaps of every GPU in its analysis window, each split exactly over
    ``CAUSES``; the ``top_gaps`` largest with evidence; the step and per-stream views.

    ``idle_by_cause`` of each device sums exactly to the idle of its window (the device
    record's ``idle_ns``). Called on a session it prepares the context itself (same result as
    ``analyze``'s idle part for the same options)."""
    ctx = as_context(source, options)
    n_dev, n_top = len(ctx.devices), ctx.options.idle.top_gaps
    devs = np.arange(n_dev, dtype=np.int64)
    wg = window_gaps(ctx, devs, ctx.window_lo, ctx.window_hi, keep=max(n_top, 0), best=True)
    devices: list[DeviceIdle] = []
    for g, (rank, device) in enumerate(ctx.devices):
        comm_ns, exposed = comm_in_window(
            *ctx.busy.kind(g, COMMUNICATION),
            *ctx.busy.kind(g, KERNEL),
            lo=int(ctx.window_lo[g]),
            hi=int(ctx.window_hi[g]),
        )
        devices.append(
            DeviceIdle(
                rank=rank,
                device=device,
                idle_by_cause=full_causes(wg.by_window[g]),
                comm_ns=comm_ns,
                exposed_comm_ns=exposed,
                n_gaps=int(wg.n_gaps[g]),
            )
        )
    gaps = top_gaps(ctx, wg, n_top)
    examples = cause_examples(ctx, wg)
    del wg  # the step and stream views build their own: never two sets of gaps at once
    big = not side_by_side(ctx.session.events.height)
    if big:  # the attribution's freed chunks, back to the OS before the next views peak
        release_free_memory()
    steps, summary = step_breakdown(ctx)
    if big:
        release_free_memory()
    return IdleAnalysis(devices, gaps, steps, summary, stream_idle(ctx), examples)


def top_gaps(ctx: AnalysisContext, wg: WindowGaps, n: int) -> list[Gap]:
    """The ``n`` longest gaps (ties: earliest first) with causes and evidence, out of the gaps
    ``wg`` kept (``window_gaps(..., keep=n)`` keeps exactly those)."""
    kept = min(max(n, 0), wg.kept.size)
    rows = wg.kept[:kept]
    dev = wg.window_dev[wg.win[rows]]
    return _with_evidence(ctx, dev, wg.start[rows], wg.end[rows], wg.op, wg.matrix, wg.parts)


def cause_examples(ctx: AnalysisContext, wg: WindowGaps) -> list[Gap]:
    """The example gaps (``examples``) of ``wg`` (built with ``best=True``): per device and
    cause, the gap with the most of it, attributed again on their own. They do not depend on
    which gaps are listed (``top_gaps`` is a job-wide cut), so a rank analysed alone gets the
    same examples as in its job (``fanout``)."""
    if wg.best is None:
        return []
    rows = example_gaps(wg.best)
    if rows.size == 0:
        return []
    dev = wg.window_dev[wg.win[rows]]
    s, e = wg.start[rows], wg.end[rows]
    op, matrix, parts = attribute_some(ctx, dev, s, e)
    return _with_evidence(ctx, dev, s, e, op, matrix, parts)


def _with_evidence(
    ctx: AnalysisContext, dev: I64, s: I64, e: I64, op: I64, matrix: I64, parts: Parts
) -> list[Gap]:
    """``Gap`` records of gaps ``[s, e)`` of devices ``dev`` (ns); row j of ``op``, ``matrix``
    and ``parts`` belongs to gap j."""
    out: list[Gap] = []
    correlations = ctx.correlations(op[: s.size])
    for j in range(s.size):
        rank, device = ctx.devices[int(dev[j])]
        causes = causes_dict(matrix[j])
        a, b = int(s[j]), int(e[j])
        ev: list[Evidence] = gap_evidence(
            ctx,
            j,
            s=a,
            e=b,
            op=int(op[j]),
            parts=parts,
            causes=causes,
            correlation=correlations[j],
        )
        out.append(Gap(rank, device, a, b - a, causes, ev))
    return out


__all__ = [
    "DeviceIdle",
    "Evidence",
    "Gap",
    "IdleAnalysis",
    "StepOutlier",
    "StepStats",
    "StepSummary",
    "StreamIdle",
    "WindowGaps",
    "analyze_idle",
    "cause_examples",
    "causes_dict",
    "ending_ops",
    "full_causes",
    "gap_begin",
    "top_gaps",
    "window_gaps",
]
