"""Before/after/delta of every figure, per (rank, device) and for the job.

Basis (docs/diff.md): when both sides have steps, time figures are **per step**: the mean of the
steps' values (``per_step``: steady state, idle outside the steps left out), or for the figures
``steps[]`` does not carry (busy by kind, exposed copies) the window total divided by the number
of steps (``window_per_step``). Without steps on a side, both sides give window totals
(``total``). Step time is the median step (``median_step``), its mean, and its interquartile
range; MFU is over the GPU-active span whatever the basis. Shares (``share_before``,
``share_after``) are always of the whole window, the figure ``tf analyze`` prints.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from statistics import fmean, median
from typing import Any

from traceforensics.compare.figures import STEP_FIGURES, Side, is_time_figure
from traceforensics.compare.noise import Noise, compare_steps, quartiles
from traceforensics.model.units import NS_PER_US

#: Finest step of a time figure (Kineto records µs) and of MFU (0.01 percentage point).
RESOLUTION = {"time": float(NS_PER_US), "fraction": 1e-4}
#: What each step-time figure is of the step durations.
_STEP_BASIS = {
    "step_time": "median_step",
    "step_time.mean": "mean_step",
    "step_time.iqr": "step_iqr",
}


@dataclass(frozen=True)
class FigureDelta:
    """One figure before and after. ``unit``: ``ns``, ``ns/step`` or ``fraction``;
    ``delta_pct`` is percent of ``before`` (None when ``before`` is 0 or a side is unknown)."""

    figure: str
    unit: str
    basis: str
    before: float | None
    after: float | None
    share_before: float | None = None
    share_after: float | None = None
    noise: Noise | None = None

    @property
    def delta(self) -> float | None:
        if self.before is None or self.after is None:
            return None
        return self.after - self.before

    @property
    def delta_pct(self) -> float | None:
        d = self.delta
        if d is None or self.before is None or self.before == 0:
            return None
        return 100.0 * d / abs(self.before)

    @property
    def within_noise(self) -> bool | None:
        return None if self.noise is None else self.noise.within

    def to_json(self) -> dict[str, Any]:
        """``before``, ``after``, ``delta`` (integer ns for times), ``delta_pct``, ..."""
        num = _ns if self.unit != "fraction" else _frac
        pct = self.delta_pct
        return {
            "before": num(self.before),
            "after": num(self.after),
            "delta": num(self.delta),
            "delta_pct": None if pct is None else round(pct, 2),
            "unit": self.unit,
            "basis": self.basis,
            "share_before": _frac(self.share_before),
            "share_after": _frac(self.share_after),
            "within_noise": self.within_noise,
            "noise": None if self.noise is None else self.noise.to_json(),
        }


def _ns(x: float | None) -> int | None:
    return None if x is None else round(x)


def _frac(x: float | None) -> float | None:
    return None if x is None or not math.isfinite(x) else round(x, 6)


@dataclass(frozen=True)
class DeviceDiff:
    """Every figure of one device (``rank``/``device`` None: the job) before and after."""

    rank: int | None
    device: int | None
    name_before: str
    name_after: str
    steps_before: int
    steps_after: int
    basis: str
    figures: dict[str, FigureDelta]

    def where(self) -> str:
        return "job" if self.rank is None else f"rank {self.rank} GPU {self.device}"

    def to_json(self) -> dict[str, Any]:
        return {
            "rank": self.rank,
            "device": self.device,
            "name_before": self.name_before,
            "name_after": self.name_after,
            "steps_before": self.steps_before,
            "steps_after": self.steps_after,
            "basis": self.basis,
            "figures": {k: f.to_json() for k, f in self.figures.items()},
        }


def side_basis(before: Side | None, after: Side) -> str:
    """``per_step`` when every side given has steps, else ``total``."""
    sides = [s for s in (before, after) if s is not None]
    return "per_step" if all(s.n_steps for s in sides) else "total"


def figure_value(side: Side, name: str, basis: str) -> tuple[float | None, str]:
    """(value, basis used) of one figure of one side (module doc); value None when unknown."""
    if name in STEP_FIGURES:
        return _step_value(side.series.get("step_time", []), name), _STEP_BASIS[name]
    if name == "mfu":
        return side.mfu, "span"
    total = side.totals.get(name)
    if total is None:
        return None, basis
    if basis != "per_step":
        return total, "total"
    values = side.series.get(name)
    if values:
        return fmean(values), "per_step"
    return total / side.n_steps, "window_per_step"


def _step_value(durations: Sequence[float], name: str) -> float | None:
    if not durations:
        return None
    if name == "step_time.mean":
        return fmean(durations)
    if name == "step_time.iqr":
        q1, q3 = quartiles(durations)
        return q3 - q1
    return float(median(durations))


def share(side: Side, name: str) -> float | None:
    """The figure's window total over the window (None for step time, MFU, an empty window)."""
    total = side.totals.get(name)
    if not is_time_figure(name) or total is None or side.window_ns <= 0:
        return None
    return total / side.window_ns


def figure_delta(before: Side | None, after: Side, name: str, basis: str) -> FigureDelta:
    """One figure of two sides (``before`` None: a single analysis, ``tf analyze --fail-on``)."""
    b, _ = figure_value(before, name, basis) if before is not None else (None, basis)
    a, used = figure_value(after, name, basis)
    unit = "fraction" if name == "mfu" else ("ns/step" if used.endswith("per_step") else "ns")
    series = "step_time" if name in STEP_FIGURES else name  # step figures: the step durations
    noise = None
    if before is not None and name != "step_time.iqr":  # a spread has no per-step values
        res = RESOLUTION["fraction" if name == "mfu" else "time"]
        noise = compare_steps(before.series.get(series, []), after.series.get(series, []), res)
    return FigureDelta(
        figure=name,
        unit=unit,
        basis=used,
        before=b,
        after=a,
        share_before=share(before, name) if before is not None else None,
        share_after=share(after, name),
        noise=noise,
    )


def device_diff(before: Side | None, after: Side, names: Sequence[str]) -> DeviceDiff:
    """Every figure in ``names`` of one matched device (or the job)."""
    basis = side_basis(before, after)
    return DeviceDiff(
        rank=after.rank,
        device=after.device,
        name_before=before.name if before is not None else "",
        name_after=after.name,
        steps_before=before.n_steps if before is not None else 0,
        steps_after=after.n_steps,
        basis=basis,
        figures={n: figure_delta(before, after, n, basis) for n in names},
    )
