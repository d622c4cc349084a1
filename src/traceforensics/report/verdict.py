"""The verdict of one device, built once for every renderer (terminal, Markdown).

A verdict says how idle the device was in its window, the dominant cause with its share of the
idle time, the next two causes, and the advice for the dominant one (``advice.CAUSE_ADVICE``).
"""

from __future__ import annotations

from dataclasses import dataclass

from traceforensics.analysis.devices import DeviceRecord
from traceforensics.analysis.idle.causes import ranked_causes
from traceforensics.report.advice import CAUSE_ADVICE


@dataclass(frozen=True)
class Verdict:
    """``top`` is None when the device had no idle time."""

    rank: int
    device: int
    idle_share: float
    window_ns: int
    top: str | None
    top_ns: int
    top_share: float
    runners_up: tuple[tuple[str, float], ...]
    advice: str


def device_verdict(d: DeviceRecord) -> Verdict:
    """The verdict of one device record (shares are fractions in [0, 1])."""
    ranked = ranked_causes(d.idle_by_cause)
    idle = max(d.idle_ns, 1)
    share = d.idle_ns / max(d.window_ns, 1)
    if not ranked:
        return Verdict(d.rank, d.device, share, d.window_ns, None, 0, 0.0, (), "")
    top, top_ns = ranked[0]
    rest = tuple((c, ns / idle) for c, ns in ranked[1:3])
    advice = CAUSE_ADVICE.get(top, top)
    return Verdict(d.rank, d.device, share, d.window_ns, top, top_ns, top_ns / idle, rest, advice)
