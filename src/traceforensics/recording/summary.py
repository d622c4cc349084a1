"""What ``capture()`` and ``tf record`` print after recording: where the trace went, which
steps it holds, then the terminal report's verdict (``report.terminal``).

A trace without GPU work has no GPU idle time to attribute; for it the report adds the host
time the recorded steps spent in data-loading ranges (PyTorch's ``enumerate(DataLoader)#...``
ranges and the ``capture.loader`` ones: the ``data_loading`` phase of
``analysis.host_steps``, which ``tf analyze``'s host section shows too), so a CPU run still
says whether the loader dominates.
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from pathlib import Path

from traceforensics.analysis.host_steps import HostBreakdown, host_breakdown
from traceforensics.analysis.options import AnalysisOptions
from traceforensics.analysis.pipeline import Analysis
from traceforensics.model.session import TraceSession
from traceforensics.recording.settings import CaptureSettings
from traceforensics.report.format import fmt_bytes, fmt_ns, fmt_pct
from traceforensics.report.terminal import render_text


def recorded_steps(settings: CaptureSettings, steps: int) -> tuple[int, int] | None:
    """``(first, last)`` ProfilerStep numbers of the last cycle recorded after ``steps`` step
    calls (step ``steps`` is the one still open at the end), or None when no cycle reached its
    active window."""
    c, found = settings.cycle_steps, None
    for k in range(steps // c + 1):
        start = k * c + settings.first_step
        if start > steps or (settings.repeat and k >= settings.repeat):
            break
        found = (start, min(start + settings.active - 1, steps))
    return found


def partial_note(settings: CaptureSettings, steps: int) -> str:
    """A note when the run ended inside an active window ('' when every window was whole): the
    step still open at the end holds only what ran between the last step call and the end."""
    got = recorded_steps(settings, steps)
    if got is None or got[1] < steps:
        return ""
    first, last = got
    whole = f"#{first}-#{last - 1}" if last > first else "none"
    return (
        f"the run ended inside the active window: {last - first} of {settings.active} steps "
        f"recorded whole ({whole}), #{last} only runs to the end; make {first + settings.active} "
        "steps or more"
    )


def no_trace_message(settings: CaptureSettings, steps: int, what: str) -> str:
    """One line: why nothing was written and what to do (``what`` names the steps counted)."""
    s = settings
    return (
        f"no trace was recorded: the run made {steps} {what}, and the schedule records steps "
        f"#{s.first_step}-#{s.first_step + s.active - 1} (after wait {s.wait} + warmup "
        f"{s.warmup}); run more steps or lower wait/warmup"
    )


def recording_line(
    tool: str, traces: Sequence[Path], first_last: tuple[int, int] | None, note: str = ""
) -> str:
    """``tf <tool>: recorded ...``: where the trace went (paths under the working folder shown
    relative to it) and which steps it holds, then the ``note`` (``partial_note``) on a second
    line when there is one."""
    size = sum(p.stat().st_size for p in traces if p.exists())
    shown = [_shown(p) for p in traces]
    files = shown[0] if len(shown) == 1 else f"{len(shown)} files in {os.path.commonpath(shown)}"
    held = ""
    if first_last is not None:
        first, last = first_last
        held = f"steps #{first}-#{last} ({last - first + 1}) "
    line = f"tf {tool}: recorded {held}into {files} ({fmt_bytes(size)})"
    return line + (f"\n  note: {note}" if note else "")


def _shown(path: Path) -> str:
    """``path`` relative to the working folder when it lies inside it, else as it is."""
    try:
        return str(path.resolve().relative_to(Path.cwd()))
    except ValueError:
        return str(path)


def capture_report(
    analysis: Analysis,
    traces: Sequence[Path],
    steps: int,
    settings: CaptureSettings,
    note: str = "",
) -> str:
    """The text ``capture()`` prints: recording line, the verdict, the CPU-only loader line,
    and the command for the full report."""
    head = recording_line("capture", traces[-1:], recorded_steps(settings, steps), note)
    body = render_text(analysis, sections=("verdict",)).rstrip("\n")
    host = host_loader_lines(analysis.host or analysis.session) if not analysis.devices else []
    return "\n".join([head, body, *host, full_report_line(traces)]) + "\n"


def host_loader_lines(source: TraceSession | HostBreakdown) -> list[str]:
    """For a trace without GPU work: the host time of its steps spent fetching batches (the
    ``data_loading`` phase of ``analysis.host_steps``, the one rule ``tf analyze``'s host
    section uses too); ``source``: the analysis's breakdown, or the session to make it of."""
    if isinstance(source, TraceSession):
        if source.events.height == 0:
            return []
        source = host_breakdown(source, AnalysisOptions())
    n = len(source.steps)
    if n == 0:
        return ["host: no ProfilerStep ranges recorded; call step() once per iteration"]
    step_ns, data_ns = source.step_ns, source.phase_ns["data_loading"]
    over = f"{n} recorded steps" + (f" of {source.ranks} ranks" if source.ranks > 1 else "")
    if data_ns == 0:
        return [f"host: no data-loading ranges in the {over} (DataLoader or capture.loader)"]
    return [
        f"host: data loading {fmt_ns(data_ns / n)} of {fmt_ns(step_ns / n)} per step "
        f"({fmt_pct(data_ns / max(step_ns, 1))}) over {over}"
    ]


def full_report_line(traces: Sequence[Path]) -> str:
    """The ``tf analyze`` command that reads the folder of the last trace."""
    folder = traces[-1].parent if traces else Path()
    return f"full report: tf analyze {_shown(folder)}"
