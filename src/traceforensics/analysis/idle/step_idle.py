"""The per-step idle breakdown and step statistics (steps come from the context's step table,
``analysis.steps``: one detector for every pass).

For each step window ``[lo, hi)`` on its device: busy (the device's busy union clipped to the
window), idle gaps attributed exactly as device gaps (``windows.window_gaps``: a gap clipped by
the window keeps the causes of the whole gap), communication and its exposed part, and its
GPU and host time by phase (``analysis.phases``)::

    GPU work:   |==step 1==|....idle....|==step 2==|
    window:                [ step 2 (tiled)        )
    idle_by_cause of step 2 = the attributed gap [end of step 1, start of step 2's work)
"""

from __future__ import annotations

import numpy as np

from traceforensics.analysis.busy import COMMUNICATION, KERNEL
from traceforensics.analysis.context import AnalysisContext
from traceforensics.analysis.idle.causes import (
    CAUSES,
    OUTLIER_MAD_SIGMAS,
    OUTLIER_MIN_EXCESS_FRACTION,
)
from traceforensics.analysis.idle.comm import comm_in_window
from traceforensics.analysis.idle.results import StepOutlier, StepStats, StepSummary
from traceforensics.analysis.idle.windows import full_causes, in_window, window_gaps
from traceforensics.analysis.intervals import clip, total
from traceforensics.analysis.phases import step_phases


def step_breakdown(ctx: AnalysisContext) -> tuple[list[StepStats], list[StepSummary]]:
    """Per-step busy/idle-by-cause (one ``StepStats`` per row of ``ctx.steps``) and
    per-device step statistics."""
    spans = ctx.steps
    if spans.height == 0:
        return [], []
    dev_index = {rd: g for g, rd in enumerate(ctx.devices)}
    dev = spans.get_column("dev").to_numpy().astype(np.int64)
    lo = spans.get_column("start_ns").to_numpy().astype(np.int64)
    hi = spans.get_column("end_ns").to_numpy().astype(np.int64)
    wg = window_gaps(ctx, dev, lo, hi, keep=0)
    by_step, idle_ns = wg.by_window, wg.idle
    del wg  # per-step sums are all the steps need
    phases = step_phases(ctx, dev, lo, hi)
    steps: list[StepStats] = []
    names = spans.get_column("name").to_list()
    for k in range(dev.size):
        g, a, b = int(dev[k]), int(lo[k]), int(hi[k])
        busy = total(*clip(*in_window(*ctx.dev_union(g), a, b), a, b))
        comm_ns, exposed = comm_in_window(
            *ctx.busy.kind(g, COMMUNICATION), *ctx.busy.kind(g, KERNEL), lo=a, hi=b
        )
        rank, device = ctx.devices[g]
        steps.append(
            StepStats(
                rank,
                device,
                str(names[k]),
                int(lo[k]),
                int(hi[k] - lo[k]),
                busy,
                int(idle_ns[k]),
                full_causes(by_step[k]),
                exposed,
                comm_ns,
                phases[k],
            )
        )
    sources = dict(
        zip(spans.get_column("dev").to_list(), spans.get_column("source").to_list(), strict=True)
    )
    return steps, step_statistics(steps, sources, dev_index)


def step_statistics(
    steps: list[StepStats], sources: dict[int, str], dev_index: dict[tuple[int, int], int]
) -> list[StepSummary]:
    """Mean/p50/p95/CV of step time per (rank, device), and outlier steps with their reason.

    Outlier: longer than the median by more than ``OUTLIER_MIN_EXCESS_FRACTION`` of it and by
    more than ``OUTLIER_MAD_SIGMAS`` robust sigmas (1.4826·MAD). Reason: the component (busy
    time, or idle of one cause) with the largest excess over its median across the steps.
    """
    out: list[StepSummary] = []
    keys = sorted({(s.rank, s.device) for s in steps})
    for key in keys:
        group = [s for s in steps if (s.rank, s.device) == key]
        d = np.array([s.dur_ns for s in group], dtype=np.float64)
        mean = float(d.mean())
        med = float(np.median(d))
        mad = float(np.median(np.abs(d - med)))
        limit = med + max(OUTLIER_MIN_EXCESS_FRACTION * med, OUTLIER_MAD_SIGMAS * 1.4826 * mad)
        med_busy = float(np.median([s.busy_ns for s in group]))
        med_cause = {c: float(np.median([s.idle_by_cause[c] for s in group])) for c in CAUSES}
        outliers: list[StepOutlier] = []
        for s in group:
            if len(group) < 3 or s.dur_ns <= limit:
                continue
            excess = {c: s.idle_by_cause[c] - med_cause[c] for c in CAUSES}
            top = max(excess, key=lambda c: excess[c])
            busy_x = s.busy_ns - med_busy
            if busy_x >= excess[top]:
                reason, top = f"GPU busy {busy_x / 1e6:+.2f} ms vs the median step", "busy"
            else:
                reason = f"idle {top} {excess[top] / 1e6:+.2f} ms vs the median step"
            outliers.append(StepOutlier(s.name, s.dur_ns, round(s.dur_ns - med), reason, top))
        out.append(
            StepSummary(
                rank=key[0],
                device=key[1],
                source=sources.get(dev_index[key], ""),
                n_steps=len(group),
                mean_ns=mean,
                p50_ns=med,
                p95_ns=float(np.percentile(d, 95)),
                cv=float(d.std() / mean) if mean > 0 else 0.0,
                outliers=outliers,
            )
        )
    return out
