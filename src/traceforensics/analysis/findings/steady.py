"""Steady state vs one-off: what a change to the step gives back, and what happens once per run.

The one-off windows of a device are read from the trace's structure (``analysis.one_off``:
set-up ranges such as ``init_model`` / ``warmup`` / ``load_checkpoint``, a lead-in of at least
a second before the first kernel, the time before the first step and after the last, warm-up
steps)::

    window:  [lead-in |init_model)|=warm-up step=|==step 2==|==step 3==|..wind-down..)
    one-off: [                                   )                      [            )
    steady:                                      [ the rest             )

- one-off idle of cause ``c`` = the idle of ``c`` inside the one-off windows (gaps clipped to
  them, attributed as every gap is: ``idle.windows.window_gaps``);
- steady idle of ``c`` = the device's idle of ``c`` minus its one-off part (never below 0);
- one-off copies: copies that start inside a one-off window (``transfers.copy_split``); the part
  of them no compute overlaps is one-off time too, and leaves ``transfer_bound``.

A device with neither steps nor set-up ranges nor a long lead-in has no one-off window: its
whole idle counts as steady. The ``one_off`` finding reports the one-off time apart, naming each
window; it is never a change to the steady state.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from traceforensics.analysis.context import AnalysisContext
from traceforensics.analysis.devices import DeviceRecord
from traceforensics.analysis.findings.busy_losses import EVIDENCE_KEPT, window_share
from traceforensics.analysis.findings.remedies import remedy
from traceforensics.analysis.findings.results import ONE_OFF, Finding
from traceforensics.analysis.idle.gaps import IdleAnalysis
from traceforensics.analysis.idle.windows import full_causes, window_gaps
from traceforensics.analysis.one_off import OneOffSpan, one_off_windows
from traceforensics.analysis.program import Program
from traceforensics.analysis.transfers import copy_split
from traceforensics.model.units import fmt_bytes, fmt_ns, fmt_pct

#: One-off windows named in a finding's title (all of them are in its figures).
TITLE_WINDOWS = 3


@dataclass(frozen=True)
class SteadySplit:
    """Idle of one device by cause, in the steady state (``steady``) and one-off (``one_off``);
    ``windows``: the one-off windows (``one_off.OneOffSpan``, clipped to the analysis window);
    ``one_off_copy_*``: copies starting in them (count, bytes, exposed ns)."""

    steps: int
    steady: dict[str, int]
    one_off: dict[str, int]
    first_step_ns: int | None
    last_step_end_ns: int | None
    windows: list[OneOffSpan] = field(default_factory=list)
    one_off_copy_count: int = 0
    one_off_copy_bytes: int = 0
    one_off_copy_ns: int = 0


def steady_split(ctx: AnalysisContext, rec: DeviceRecord, idle: IdleAnalysis) -> SteadySplit:
    """The split of ``rec.idle_by_cause`` (see the module docstring)."""
    steps = [s for s in idle.steps if (s.rank, s.device) == (rec.rank, rec.device)]
    first = min((s.start_ns for s in steps), default=None)
    last = max((s.start_ns + s.dur_ns for s in steps), default=None)
    g = ctx.devices.index((rec.rank, rec.device)) if (rec.rank, rec.device) in ctx.devices else -1
    if g < 0:
        return SteadySplit(len(steps), dict(rec.idle_by_cause), {}, first, last)
    win = one_off_windows(ctx, g)
    one_off = {c: 0 for c in rec.idle_by_cause}
    if win.lo.size:
        wg = window_gaps(ctx, np.full(win.lo.size, g, dtype=np.int64), win.lo, win.hi, keep=0)
        for c, ns in full_causes(wg.by_window.sum(axis=0)).items():
            one_off[c] = min(ns, rec.idle_by_cause.get(c, 0))
    steady = {c: ns - one_off.get(c, 0) for c, ns in rec.idle_by_cause.items()}
    copies = copy_split(ctx, g, win.lo, win.hi)
    return SteadySplit(
        len(steps),
        steady,
        one_off,
        first,
        last,
        win.spans,
        copies.one_off_count,
        copies.one_off_bytes,
        copies.one_off_exposed_ns,
    )


def one_off_finding(
    rec: DeviceRecord, split: SteadySplit, idle: IdleAnalysis, program: Program
) -> list[Finding]:
    """The idle and exposed copies inside the one-off windows: once per run, not per step."""
    idle_ns = sum(split.one_off.values())
    ns = idle_ns + split.one_off_copy_ns
    if ns <= 0 or not split.windows:
        return []
    spans = [(w.start_ns, w.end_ns) for w in split.windows]
    proof = [
        e
        for g in idle.gaps
        if (g.rank, g.device) == (rec.rank, rec.device)
        and any(lo <= g.start_ns < hi for lo, hi in spans)
        for e in g.evidence
        if e.cause
    ][:EVIDENCE_KEPT]
    top = sorted(((c, v) for c, v in split.one_off.items() if v), key=lambda t: -t[1])[:3]
    parts = [f"idle {fmt_ns(idle_ns)} ({', '.join(f'{c} {fmt_ns(v)}' for c, v in top)})"]
    if split.one_off_copy_ns:
        size = fmt_bytes(split.one_off_copy_bytes)
        parts.append(f"{size} of copies exposed {fmt_ns(split.one_off_copy_ns)}")
    named = ", ".join(
        f"{w.label} ({fmt_ns(w.end_ns - w.start_ns)})" for w in split.windows[:TITLE_WINDOWS]
    )
    more = len(split.windows) - TITLE_WINDOWS
    share = window_share(ns, rec)
    title = (
        f"{fmt_ns(ns)} ({fmt_pct(share)} of the window) once per run, not the steady state: "
        f"{named}{f' and {more} more' if more > 0 else ''}: {'; '.join(parts)}. This is "
        f"start-up / warm-up: profile (and judge) the steady steps"
    )
    figures = {
        "one_off_by_cause": dict(split.one_off),
        "steps": split.steps,
        "one_off_idle_ns": idle_ns,
        "one_off_copy_ns": split.one_off_copy_ns,
        "one_off_copy_bytes": split.one_off_copy_bytes,
        "one_off_copy_count": split.one_off_copy_count,
        "one_off_windows": [
            {"label": w.label, "start_ns": w.start_ns, "dur_ns": w.end_ns - w.start_ns}
            for w in split.windows
        ],
    }
    return [
        Finding(
            ONE_OFF,
            rec.rank,
            rec.device,
            ns,
            share,
            title,
            remedy(ONE_OFF, program),
            "medium",
            proof,
            figures,
        )
    ]
