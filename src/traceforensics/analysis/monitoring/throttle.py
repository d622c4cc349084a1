"""Clock episodes in a monitoring log: throttling under load, kept apart from idle down-clocking.

Clock rule (why idle down-clocking is never throttling)::

    util   ▇▇▇▇▇▇▇▇▇▇▁▁▁▁▇▇▇▇     a throttle sample: util >= THROTTLE_MIN_UTIL_PCT
    clock  ▇▇▇▇▅▅▅▅▇▇▂▂▂▂▇▇▇▇       and clock < THROTTLE_MAX_CLOCK_RATIO x reference clock
               └─┬┘    └┬─┘
           throttling   idle down-clocking (clock follows util down: not reported)

The reference clock is ``sm_clock_max_mhz`` when logged, else the 99th percentile of the
logged SM clock. An episode is a run of >= THROTTLE_MIN_SAMPLES consecutive throttle samples;
its reason comes from the logged throttle reasons when present, else is inferred (temperature
>= THERMAL_MIN_C -> thermal, power >= POWER_NEAR_LIMIT_RATIO x limit -> power).
"""

from __future__ import annotations

import itertools
from dataclasses import dataclass
from typing import Any, Final

import numpy as np
import numpy.typing as npt
import polars as pl

from traceforensics.analysis.utilization.patterns import LOW_LEVEL_PCT
from traceforensics.model.units import F64, NS_PER_S

THROTTLE_MIN_UTIL_PCT: Final = 80.0
THROTTLE_MAX_CLOCK_RATIO: Final = 0.85
THROTTLE_MIN_SAMPLES: Final = 3
THERMAL_MIN_C: Final = 83.0
POWER_NEAR_LIMIT_RATIO: Final = 0.95
_NOT_SLOWDOWN: Final = frozenset({"gpu_idle", ""})


@dataclass
class ThrottleEpisode:
    """SM clock well below its reference while the GPU was busy. Times in s from log start."""

    start: float
    end: float
    reason: str
    reason_source: str  # "throttle_reasons" | "inferred" | "none"
    samples: int
    sm_clock_mhz: float
    sm_clock_ref_mhz: float
    util_mean: float
    temperature_c: float | None
    power_w: float | None

    def to_json(self) -> dict[str, Any]:
        return {
            # plain Python numbers: the fields are computed with numpy scalars
            "start": rounded(self.start, 3),
            "end": rounded(self.end, 3),
            "reason": self.reason,
            "sm_clock_mhz": rounded(self.sm_clock_mhz, 1),
            "temperature_c": rounded(self.temperature_c),
            "power_w": rounded(self.power_w),
            "reason_source": self.reason_source,
            "samples": int(self.samples),
            "sm_clock_ref_mhz": rounded(self.sm_clock_ref_mhz, 1),
            "util_mean": rounded(self.util_mean, 1),
        }


def rounded(v: float | None, nd: int = 2) -> float | None:
    return None if v is None or not np.isfinite(v) else round(float(v), nd)


def col_array(df: pl.DataFrame, name: str) -> F64 | None:
    s = df.get_column(name)
    if s.null_count() == s.len():
        return None
    return s.cast(pl.Float64).fill_null(float("nan")).to_numpy().astype(np.float64)


def _runs(mask: npt.NDArray[np.bool_]) -> list[tuple[int, int]]:
    """[start, end) index pairs of True runs."""
    d = np.diff(np.concatenate(([0], mask.astype(np.int8), [0])))
    return list(zip(np.flatnonzero(d == 1).tolist(), np.flatnonzero(d == -1).tolist(), strict=True))


def _reason(
    reasons: list[str | None], temp: F64 | None, power: F64 | None, limit: F64 | None, sl: slice
) -> tuple[str, str]:
    logged = [r for r in reasons if r is not None]
    if logged:
        cats: dict[str, int] = {}
        for text in logged:
            for raw_tok in text.split(","):
                tok = raw_tok.strip()
                if tok in _NOT_SLOWDOWN:
                    continue
                cat = "thermal" if "thermal" in tok else "power" if "power" in tok else tok
                cats[cat] = cats.get(cat, 0) + 1
        if cats:
            return "+".join(sorted(cats, key=lambda c: -cats[c])), "throttle_reasons"
        return "unknown (no slowdown reason was active)", "throttle_reasons"
    found: list[str] = []
    if temp is not None and np.nanmax(temp[sl]) >= THERMAL_MIN_C:
        found.append("thermal")
    if power is not None and limit is not None:
        ratio = np.nanmean(power[sl]) / np.nanmean(limit[sl])
        if np.isfinite(ratio) and ratio >= POWER_NEAR_LIMIT_RATIO:
            found.append("power")
    if found:
        return "+".join(found), "inferred"
    return "unknown", "none"


def _mean(a: F64 | None, sl: slice) -> float | None:
    if a is None or not np.isfinite(a[sl]).any():
        return None
    return float(np.nanmean(a[sl]))


def throttle_episodes(
    df: pl.DataFrame, t0_ns: int
) -> tuple[list[ThrottleEpisode], int, float | None, str | None]:
    """Episodes, idle down-clock sample count, reference clock and its source for one GPU."""
    clock, util = col_array(df, "sm_clock_mhz"), col_array(df, "util_pct")
    if clock is None or util is None:
        return [], 0, None, None
    cmax = col_array(df, "sm_clock_max_mhz")
    if cmax is not None and np.isfinite(cmax).any():
        ref = np.where(np.isfinite(cmax), cmax, np.nanmax(cmax))
        src = "sm_clock_max_mhz"
    else:
        ref = np.full(clock.size, float(np.nanpercentile(clock, 99)))
        src = "observed_p99"
    slow = clock < THROTTLE_MAX_CLOCK_RATIO * ref
    reason_col = df.get_column("throttle_reasons")
    # a logged "gpu_idle" alone means the driver itself says the GPU was idle
    only_idle = (reason_col == "gpu_idle").fill_null(False).to_numpy().astype(bool)
    hot = slow & (util >= THROTTLE_MIN_UTIL_PCT) & ~only_idle
    idle_down = int(np.sum(slow & (util < LOW_LEVEL_PCT)))
    t = df.get_column("time_ns").to_numpy()
    temp, power, limit = (
        col_array(df, "temperature_c"),
        col_array(df, "power_w"),
        col_array(df, "power_limit_w"),
    )
    step = float(np.median(np.diff(t))) if t.size > 1 else 0.0
    episodes: list[ThrottleEpisode] = []
    # a run breaks where samples are missing for more than 3 intervals
    gap = np.concatenate(([False], np.diff(t) > 3 * step)) if step > 0 else np.zeros(t.size, bool)
    for a, b in _runs(hot):
        cuts = [a, *(a + np.flatnonzero(gap[a + 1 : b]) + 1).tolist(), b]
        for s, e in itertools.pairwise(cuts):
            if e - s < THROTTLE_MIN_SAMPLES:
                continue
            sl = slice(s, e)
            reason, rsrc = _reason(reason_col[s:e].to_list(), temp, power, limit, sl)
            episodes.append(
                ThrottleEpisode(
                    (t[s] - t0_ns) / NS_PER_S,
                    (t[e - 1] - t0_ns + step) / NS_PER_S,
                    reason,
                    rsrc,
                    e - s,
                    float(np.nanmean(clock[sl])),
                    float(np.nanmean(ref[sl])),
                    float(np.nanmean(util[sl])),
                    None
                    if temp is None or not np.isfinite(temp[sl]).any()
                    else float(np.nanmax(temp[sl])),
                    _mean(power, sl),
                )
            )
    return episodes, idle_down, float(np.nanmax(ref)), src
