"""The verdict of one device, built once for every renderer (terminal, Markdown, HTML); the
verdict of a trace without GPU activity (``no_gpu_verdict``) and the rows of its host
breakdown.

A verdict says how idle the device was in its window, the dominant idle cause with its share of
the idle time and the next two causes; its first change is the device's top finding (the change
that gives back the most time, whatever kind of loss it is: ``analysis.findings``), or says that
nothing large was found when the top finding is minor.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Final

from traceforensics.analysis.devices import DeviceRecord
from traceforensics.analysis.diagnostics import (
    CPU_ONLY,
    CUDA_TABLES_MISSING,
    GPU_ACTIVITY_MISSING,
    Diagnostic,
)
from traceforensics.analysis.findings.results import Finding
from traceforensics.analysis.host_steps import PHASES, HostBreakdown
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


def no_gpu_verdict(diagnostics: Sequence[Diagnostic], code: Callable[[str], str] = str) -> str:
    """The verdict of a trace without GPU activity: why it has none, from its diagnostics
    (``analysis.diagnostics``), and what to change. A CPU-only capture's starts with "No GPU
    activity in this trace (CPU-only)."."""
    found = {d.code: d for d in diagnostics}
    if CUDA_TABLES_MISSING in found:
        return (
            "No GPU activity recorded: CUDA tracing was off in this nsys capture (the export "
            "has no CUDA tables), so there is no GPU time to attribute; record again with "
            f"{code('nsys profile -t cuda,nvtx,osrt')} ({code('tf explain cuda_tables_missing')})."
        )
    missing = found.get(GPU_ACTIVITY_MISSING)
    if missing is not None:
        n = f"{missing.count:,} " if missing.count is not None else ""
        return (
            f"GPU activity records missing: {n}GPU launch calls were recorded but no GPU "
            "activity record (the profiler's device buffer was lost, or CUDA activity was not "
            "enabled), so there is no GPU time to attribute; record with CUDA activity on "
            f"({code('tf explain gpu_activity_missing')})."
        )
    if CPU_ONLY in found:
        return (
            "No GPU activity in this trace (CPU-only). Nothing to attribute on a GPU; the host "
            "time of its steps by phase follows."
        )
    return "No GPU activity in this trace: nothing to attribute."


#: What each host phase is called in the reports.
PHASE_LABELS: Final[dict[str, str]] = {
    "data_loading": "data loading",
    "forward": "forward",
    "backward": "backward",
    "optimizer": "optimizer",
    "other": "other",
}
#: Steps listed one by one in the reports (the JSON has them all).
HOST_STEPS_SHOWN: Final = 10


def host_heading(host: HostBreakdown) -> str:
    """One sentence: how many steps, from which ranges, their mean length; or why none (the
    reports put it under their "Host time per step" heading)."""
    if not host.steps:
        return (
            "No host ranges were recorded (operators, NVTX or user annotations), so there is "
            "nothing to split by phase."
        )
    n = len(host.steps)
    ranks = f" on {host.ranks} ranks" if host.ranks > 1 else ""
    source = _SOURCE_WORDS.get(host.step_source or "", "step ranges")
    return (
        f"{n} step{'s' if n > 1 else ''}{ranks} ({source}), "
        f"{fmt_ns(host.step_ns / n)} per step on average."
    )


_SOURCE_WORDS: Final = {
    "profiler_step": "ProfilerStep ranges",
    "step_ranges": "ranges named like steps",
    "user_pattern": "ranges of the step pattern",
    "whole_trace": "no step ranges: the main thread's whole recorded span",
    "mixed": "step ranges of several kinds",
}


def host_phase_rows(host: HostBreakdown) -> list[tuple[str, str, str]]:
    """``(phase, time per step, share of step time)`` for each phase (no rows without steps)."""
    n = len(host.steps)
    if not n:
        return []
    total = max(host.step_ns, 1)
    return [
        (PHASE_LABELS[p], fmt_ns(ns / n), fmt_pct(ns / total)) for p, ns in host.phase_ns.items()
    ]


def host_step_rows(host: HostBreakdown) -> list[tuple[str, ...]]:
    """The first ``HOST_STEPS_SHOWN`` steps: rank, name, duration, then each phase's time."""
    return [
        (str(s.rank), s.name, fmt_ns(s.dur_ns), *(fmt_ns(s.phase_ns[p]) for p in PHASES))
        for s in host.steps[:HOST_STEPS_SHOWN]
    ]
