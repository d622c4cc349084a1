"""Run every analysis pass over a session and gather the typed results.

Like pyinstrument's processors: the session goes in, an ``Analysis`` (plain data) comes out;
renderers in ``report/`` turn it into text, JSON or plots. Nothing here prints.

Passes: ``summary`` (window/busy/idle/counts), ``gaps`` (idle attribution, steps), ``kernels``
(short kernels, FLOPs, MFU), ``utilization`` (busy-fraction timeline and its pattern per device),
and, when a monitoring log is given, ``monitor`` (the log's own report, clipped to the trace's
wall-clock window when both clocks are known).
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Literal

from traceforensics.analysis.idle.causes import DEFAULT_DATA_PATTERNS
from traceforensics.analysis.idle.results import GapOptions
from traceforensics.analysis.idle.gaps import GapAnalysis, analyze_gaps
from traceforensics.analysis.kernels.results import KernelAnalysis
from traceforensics.analysis.kernels.forensics import KernelOptions, analyze_kernels
from traceforensics.analysis.monitoring.monitor import MonitorReport, analyze_monitor, clip_monitor
from traceforensics.analysis.utilization.patterns import CauseVerdict, PatternResult, check_causes
from traceforensics.analysis.devices import Summary, summarize
from traceforensics.analysis.utilization.timeline import (
    UtilizationTimeline,
    classify_device,
    trace_window,
    utilization_timelines,
)
from traceforensics.model.errors import InputError
from traceforensics.model.monitor import MonitorLog
from traceforensics.model.session import TraceSession

#: Most utilization bins per device (a 1 ms bin covers ~17 minutes of trace).
MAX_UTILIZATION_BINS = 1_000_000
#: Samples of a monitoring log kept on each side of the trace's wall-clock window.
ALIGN_PAD_SAMPLES = 5


@dataclass
class AnalysisOptions:
    """Knobs of ``tf analyze``; defaults are the CLI defaults."""

    top_kernels: int = 10
    top_gaps: int = 10
    step_pattern: str | None = None
    data_patterns: tuple[str, ...] = DEFAULT_DATA_PATTERNS
    short_kernel_us: float = 10.0
    peak_tflops: float | None = None
    bin_ms: float = 100.0
    #: ``device``: first to last GPU work (the ``window_ns`` of ``devices[]``); ``trace``: the
    #: whole trace, so idle before the first and after the last GPU work counts too.
    window: Literal["device", "trace"] = "device"
    step_window: Literal["tiled", "annotation"] = "tiled"


@dataclass
class DevicePattern:
    """The utilization timeline of one device (at ``bin_ms``) and the pattern of its curve."""

    rank: int
    device: int
    timeline: UtilizationTimeline
    pattern: PatternResult
    verdicts: list[CauseVerdict]


@dataclass
class Analysis:
    """Everything ``tf analyze`` computed for one session."""

    session: TraceSession
    options: AnalysisOptions
    summary: Summary
    gaps: GapAnalysis
    kernels: KernelAnalysis
    patterns: list[DevicePattern]
    monitor: MonitorReport | None = None
    warnings: list[str] = field(default_factory=list)

    def pattern_for(self, rank: int, device: int) -> DevicePattern | None:
        for p in self.patterns:
            if p.rank == rank and p.device == device:
                return p
        return None


def analyze(
    session: TraceSession,
    options: AnalysisOptions | None = None,
    monitor_log: MonitorLog | None = None,
) -> Analysis:
    """Run every pass over ``session`` (and the optional monitoring log)."""
    opts = options or AnalysisOptions()
    warnings = list(session.meta.warnings)
    summary = summarize(session, top_kernels=opts.top_kernels)
    # Default: the device window (first to last GPU work), the same window as the summary's
    # window_ns/idle_ns, so idle_by_cause sums exactly to idle_ns of devices[].
    gaps = analyze_gaps(
        session,
        GapOptions(
            step_pattern=opts.step_pattern,
            data_patterns=opts.data_patterns,
            top_gaps=opts.top_gaps,
            window=opts.window,
            step_window=opts.step_window,
        ),
    )
    if opts.window == "trace":
        _use_gap_windows(summary, gaps)
    kernels = analyze_kernels(
        session,
        KernelOptions(
            short_kernel_us=opts.short_kernel_us,
            peak_tflops=opts.peak_tflops,
            top=max(opts.top_kernels, 20),
            steps=_step_windows(gaps) or None,
        ),
    )
    patterns = _patterns(session, gaps, opts.bin_ms)
    monitor = None
    if monitor_log is not None:
        monitor, note = _aligned_monitor(session, monitor_log)
        if note:
            warnings.append(note)
    return Analysis(session, opts, summary, gaps, kernels, patterns, monitor, warnings)


def _patterns(session: TraceSession, gaps: GapAnalysis, bin_ms: float) -> list[DevicePattern]:
    """Timeline at ``bin_ms`` for the JSON/plots; pattern classified at a bin fine enough for
    the trace's length (``utilization.pattern_bin_ms``), checked against idle causes."""
    if not gaps.devices:
        return []
    lo, hi = trace_window(session)
    n_bins = (hi - lo) / (bin_ms * 1e6)
    if n_bins > MAX_UTILIZATION_BINS:
        raise InputError(
            f"--bin-ms {bin_ms:g} gives {n_bins:.3g} bins for a {(hi - lo) / 1e9:.3g} s trace "
            f"(at most {MAX_UTILIZATION_BINS:,}); use a larger --bin-ms"
        )
    timelines = {(t.rank, t.device): t for t in utilization_timelines(session, bin_ms)}
    out: list[DevicePattern] = []
    for dev in gaps.devices:
        key = (dev.rank, dev.device)
        if key not in timelines:
            continue
        _, pattern = classify_device(session, dev.rank, dev.device, bin_ms)
        verdicts = check_causes(pattern.pattern, dev.idle_by_cause)
        out.append(DevicePattern(dev.rank, dev.device, timelines[key], pattern, verdicts))
    return out


def _aligned_monitor(session: TraceSession, log: MonitorLog) -> tuple[MonitorReport, str | None]:
    """Clip an absolute-time log to the trace's wall-clock window when the trace's clock is
    known; otherwise report the whole log and say why it was not aligned."""
    meta = session.meta
    base = 0 if meta.clock_is_wall else meta.clock_base_ns
    if log.time_kind != "absolute":
        return analyze_monitor(log), (
            f"{log.path}: the log has no absolute timestamps; shown whole, not aligned with the "
            "trace"
        )
    if base is None or session.events.height == 0:
        return analyze_monitor(log), (
            "the trace has no wall-clock base; the monitoring log is shown whole, not aligned"
        )
    lo, hi = trace_window(session)
    # A trace often spans less than one sampling interval of the log (1 s for nvidia-smi -l 1):
    # keep ALIGN_PAD_SAMPLES samples on each side so the report shows the curve around it.
    pad = ALIGN_PAD_SAMPLES * _sample_interval_ns(log)
    clipped = clip_monitor(log, lo + base - pad, hi + base + pad)
    if clipped.frame.height == 0:
        return analyze_monitor(log), (
            f"{log.path}: no sample falls within {ALIGN_PAD_SAMPLES} samples of the trace's "
            "wall-clock window; shown whole, not aligned"
        )
    return analyze_monitor(clipped), None


def _sample_interval_ns(log: MonitorLog) -> int:
    """The log's sampling interval: as parsed, else the median step between distinct sample
    times, else 1 s."""
    if log.interval_s:
        return round(log.interval_s * 1e9)
    times = log.frame.get_column("time_ns").drop_nulls().unique().sort()
    steps = times.diff().drop_nulls()
    median = steps.median() if steps.len() else None
    return int(median) if isinstance(median, (int, float)) and median > 0 else 1_000_000_000


def _use_gap_windows(summary: Summary, gaps: GapAnalysis) -> None:
    """With the whole-trace window, the summary reports the same window and idle as the gap
    pass (busy is the same union either way), so every renderer shows one set of numbers."""
    by_dev = {(g.rank, g.device): g for g in gaps.devices}
    for d in summary.devices:
        g = by_dev.get((d.rank, d.device))
        if g is not None:
            d.window_start_ns, d.window_ns, d.idle_ns = g.window_start_ns, g.window_ns, g.idle_ns


def _step_windows(gaps: GapAnalysis) -> tuple[tuple[int, int, int, int], ...]:
    """The gap pass's step windows as ``(rank, step, start_ns, end_ns)`` for the MFU pass, so
    ``mfu.steps`` and ``steps[]`` describe the same windows (and honour ``--step-pattern``).
    The step number is the name's last integer (``ProfilerStep#7`` -> 7), else its ordinal."""
    out: dict[tuple[int, str], tuple[int, int, int, int]] = {}
    for k, s in enumerate(gaps.steps):
        digits = re.findall(r"\d+", s.name)
        number = int(digits[-1]) if digits else k
        # one window per (rank, step): the first device's span when a rank drives several GPUs
        out.setdefault((s.rank, s.name), (s.rank, number, s.start_ns, s.start_ns + s.dur_ns))
    return tuple(out.values())
