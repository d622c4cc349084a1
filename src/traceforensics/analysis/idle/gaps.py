"""Idle-gap forensics: device-level idle gaps, each split exactly over causes, with evidence.

Busy time of a device is the union of its kernel, memcpy and memset intervals over all streams;
idle gaps are the holes of that union inside the analysis window::

    window:  [lo ........................................................ hi)
    stream 7:   |==k1==|      |=k2=|
    stream 9:       |====k3====|          |==k4==|
    busy:       |==============|=|  |     |======|
    gaps:                        (none)|==|      (window ends at the last work: default)

Every gap is attributed by ``attribution.attribute`` (the rule is documented there and in
docs/causes.md) through ``windows.window_gaps``; per-step breakdowns come from ``steps``; HTA's
per-stream view from ``stream_idle``. ``window_gaps`` and its helpers are re-exported here.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import numpy as np

from traceforensics.analysis.idle.causes import CAUSES, STEP_MARKER_RE
from traceforensics.analysis.idle.comm import comm_in_window
from traceforensics.analysis.idle.evidence import gap_evidence
from traceforensics.analysis.context import GapContext, build_context
from traceforensics.analysis.idle.results import (
    DeviceIdle,
    Evidence,
    Gap,
    GapOptions,
    StepOutlier,
    StepStats,
    StepSummary,
    StreamIdle,
)
from traceforensics.analysis.intervals import I64, union
from traceforensics.analysis.idle.step_idle import step_breakdown
from traceforensics.analysis.idle.streams import stream_idle
from traceforensics.analysis.idle.windows import (
    WindowGaps,
    causes_dict,
    ending_ops,
    full_causes,
    gap_begin,
    window_gaps,
)
from traceforensics.model.session import TraceSession


@dataclass
class GapAnalysis:
    """Result of ``analyze_gaps``; ``to_json`` gives the JSON fragments (see its docstring)."""

    devices: list[DeviceIdle]
    gaps: list[Gap]
    steps: list[StepStats] = field(default_factory=list)
    step_summary: list[StepSummary] = field(default_factory=list)
    stream_gaps: list[StreamIdle] = field(default_factory=list)

    def to_json(self) -> dict[str, Any]:
        """``{"devices_extra": {"<rank>:<device>": {"idle_by_cause", "exposed_comm_ns",
        "comm_ns"}}, "steps": [...], "step_summary": [...], "gaps": [...], "stream_gaps":
        [...]}``; every key is a string, every time an int of ns."""
        return {
            "devices_extra": {
                f"{d.rank}:{d.device}": {
                    "idle_by_cause": dict(d.idle_by_cause),
                    "exposed_comm_ns": d.exposed_comm_ns,
                    "comm_ns": d.comm_ns,
                }
                for d in self.devices
            },
            "steps": [s.to_json() for s in self.steps],
            "step_summary": [s.to_json() for s in self.step_summary],
            "gaps": [g.to_json() for g in self.gaps],
            "stream_gaps": [s.to_json() for s in self.stream_gaps],
        }


def _comm_arrays(ctx: GapContext, g: int) -> tuple[I64, I64, I64, I64]:
    lo, hi = int(ctx.dev_lo[g]), int(ctx.dev_hi[g])
    s, e = ctx.ops.start[lo:hi], ctx.ops.end[lo:hi]
    comm = ctx.ops.is_comm[lo:hi]
    kern = ctx.op_frame.get_column("kind").to_numpy()[lo:hi] == "kernel"
    cs, ce = union(s[comm], e[comm])
    ks, ke = union(s[kern & ~comm], e[kern & ~comm])
    return cs, ce, ks, ke


def analyze_gaps(session: TraceSession, options: GapOptions | None = None) -> GapAnalysis:
    """Device-level idle gaps of every GPU, each gap split exactly over ``CAUSES``.

    Window per device: ``options.window`` (see ``GapOptions``). ``idle_by_cause`` of each
    device sums exactly to its ``idle_ns``; ``gaps`` holds the ``top_gaps`` largest with
    evidence; steps and stream views are filled by ``steps.step_breakdown`` and
    ``stream_idle``.
    """
    opts = options or GapOptions()
    marker_re = STEP_MARKER_RE if not opts.step_pattern else f"{STEP_MARKER_RE}|{opts.step_pattern}"
    ctx = build_context(session.events, opts.data_patterns, marker_re)
    n_dev = len(ctx.devices)
    lo = np.zeros(n_dev, dtype=np.int64)
    hi = np.zeros(n_dev, dtype=np.int64)
    for g, (rank, _device) in enumerate(ctx.devices):
        us, ue = ctx.dev_union(g)
        if opts.window == "trace":
            span = ctx.rank_span.get(rank)
            if span is None:  # no recorded interval: fall back to the device's own work
                span = (int(us[0]), int(ue[-1])) if us.size else (0, 0)
            lo[g], hi[g] = span
        else:
            lo[g], hi[g] = (us[0], ue[-1]) if us.size else (0, 0)
    devs = np.arange(n_dev, dtype=np.int64)
    wg = window_gaps(ctx, devs, lo, hi)
    devices: list[DeviceIdle] = []
    comm_cache = [_comm_arrays(ctx, g) for g in range(n_dev)]
    for g, (rank, device) in enumerate(ctx.devices):
        m = wg.win == g
        row = wg.matrix[m].sum(axis=0) if m.any() else np.zeros(len(CAUSES), np.int64)
        idle = int((wg.end[m] - wg.start[m]).sum())
        comm_ns, exposed = comm_in_window(*comm_cache[g], lo=int(lo[g]), hi=int(hi[g]))
        devices.append(
            DeviceIdle(
                rank=rank,
                device=device,
                window_start_ns=int(lo[g]),
                window_ns=int(hi[g] - lo[g]),
                busy_ns=int(hi[g] - lo[g]) - idle,
                idle_ns=idle,
                idle_by_cause=full_causes(row),
                comm_ns=comm_ns,
                exposed_comm_ns=exposed,
                n_gaps=int(m.sum()),
            )
        )
    gaps = top_gaps(ctx, wg, opts.top_gaps)
    steps, summary = step_breakdown(ctx, opts, comm_cache)
    return GapAnalysis(devices, gaps, steps, summary, stream_idle(ctx))


def top_gaps(ctx: GapContext, wg: WindowGaps, n: int) -> list[Gap]:
    """The ``n`` longest gaps (ties: earliest first) with causes and evidence."""
    dur = wg.end - wg.start
    order = np.lexsort((wg.start, -dur))[: max(n, 0)]
    out: list[Gap] = []
    for i in order:
        rank, device = ctx.devices[int(wg.dev[i])]
        causes = causes_dict(wg.matrix[i])
        ev: list[Evidence] = gap_evidence(
            ctx,
            int(i),
            s=int(wg.start[i]),
            e=int(wg.end[i]),
            op=int(wg.op[i]),
            parts=wg.parts,
            causes=causes,
        )
        out.append(Gap(rank, device, int(wg.start[i]), int(dur[i]), causes, ev))
    return out


__all__ = [
    "DeviceIdle",
    "Evidence",
    "Gap",
    "GapAnalysis",
    "GapOptions",
    "StepOutlier",
    "StepStats",
    "StepSummary",
    "StreamIdle",
    "WindowGaps",
    "analyze_gaps",
    "causes_dict",
    "ending_ops",
    "full_causes",
    "gap_begin",
    "top_gaps",
    "window_gaps",
]
