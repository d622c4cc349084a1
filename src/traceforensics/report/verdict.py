"""The verdict of one device, built once for every renderer (terminal, Markdown).

A verdict says how idle the device was in its window, the dominant cause with its share of the
idle time, the next two causes, and the advice for the dominant one (``advice.CAUSE_ADVICE``).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from traceforensics.analysis.devices import DeviceRecord
from traceforensics.analysis.idle.causes import ranked_causes
from traceforensics.report.advice import CAUSE_ADVICE
from traceforensics.report.format import fmt_ns, fmt_pct


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


def verdict_text(
    v: Verdict, code: Callable[[str], str] = str, label: Callable[[str], str] = str
) -> tuple[str, str | None]:
    """The verdict as words: ``(headline, first change)``; the first change is None without
    idle time. ``code`` marks cause ids and ``label`` the device (Markdown: backticks, bold)."""
    head = (
        f"{label(f'rank {v.rank} GPU {v.device}')}: idle {fmt_pct(v.idle_share)} of a "
        f"{fmt_ns(v.window_ns)} window"
    )
    if v.top is None:
        return head + " — no idle time to attribute.", None
    rest = ", ".join(f"{code(c)} {fmt_pct(share)}" for c, share in v.runners_up)
    head += f" — mostly {code(v.top)} ({fmt_pct(v.top_share)} of idle, {fmt_ns(v.top_ns)})" + (
        f"; then {rest}" if rest else ""
    )
    return head, f"first change: {v.advice}"
