"""Per-GPU diagnosis of a monitoring log: pattern, statistics, memory trend, clock episodes.

The clock-episode rule lives in ``analysis.throttle``; the pattern rules in
``analysis.patterns``. Times in the report are seconds from the log's first sample.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Final

import numpy as np
import numpy.typing as npt
import polars as pl

from traceforensics.analysis.monitoring.throttle import (
    THROTTLE_MAX_CLOCK_RATIO,
    ThrottleEpisode,
    col_array,
    rounded,
    throttle_episodes,
)
from traceforensics.analysis.utilization.patterns import (
    LOW_LEVEL_PCT,
    PatternResult,
    classify_utilization,
)
from traceforensics.model.monitor import MonitorLog, first_time_ns, gpu_ids, gpu_rows
from traceforensics.model.units import F64, NS_PER_S

MONITOR_SCHEMA_ID: Final = "traceforensics.monitor/1"
MEM_GROWTH_FINDING_MIB: Final = 1024.0
MEM_TREND_MIN_SAMPLES: Final = 10
#: Sample interval (s) from which sub-second behaviour is invisible, so findings warn about it.
COARSE_INTERVAL_S: Final = 0.5
#: Classes where a reader looks for a period: when none is claimable, the findings say why.
_PERIODIC_LOOKING: Final = ("irregular", "high_frequency_sawtooth", "low_frequency_tidal")
#: Classes a sub-second sawtooth turns into when coarse sampling averages it.
_SAWTOOTH_LOOKALIKES: Final = ("persistent_half_saturation", "irregular")


@dataclass
class GpuMonitorReport:
    gpu: int
    samples: int
    span_s: float
    interval_s: float
    series_source: str
    pattern: PatternResult
    util_mean: float | None
    util_p50: float | None
    mem_used_mib_max: float | None
    mem_trend_mib_per_h: float | None
    sm_clock_ref_mhz: float | None
    clock_ref_source: str | None
    idle_downclock_samples: int
    throttle_episodes: list[ThrottleEpisode] = field(default_factory=list)
    findings: list[str] = field(default_factory=list)

    def to_json(self) -> dict[str, Any]:
        ev = self.pattern.to_json()
        return {
            "gpu": self.gpu,
            "samples": self.samples,
            "span_s": round(self.span_s, 3),
            "pattern": self.pattern.pattern,
            "period_s": self.pattern.period_s,
            "util_mean": rounded(self.util_mean),
            "util_p50": rounded(self.util_p50),
            "throttle_episodes": [e.to_json() for e in self.throttle_episodes],
            "findings": self.findings,
            "interval_s": self.interval_s,
            "series_source": self.series_source,
            "pattern_evidence": {k: v for k, v in ev.items() if k not in ("pattern", "period_s")},
            "mem_used_mib_max": rounded(self.mem_used_mib_max),
            "mem_trend_mib_per_h": rounded(self.mem_trend_mib_per_h),
            "sm_clock_ref_mhz": rounded(self.sm_clock_ref_mhz),
            "clock_ref_source": self.clock_ref_source,
            "idle_downclock_samples": self.idle_downclock_samples,
        }


@dataclass
class MonitorReport:
    file: str
    source_format: str
    time_kind: str
    start_ns: int | None
    gpus: list[GpuMonitorReport]
    warnings: list[str] = field(default_factory=list)

    def to_json(self) -> dict[str, Any]:
        return {
            "schema": MONITOR_SCHEMA_ID,
            "gpus": [g.to_json() for g in self.gpus],
            "file": self.file,
            "source_format": self.source_format,
            "time_kind": self.time_kind,
            "start_ns": self.start_ns,
            "warnings": self.warnings,
        }


def regular_series(time_ns: npt.NDArray[np.int64], values: F64) -> tuple[F64, float]:
    """Place samples on a regular grid at the median interval; gaps become NaN."""
    if time_ns.size < 2:
        return values, 1.0
    step = float(np.median(np.diff(time_ns)))
    if step <= 0:
        return values, 1.0
    idx = np.rint((time_ns - time_ns[0]) / step).astype(np.int64)
    size = int(idx[-1]) + 1
    if size > 4 * time_ns.size:  # too irregular for a grid: keep sample order
        return values, step / NS_PER_S
    grid = np.full(size, np.nan)
    grid[idx] = values
    return grid, step / NS_PER_S


def memory_trend(t_ns: npt.NDArray[np.int64], mem: F64 | None) -> float | None:
    """Least-squares slope of memory used, MiB per hour; None with too few samples."""
    if mem is None:
        return None
    ok = np.isfinite(mem)
    if ok.sum() < MEM_TREND_MIN_SAMPLES:
        return None
    hours = (t_ns[ok] - t_ns[ok][0]) / (3600 * NS_PER_S)
    if hours[-1] <= 0:
        return None
    slope = np.polyfit(hours, mem[ok], 1)[0]
    return float(slope)


def _series(df: pl.DataFrame) -> tuple[F64 | None, str]:
    util = col_array(df, "util_pct")
    if util is not None:
        return util, "util_pct"
    sm = col_array(df, "sm_active")
    if sm is not None:
        return sm * 100.0, "sm_active"
    return None, "none"


def analyze_gpu(
    df: pl.DataFrame, gpu: int, t0_ns: int, interval_hint_s: float | None
) -> GpuMonitorReport:
    """Report for one GPU's rows (sorted by time)."""
    t = df.get_column("time_ns").to_numpy().astype(np.int64)
    values, source = _series(df)
    findings: list[str] = []
    span_s = float(t[-1] - t[0]) / NS_PER_S if t.size else 0.0
    if values is None:
        grid, interval = np.zeros(0), interval_hint_s or 1.0
        findings.append("no utilization or SM-activity column: no pattern can be classified")
    else:
        grid, interval = regular_series(t, values)
    pat = classify_utilization(grid, interval)
    ok = values[np.isfinite(values)] if values is not None else np.zeros(0)
    util_mean = float(ok.mean()) if ok.size else None
    util_p50 = float(np.median(ok)) if ok.size else None
    mem = col_array(df, "mem_used_mib")
    trend = memory_trend(t, mem)
    episodes, idle_down, ref, ref_src = throttle_episodes(df, t0_ns)
    report = GpuMonitorReport(
        gpu,
        df.height,
        span_s,
        interval,
        source,
        pat,
        util_mean,
        util_p50,
        None if mem is None else float(np.nanmax(mem)),
        trend,
        ref,
        ref_src,
        idle_down,
        episodes,
        findings,
    )
    findings.extend(_findings(report, ok))
    return report


def _findings(r: GpuMonitorReport, util: F64) -> list[str]:
    """Plain-language findings for one GPU, in report order: series source, pattern (or why
    none is claimed), missing samples, clock episodes, memory growth. ``util`` holds the
    finite utilization samples (%)."""
    p = r.pattern
    out: list[str] = []
    if r.series_source == "sm_active":
        out.append("utilization read from DCGM SM activity (x100): no GPU-utilization column")
    if p.pattern == "insufficient_data":
        out.extend(_insufficient_data_findings(r, util))
    elif util.size:
        out.extend(_pattern_findings(p))
    if p.missing:
        out.append(
            f"{p.missing} missing samples (gaps in the timestamps) were interpolated for the "
            f"pattern"
        )
    out.extend(_clock_findings(r))
    out.extend(_memory_findings(r))
    return out


def _insufficient_data_findings(r: GpuMonitorReport, util: F64) -> list[str]:
    """Why no pattern is claimed: the sample count and span, the observed range, and, at
    coarse sampling, the shortest period a longer log could still show (2 x interval)."""
    p = r.pattern
    out = [f"{p.period_note} ({r.samples} samples over {r.span_s:.3g} s)"]
    if util.size:
        out.append(
            f"utilization ranges {util.min():.1f}%..{util.max():.1f}% "
            f"(mean {util.mean():.1f}%); no pattern or period is claimed from so few samples"
        )
    if p.interval_s >= COARSE_INTERVAL_S:
        out.append(
            f"at {p.interval_s:.3g} s sampling no period under {2 * p.interval_s:.3g} s can be "
            f"seen even in a longer log; record longer, or bin a trace at 100 ms or finer"
        )
    return out


def _pattern_findings(p: PatternResult) -> list[str]:
    """The classified pattern with its evidence (period, duty cycle >= 50%, drops from >= 80%
    to < 20%, median %), why no period is claimed for a periodic-looking class, the
    coarse-sampling caveat, and the causes to check."""
    lead = f"pattern {p.pattern}"
    if p.period_s is not None:
        lead += f": period {p.period_s:.3g} s (autocorrelation {p.acf_peak:.2f})"
    out = [
        f"{lead}; duty cycle {100 * (p.duty_cycle or 0):.0f}% of samples >= 50%, "
        f"{p.drop_count} drops from >= 80% to < 20%, median {p.p50_pct:.1f}%"
    ]
    if p.period_s is None and p.pattern in _PERIODIC_LOOKING:
        out.append(f"no period claimed: {p.period_note}")
    if p.pattern in _SAWTOOTH_LOOKALIKES and p.interval_s >= COARSE_INTERVAL_S:
        out.append(
            f"at {p.interval_s:.3g} s sampling a sub-second sawtooth is averaged into mid "
            f"values; a trace binned at 100 ms tells the two apart"
        )
    if p.likely_causes:
        out.append("check: " + "; ".join(c.text for c in p.likely_causes))
    return out


def _clock_findings(r: GpuMonitorReport) -> list[str]:
    """One line per throttle episode (times in s from the first sample, clocks in MHz), then
    the count of idle down-clock samples, which are not throttling."""
    out = [
        f"clock throttling {e.start:.0f}-{e.end:.0f} s: SM {e.sm_clock_mhz:.0f} of "
        f"{e.sm_clock_ref_mhz:.0f} MHz at {e.util_mean:.0f}% utilization, reason {e.reason}"
        f" ({e.reason_source})"
        for e in r.throttle_episodes
    ]
    if r.idle_downclock_samples:
        out.append(
            f"{r.idle_downclock_samples} samples with SM clock < "
            f"{THROTTLE_MAX_CLOCK_RATIO:.0%} of {r.sm_clock_ref_mhz or 0:.0f} MHz while "
            f"utilization < {LOW_LEVEL_PCT:.0f}%: idle down-clocking, not throttling"
        )
    return out


def _memory_findings(r: GpuMonitorReport) -> list[str]:
    """A leak warning when the memory trend (MiB/h) over the log's span adds up to at least
    MEM_GROWTH_FINDING_MIB."""
    if r.mem_trend_mib_per_h is None:
        return []
    growth = r.mem_trend_mib_per_h * r.span_s / 3600
    # ">=" kept positive: a NaN trend must not produce a finding
    if growth >= MEM_GROWTH_FINDING_MIB:
        return [
            f"memory used grows {r.mem_trend_mib_per_h:.0f} MiB/h ({growth:.0f} MiB over the "
            f"log): check for a leak or a growing cache"
        ]
    return []


def analyze_monitor(log: MonitorLog) -> MonitorReport:
    """Per-GPU reports for a parsed monitoring log."""
    frame = log.frame
    t0 = first_time_ns(frame)
    gpus = [analyze_gpu(gpu_rows(frame, g), g, t0, log.interval_s) for g in gpu_ids(frame)]
    start = t0 if log.time_kind == "absolute" else None
    return MonitorReport(
        log.path, log.source_format, log.time_kind, start, gpus, list(log.warnings)
    )


def clip_monitor(log: MonitorLog, start_ns: int, end_ns: int) -> MonitorLog:
    """The samples of an absolute-time log inside ``[start_ns, end_ns)`` (epoch ns), to align
    a log with a trace's wall-clock window. Logs without absolute times are returned as is."""
    if log.time_kind != "absolute":
        return log
    frame = log.frame.filter(pl.col("time_ns").is_between(start_ns, end_ns, closed="left"))
    return MonitorLog(
        log.path, log.source_format, frame, log.time_kind, log.interval_s, list(log.warnings)
    )
