"""The verdict of one device, built once for every renderer (terminal, Markdown).

A verdict says how idle the device was in its window, the dominant idle cause with its share of
the idle time and the next two causes; its first change is the device's top finding (the change
that gives back the most time, whatever kind of loss it is: ``analysis.findings``), or says that
nothing large was found when the top finding is minor.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from traceforensics.analysis.devices import DeviceRecord
from traceforensics.analysis.findings.results import Finding
from traceforensics.analysis.idle.causes import ranked_causes
from traceforensics.report.format import fmt_ns, fmt_pct


@dataclass(frozen=True)
class Verdict:
    """``top`` is None when the device had no idle time; ``first`` its top finding."""

    rank: int
    device: int
    idle_share: float
    window_ns: int
    top: str | None
    top_ns: int
    top_share: float
    runners_up: tuple[tuple[str, float], ...]
    first: Finding | None


def device_verdict(d: DeviceRecord, findings: list[Finding]) -> Verdict:
    """The verdict of one device record and its findings (largest first); shares in [0, 1]."""
    ranked = ranked_causes(d.idle_by_cause)
    idle = max(d.idle_ns, 1)
    share = d.idle_ns / max(d.window_ns, 1)
    first = findings[0] if findings else None
    if not ranked:
        return Verdict(d.rank, d.device, share, d.window_ns, None, 0, 0.0, (), first)
    top, top_ns = ranked[0]
    rest = tuple((c, ns / idle) for c, ns in ranked[1:3])
    return Verdict(d.rank, d.device, share, d.window_ns, top, top_ns, top_ns / idle, rest, first)


def verdict_text(
    v: Verdict, code: Callable[[str], str] = str, label: Callable[[str], str] = str
) -> tuple[str, str | None]:
    """The verdict as words: ``(headline, first change)``; the first change is None without
    findings. ``code`` marks ids and ``label`` the device (Markdown: backticks, bold)."""
    head = (
        f"{label(f'rank {v.rank} GPU {v.device}')}: idle {fmt_pct(v.idle_share)} of a "
        f"{fmt_ns(v.window_ns)} window"
    )
    if v.top is None:
        head += " — no idle time to attribute."
    else:
        rest = ", ".join(f"{code(c)} {fmt_pct(share)}" for c, share in v.runners_up)
        head += f" — mostly {code(v.top)} ({fmt_pct(v.top_share)} of idle, {fmt_ns(v.top_ns)})" + (
            f"; then {rest}" if rest else ""
        )
    return head, first_change_text(v.first, code)


def first_change_text(f: Finding | None, code: Callable[[str], str] = str) -> str | None:
    """``first change (category, ~time back): remedy``, or that nothing large was found."""
    if f is None:
        return None
    back = f"~{fmt_ns(f.recoverable_ns)} back, {fmt_pct(f.share_of_window)} of the window"
    if f.minor:
        return (
            f"no large loss found: the largest, {code(f.category)}, would give {back} ({f.title})"
        )
    return f"first change ({code(f.category)}, {back}): {f.remedy}"
