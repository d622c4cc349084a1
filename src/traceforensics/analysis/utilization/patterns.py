"""Classify a utilization curve into the shapes dashboards show, with the evidence for it.

Input: utilization values in % (0..100) at a fixed sample interval (s); nulls/NaN are missing
samples. Rules, applied in this order (constants below, documented in docs/patterns.md):

    idle                        mean < IDLE_MAX_MEAN_PCT and p95 < IDLE_MAX_P95_PCT
    steady_high                 >= STEADY_HIGH_MIN_FRACTION of samples >= HIGH_LEVEL_PCT, no drop
    sporadic_drops              >= SPORADIC_MIN_HIGH_FRACTION high, <= SPORADIC_MAX_LOW_FRACTION
                                low, at least one drop below LOW_LEVEL_PCT
    high_frequency_sawtooth     swings (high + low >= SWING_MIN_FRACTION, each side present)
                                with an autocorrelation period < SAWTOOTH_MAX_PERIOD_S
    low_frequency_tidal         swings with a period >= SAWTOOTH_MAX_PERIOD_S
    persistent_half_saturation  median in [HALF_LOW_PCT, HALF_HIGH_PCT] and
                                >= HALF_MIN_FRACTION of samples inside that band
    irregular                   none of the above (e.g. swings without a detectable period)
    insufficient_data           fewer than MIN_SAMPLES_FOR_PATTERN samples

A period is only claimed with >= MIN_SAMPLES_FOR_PERIOD samples, an autocorrelation peak of at
least ACF_MIN_PEAK and >= MIN_CYCLES_FOR_PERIOD whole cycles in the series; otherwise it is
``None`` and the evidence says why. Sampling at interval dt cannot see periods under 2 x dt.

        high ──┐ ┌──┐ ┌──┐ ┌──        sawtooth: period = distance between rises
               └─┘  └─┘  └─┘           duty cycle = fraction of samples >= BUSY_LEVEL_PCT
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import asdict, dataclass, field
from typing import Any, Final

import numpy as np
import numpy.typing as npt

from traceforensics.analysis.idle.causes import ranked_causes
from traceforensics.model.units import F64

IDLE_MAX_MEAN_PCT: Final = 5.0
IDLE_MAX_P95_PCT: Final = 15.0
HIGH_LEVEL_PCT: Final = 80.0
LOW_LEVEL_PCT: Final = 20.0
BUSY_LEVEL_PCT: Final = 50.0
STEADY_HIGH_MIN_FRACTION: Final = 0.9
SPORADIC_MIN_HIGH_FRACTION: Final = 0.75
SPORADIC_MAX_LOW_FRACTION: Final = 0.1
SWING_MIN_FRACTION: Final = 0.6
SWING_MIN_SIDE_FRACTION: Final = 0.05
HALF_LOW_PCT: Final = 35.0
HALF_HIGH_PCT: Final = 65.0
HALF_BAND_LOW_PCT: Final = 25.0
HALF_BAND_HIGH_PCT: Final = 75.0
HALF_MIN_FRACTION: Final = 0.6
SAWTOOTH_MAX_PERIOD_S: Final = 3.0
MIN_SAMPLES_FOR_PATTERN: Final = 12
MIN_SAMPLES_FOR_PERIOD: Final = 20
MIN_CYCLES_FOR_PERIOD: Final = 3
ACF_MIN_PEAK: Final = 0.3
#: A repeat at a whole fraction of the highest autocorrelation peak's lag, with at least this
#: share of its height, is the fundamental period (the higher peak is one of its multiples; a
#: period that is not a whole number of samples loses height at its nearest lag).
HARMONIC_SHARE: Final = 0.6
CONFIRM_MIN_SHARE: Final = 0.2
REFUTE_MAX_SHARE: Final = 0.05

PATTERNS: Final[tuple[str, ...]] = (
    "high_frequency_sawtooth",
    "low_frequency_tidal",
    "persistent_half_saturation",
    "sporadic_drops",
    "steady_high",
    "idle",
    "irregular",
    "insufficient_data",
)


@dataclass(frozen=True)
class LikelyCause:
    """A cause to check; ``cause_id`` is an idle-analysis cause id, or None when a trace's idle
    attribution cannot speak to it (e.g. memory-bound kernels)."""

    cause_id: str | None
    text: str


LIKELY_CAUSES: Final[dict[str, tuple[LikelyCause, ...]]] = {
    "high_frequency_sawtooth": (
        LikelyCause("data_loading", "host-side data supply (DataLoader, preprocessing)"),
        LikelyCause("launch_overhead", "kernel-launch overhead (many tiny kernels)"),
        LikelyCause("host_sync", "per-step host synchronisation (.item(), .cpu())"),
        LikelyCause("memcpy", "blocking host<->device copies each step"),
        LikelyCause("cpu_compute", "CPU work between steps"),
    ),
    "low_frequency_tidal": (
        LikelyCause("communication", "communication synchronisation (collectives, stragglers)"),
        LikelyCause("io", "periodic checkpointing"),
        LikelyCause(None, "evaluation / validation passes"),
        LikelyCause("host_sync", "periodic host synchronisation (logging, metrics)"),
    ),
    "persistent_half_saturation": (
        LikelyCause(None, "memory-bandwidth-bound kernels"),
        LikelyCause(None, "inefficient operators (small grids, low occupancy)"),
        LikelyCause("launch_overhead", "launch overhead keeping kernels apart"),
        LikelyCause("cross_stream_wait", "lock contention / streams waiting on each other"),
    ),
    "sporadic_drops": (
        LikelyCause("cpu_compute", "CPU preprocessing stalls"),
        LikelyCause("data_loading", "data-loader stalls"),
        LikelyCause("io", "disk I/O waits"),
        LikelyCause("memory_management", "allocator / memory management stalls"),
        LikelyCause("compilation", "(re)compilation"),
        LikelyCause(None, "driver errors or Xid events (check dmesg)"),
    ),
    "steady_high": (),
    "idle": (
        LikelyCause(None, "no work scheduled on this GPU"),
        LikelyCause("untraced", "work outside the traced window"),
    ),
    "irregular": (
        LikelyCause("data_loading", "uneven data supply"),
        LikelyCause("launch_overhead", "launch-bound stretches (many small kernels)"),
        LikelyCause("memcpy", "blocking copies at uneven points"),
        LikelyCause(None, "a sub-sample-interval sawtooth averaged by the monitor"),
    ),
    "insufficient_data": (),
}


@dataclass
class PatternResult:
    """The class and the numbers that justify it. ``period_s`` is None unless claimable."""

    pattern: str
    samples: int
    interval_s: float
    missing: int
    mean_pct: float | None
    p10_pct: float | None
    p50_pct: float | None
    p90_pct: float | None
    duty_cycle: float | None
    high_fraction: float | None
    low_fraction: float | None
    drop_count: int
    period_s: float | None
    acf_peak: float | None
    period_note: str
    likely_causes: list[LikelyCause] = field(default_factory=list)

    def to_json(self) -> dict[str, Any]:
        out = asdict(self)
        out["likely_causes"] = [asdict(c) for c in self.likely_causes]
        return out


def _drop_count(x: F64) -> int:
    """Number of runs of samples below LOW_LEVEL_PCT that follow a sample >= HIGH_LEVEL_PCT."""
    low = x < LOW_LEVEL_PCT
    state = np.where(x >= HIGH_LEVEL_PCT, 1, np.where(low, -1, 0))
    # last non-middle state before each sample: did we come from high?
    nz = np.flatnonzero(state)
    if nz.size < 2:
        return 0
    s = state[nz]
    return int(np.sum((s[1:] == -1) & (s[:-1] == 1)))


def autocorr_period(x: F64, interval_s: float) -> tuple[float | None, float | None, str]:
    """Period (s) from the first autocorrelation peak after the first zero crossing.

    Returns (period_s, peak value, note). The ACF is computed by FFT on the mean-removed series.
    """
    n = x.size
    if n < MIN_SAMPLES_FOR_PERIOD:
        return (
            None,
            None,
            (
                f"{n} samples are too few to claim a period (need >= {MIN_SAMPLES_FOR_PERIOD} "
                f"covering >= {MIN_CYCLES_FOR_PERIOD} cycles)"
            ),
        )
    y = x - x.mean()
    var = float(np.dot(y, y))
    if var <= 0.0:
        return None, None, "constant series: no period"
    size = 1 << int(2 * n - 1).bit_length()
    spec = np.fft.rfft(y, size)
    acf = np.fft.irfft(spec * np.conj(spec), size)[:n] / var
    max_lag = n // MIN_CYCLES_FOR_PERIOD
    below = np.flatnonzero(acf[1 : max_lag + 1] <= 0.0)
    if below.size == 0:
        return (
            None,
            None,
            (
                f"no autocorrelation zero crossing within {max_lag} lags: any period is "
                f"longer than a third of the span ({max_lag * interval_s:.3g} s)"
            ),
        )
    start = int(below[0]) + 1
    seg = acf[start : max_lag + 1]
    if seg.size < 3:
        return None, None, "series too short after the first zero crossing to find a peak"
    lag, peak = _fundamental(seg, start)
    if peak < ACF_MIN_PEAK:
        return (
            None,
            peak,
            (
                f"strongest repeat (lag {lag * interval_s:.3g} s) has autocorrelation {peak:.2f} "
                f"< {ACF_MIN_PEAK}: no clear period"
            ),
        )
    return (
        lag * interval_s,
        peak,
        (
            f"autocorrelation peak {peak:.2f} at lag {lag:.3g} samples; "
            f"{n / lag:.1f} cycles observed; periods < {2 * interval_s:.3g} s are invisible"
        ),
    )


def _fundamental(seg: F64, start: int) -> tuple[float, float]:
    """Fundamental period (samples, possibly fractional) and its autocorrelation, from ``seg``
    = the ACF from lag ``start`` (its first zero crossing) on.

    A periodic signal's ACF peaks at every multiple of its period; the highest peak ``L`` is
    often a multiple (a period of 9.5 samples repeats exactly only every 19). The fundamental is
    ``L / k`` for the largest ``k`` whose lag carries a peak (within one sample) of at least
    ``HARMONIC_SHARE`` of the highest::

        acf:   0.71 at 9-10   1.00 at 19   0.70 at 28-29   0.99 at 38   ->  19 / 2 = 9.5
    """
    best = int(np.argmax(seg))
    top, lag = float(seg[best]), start + best
    for k in range(lag // max(start, 2), 1, -1):
        centre = round(lag / k) - start
        near = seg[max(centre - 1, 0) : centre + 2]
        if centre >= 0 and near.size and float(near.max()) >= HARMONIC_SHARE * top:
            return lag / k, top
    return float(lag), top


def _fill_missing(values: F64) -> tuple[F64, int]:
    """Linear interpolation over missing samples (NaN); returns the series and the count."""
    bad = ~np.isfinite(values)
    missing = int(bad.sum())
    if missing and missing < values.size:
        idx = np.arange(values.size)
        values = values.copy()
        values[bad] = np.interp(idx[bad], idx[~bad], values[~bad])
    return values, missing


def classify_utilization(values: npt.ArrayLike, interval_s: float) -> PatternResult:
    """Classify utilization ``values`` (%, NaN = missing) sampled every ``interval_s`` s.

    Missing samples are interpolated for the statistics and the period; ``samples`` counts the
    finite ones. The rules and their order are in the module docstring."""
    raw = np.asarray(values, dtype=np.float64)
    x, missing = _fill_missing(raw)
    n_ok = int(np.isfinite(raw).sum())
    if n_ok < MIN_SAMPLES_FOR_PATTERN:
        return _insufficient_data(raw, n_ok, float(interval_s), missing)
    mean, p10, p50, p90, duty, high, low = _stats(x)
    drops = _drop_count(x)
    period, peak, note = autocorr_period(x, interval_s)
    pattern = _pattern_name(x, mean=mean, p50=p50, high=high, low=low, drops=drops, period=period)
    return PatternResult(
        pattern,
        n_ok,
        float(interval_s),
        missing,
        mean,
        p10,
        p50,
        p90,
        duty,
        high,
        low,
        drops,
        period,
        peak,
        note,
        list(LIKELY_CAUSES[pattern]),
    )


def _insufficient_data(raw: F64, n_ok: int, interval_s: float, missing: int) -> PatternResult:
    """``insufficient_data`` with the statistics of the finite samples (all None without any);
    no period, and a note saying how many samples each claim needs."""
    note = (
        f"{n_ok} samples are too few to classify or to claim a period (need >= "
        f"{MIN_SAMPLES_FOR_PATTERN} to classify, >= {MIN_SAMPLES_FOR_PERIOD} covering >= "
        f"{MIN_CYCLES_FOR_PERIOD} cycles for a period)"
    )
    ok = raw[np.isfinite(raw)]
    st: tuple[float | None, ...] = _stats(ok) if ok.size else (None,) * 7
    return PatternResult(
        pattern="insufficient_data",
        samples=n_ok,
        interval_s=interval_s,
        missing=missing,
        mean_pct=st[0],
        p10_pct=st[1],
        p50_pct=st[2],
        p90_pct=st[3],
        duty_cycle=st[4],
        high_fraction=st[5],
        low_fraction=st[6],
        drop_count=_drop_count(ok),
        period_s=None,
        acf_peak=None,
        period_note=note,
    )


def _pattern_name(
    x: F64,
    *,
    mean: float,
    p50: float,
    high: float,
    low: float,
    drops: int,
    period: float | None,
) -> str:
    """The first matching rule of the module docstring, for a gap-free series ``x`` (%).

    ``high``/``low``: fractions of samples >= HIGH_LEVEL_PCT / < LOW_LEVEL_PCT; ``drops``: runs
    below LOW_LEVEL_PCT after a high sample; ``period``: claimable period (s) or None. The
    second steady_high check is a fallback for a mostly-high series that none of the rules
    before it matched."""
    p95 = float(np.percentile(x, 95))
    mid = float(np.mean((x >= HALF_BAND_LOW_PCT) & (x <= HALF_BAND_HIGH_PCT)))
    if mean < IDLE_MAX_MEAN_PCT and p95 < IDLE_MAX_P95_PCT:
        pattern = "idle"
    elif high >= STEADY_HIGH_MIN_FRACTION and drops == 0:
        pattern = "steady_high"
    elif high >= SPORADIC_MIN_HIGH_FRACTION and low <= SPORADIC_MAX_LOW_FRACTION and drops > 0:
        pattern = "sporadic_drops"
    elif (
        high + low >= SWING_MIN_FRACTION
        and min(high, low) >= SWING_MIN_SIDE_FRACTION
        and period is not None
    ):
        pattern = (
            "high_frequency_sawtooth" if period < SAWTOOTH_MAX_PERIOD_S else "low_frequency_tidal"
        )
    elif HALF_LOW_PCT <= p50 <= HALF_HIGH_PCT and mid >= HALF_MIN_FRACTION:
        pattern = "persistent_half_saturation"
    elif high >= STEADY_HIGH_MIN_FRACTION:
        pattern = "steady_high"
    else:
        pattern = "irregular"
    return pattern


def _stats(x: F64) -> tuple[float, float, float, float, float, float, float]:
    p10, p50, p90 = (float(v) for v in np.percentile(x, [10, 50, 90]))
    return (
        float(x.mean()),
        p10,
        p50,
        p90,
        float(np.mean(x >= BUSY_LEVEL_PCT)),
        float(np.mean(x >= HIGH_LEVEL_PCT)),
        float(np.mean(x < LOW_LEVEL_PCT)),
    )


@dataclass(frozen=True)
class CauseVerdict:
    """A likely cause checked against the trace's idle attribution.

    ``verdict``: "confirmed" (share >= CONFIRM_MIN_SHARE of attributed idle time), "refuted"
    (share < REFUTE_MAX_SHARE), "minor" (in between), "not_checkable" (no cause id), or
    "also_attributed": a cause outside the pattern's list that holds >= CONFIRM_MIN_SHARE.
    """

    cause_id: str | None
    text: str
    verdict: str
    idle_ns: int
    share: float

    def to_json(self) -> dict[str, Any]:
        return asdict(self)


def check_causes(pattern: str, idle_ns_by_cause: Mapping[str, int]) -> list[CauseVerdict]:
    """Confirm or refute ``pattern``'s likely causes with idle time per cause id (ns)."""
    total = sum(max(int(v), 0) for v in idle_ns_by_cause.values())
    out: list[CauseVerdict] = []
    for cause in LIKELY_CAUSES.get(pattern, ()):
        if cause.cause_id is None or total <= 0:
            out.append(CauseVerdict(cause.cause_id, cause.text, "not_checkable", 0, 0.0))
            continue
        ns = max(int(idle_ns_by_cause.get(cause.cause_id, 0)), 0)
        share = ns / total
        verdict = (
            "confirmed"
            if share >= CONFIRM_MIN_SHARE
            else "refuted"
            if share < REFUTE_MAX_SHARE
            else "minor"
        )
        out.append(CauseVerdict(cause.cause_id, cause.text, verdict, ns, share))
    listed = {c.cause_id for c in LIKELY_CAUSES.get(pattern, ())}
    if total > 0:
        for cid, v in ranked_causes(idle_ns_by_cause):
            if cid not in listed and v / total >= CONFIRM_MIN_SHARE:
                text = "attributed idle time outside this pattern's usual causes"
                out.append(CauseVerdict(cid, text, "also_attributed", int(v), v / total))
    return out
