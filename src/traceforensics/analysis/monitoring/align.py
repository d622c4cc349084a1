"""A monitoring log beside a trace: clipped to the trace's wall-clock window when both clocks are
known, else shown whole with a note saying why.

    log:    |s|s|s|s|s|s|s|s|s|s|s|s|s|s|        (one sample per interval, epoch ns)
    trace:              [ window )               (trace clock + wall-clock base)
    kept:         |s|s|s[ window )s|s|s          (ALIGN_PAD_SAMPLES on each side)
"""

from __future__ import annotations

from typing import Final

from traceforensics.analysis.monitoring.monitor import MonitorReport, analyze_monitor, clip_monitor
from traceforensics.model.monitor import MonitorLog
from traceforensics.model.session import TraceMeta
from traceforensics.model.units import NS_PER_S

#: Samples of a monitoring log kept on each side of the trace's wall-clock window.
ALIGN_PAD_SAMPLES: Final = 5


def aligned_monitor(
    meta: TraceMeta, trace_span: tuple[int, int], has_events: bool, log: MonitorLog
) -> tuple[MonitorReport, str | None]:
    """The log's report, clipped to ``trace_span`` (trace clock ns) ± ``ALIGN_PAD_SAMPLES``
    samples, and a note when it could not be aligned."""
    base = 0 if meta.clock_is_wall else meta.clock_base_ns
    if log.time_kind != "absolute":
        return analyze_monitor(log), (
            f"{log.path}: the log has no absolute timestamps; shown whole, not aligned with the "
            "trace"
        )
    if base is None or not has_events:
        return analyze_monitor(log), (
            "the trace has no wall-clock base; the monitoring log is shown whole, not aligned"
        )
    lo, hi = trace_span
    # A trace often spans less than one sampling interval of the log (1 s for nvidia-smi -l 1):
    # keep ALIGN_PAD_SAMPLES samples on each side so the report shows the curve around it.
    pad = ALIGN_PAD_SAMPLES * sample_interval_ns(log)
    clipped = clip_monitor(log, lo + base - pad, hi + base + pad)
    if clipped.frame.height == 0:
        return analyze_monitor(log), (
            f"{log.path}: no sample falls within {ALIGN_PAD_SAMPLES} samples of the trace's "
            "wall-clock window; shown whole, not aligned"
        )
    return analyze_monitor(clipped), None


def sample_interval_ns(log: MonitorLog) -> int:
    """The log's sampling interval: as parsed, else the median step between distinct sample
    times, else 1 s."""
    if log.interval_s:
        return round(log.interval_s * NS_PER_S)
    times = log.frame.get_column("time_ns").drop_nulls().unique().sort()
    steps = times.diff().drop_nulls()
    median = steps.median() if steps.len() else None
    return int(median) if isinstance(median, (int, float)) and median > 0 else NS_PER_S
