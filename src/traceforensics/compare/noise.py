"""Is a change larger than the step-to-step noise? (docs/diff.md, "Noise")

The rule compares the **medians** of the per-step values of the two runs against the standard
error of those medians, estimated robustly from each run's own steps:

    sigma = 1.4826 x MAD            (MAD: median absolute deviation from the median; 1.4826
                                     makes it the standard deviation for normal data)
    se    = 1.2533 x sigma / sqrt(n) (standard error of a median of n values)
    band  = 2 x sqrt(se_before^2 + se_after^2)
    within noise  <=>  |median_after - median_before| <= max(band, resolution)

Why this rule: a profiled run holds few steps (often 5 to 10) and one of them is often a
warm-up or a hiccup. The median and the MAD ignore such a step, where a mean and a standard
deviation would be pulled by it. A rank test (Mann-Whitney) was the alternative: with 6 steps a
side, a single overlapping warm-up step already lifts its p-value above 0.05 for a 28 % faster
step, and with 3 steps a side it can never reach 0.05, whatever the change. ``2 x`` the standard
error is the usual ~95 % band. ``resolution`` is the figure's finest step (1 µs: Kineto's
clock), so identical steps do not make a 1 ns change "real".

Fewer than ``MIN_STEPS`` steps on a side: the noise is unknown (``within`` is None).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from statistics import median
from typing import Any

#: Steps a side needs before its spread means anything.
MIN_STEPS = 3
#: MAD -> standard deviation for normal data.
MAD_TO_SIGMA = 1.4826
#: Standard error of the median = this x sigma / sqrt(n) (large-sample, normal data).
MEDIAN_SE = 1.2533
#: Standard errors in the band (about 95 % two-sided).
BAND_SE = 2.0


@dataclass(frozen=True)
class Noise:
    """The per-step comparison of one figure: medians, robust spreads and the band (the
    figure's unit: ns, or a fraction for MFU); ``within`` None when too few steps."""

    n_before: int
    n_after: int
    median_before: float
    median_after: float
    sigma_before: float
    sigma_after: float
    band: float
    within: bool | None

    @property
    def shift(self) -> float:
        return self.median_after - self.median_before

    def to_json(self) -> dict[str, Any]:
        return {
            "rule": "median_shift",
            "n_before": self.n_before,
            "n_after": self.n_after,
            "median_before": _num(self.median_before),
            "median_after": _num(self.median_after),
            "sigma_before": _num(self.sigma_before),
            "sigma_after": _num(self.sigma_after),
            "band": _num(self.band),
            "within_noise": self.within,
        }


def _num(x: float) -> float:
    return round(x, 6) if abs(x) < 1e3 else round(x)


def robust_sigma(values: Sequence[float]) -> float:
    """1.4826 x the median absolute deviation (0 for fewer than 2 values)."""
    if len(values) < 2:
        return 0.0
    m = median(values)
    return MAD_TO_SIGMA * median(abs(v - m) for v in values)


def compare_steps(
    before: Sequence[float], after: Sequence[float], resolution: float = 0.0
) -> Noise | None:
    """The noise test of two runs' per-step values (module doc); None when a side has none."""
    if not before or not after:
        return None
    sb, sa = robust_sigma(before), robust_sigma(after)
    se_b = MEDIAN_SE * sb / math.sqrt(len(before))
    se_a = MEDIAN_SE * sa / math.sqrt(len(after))
    band = BAND_SE * math.hypot(se_b, se_a)
    mb, ma = float(median(before)), float(median(after))
    enough = len(before) >= MIN_STEPS and len(after) >= MIN_STEPS
    within = abs(ma - mb) <= max(band, resolution) if enough else None
    return Noise(len(before), len(after), mb, ma, sb, sa, band, within)


def quartiles(values: Sequence[float]) -> tuple[float, float]:
    """First and third quartile (linear interpolation between order statistics, numpy's
    default), for the step-time spread."""
    s = sorted(values)
    return _quantile(s, 0.25), _quantile(s, 0.75)


def _quantile(s: Sequence[float], q: float) -> float:
    pos = q * (len(s) - 1)
    lo = math.floor(pos)
    hi = min(lo + 1, len(s) - 1)
    return s[lo] + (s[hi] - s[lo]) * (pos - lo)
