"""Steady state vs one-off: idle inside the steps is what a change to the step gives back;
idle outside them (start-up before the first step, wind-down after the last) happens once.

Rule, per device with detected steps (``IdleAnalysis.steps``)::

    window:  [..start-up..|==step 1==|==step 2==|==step 3==|..wind-down..)
    steady:               [ idle inside the step windows, by cause       )
    one-off: [ the rest  )                                  [ the rest   )

- steady idle of cause ``c`` = the sum of ``c`` over the device's step windows;
- one-off idle = the device's idle of each cause minus its steady part (never below 0): lazy
  module loading, autotuning, compilation, profiler start-up, the last step's tail.

A device without steps has no steady/one-off split: its whole idle counts as steady.
"""

from __future__ import annotations

from dataclasses import dataclass

from traceforensics.analysis.devices import DeviceRecord
from traceforensics.analysis.idle.gaps import IdleAnalysis


@dataclass(frozen=True)
class SteadySplit:
    """Idle of one device by cause, inside its steps (``steady``) and outside (``one_off``)."""

    steps: int
    steady: dict[str, int]
    one_off: dict[str, int]
    first_step_ns: int | None
    last_step_end_ns: int | None


def steady_split(rec: DeviceRecord, idle: IdleAnalysis) -> SteadySplit:
    """The split of ``rec.idle_by_cause`` (see the module docstring)."""
    steps = [s for s in idle.steps if (s.rank, s.device) == (rec.rank, rec.device)]
    if not steps:
        return SteadySplit(
            0, dict(rec.idle_by_cause), {c: 0 for c in rec.idle_by_cause}, None, None
        )
    steady = {c: 0 for c in rec.idle_by_cause}
    for s in steps:
        for c, ns in s.idle_by_cause.items():
            steady[c] = steady.get(c, 0) + ns
    steady = {c: min(ns, rec.idle_by_cause.get(c, 0)) for c, ns in steady.items()}
    one_off = {c: rec.idle_by_cause[c] - steady.get(c, 0) for c in rec.idle_by_cause}
    first = min(s.start_ns for s in steps)
    last = max(s.start_ns + s.dur_ns for s in steps)
    return SteadySplit(len(steps), steady, one_off, first, last)
