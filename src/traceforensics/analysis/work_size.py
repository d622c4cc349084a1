"""Step time explained by input size: per step and per device, the work size the trace shows,
then whether step time follows it.

**Which ops belong to a step.** A step is one ``StepStats`` (its device window ``[start_ns,
start_ns + dur_ns)``). A GPU op belongs to the step whose window holds its start; a host op
belongs to the step of the first GPU op of that device it launched (the first launch call on
its thread inside ``[op start, op end)``). Host ops that launch nothing on the device are not
its work. So the data of step k is found even when the host runs a step ahead of the GPU.

**Work size of a step** (``work_shapes`` reads it), first source that gives a value in any
kept step (one unit per device): ``tokens`` from embedding lookups (index input ``[B, L]``:
``B*L``, one table's lookups summed per step, the largest table); the batch copied to the
device (``aten::to`` / ``_to_copy`` / ``copy_`` launching a host-to-device memcpy, first
input); failing copies, the step's first operator launching device work, its first input of
rank >= 2 (an ``addmm``'s bias ``[N]`` is no batch); ``h2d_bytes`` (bytes copied
host-to-device: a format-independent proxy of the batch; a step without a copy: null); none.
A batch tensor counts ``tokens`` (integer, rank 2: ``B*L``; without types, a copy of 8 bytes
per element), else ``samples`` (leading dim) when its trailing dims are the same in every kept
step, else ``elements`` (element count: ``[8, T, 80]`` with T varying). Shapes come from
``Input Dims`` / ``Input type`` (Kineto args; Nsight Systems ``emit_nvtx(record_shapes=True)``
range names, mapped onto ``Input Dims`` by the ingester, no types). FLOPs per step come from the
kernels pass (``with_flops``), beside the work size; the verdict does not read them.

**Steps kept**: a device's steps less its one-off warm-up steps (``one_off``'s rule).

**Fit.** ``y`` = step duration less the step's exposed host-to-device copy time
(``copy_ns``: copy time no kernel, collective or memset overlaps), so that copies growing with
the batch are not read as work growing with the data. ``r``: Pearson r of ``y`` vs work;
``slope_ns``: least-squares ns of ``y`` per unit; ``r_with_copies``: r of the whole duration;
``copy_slope_ns``: ns of exposed copy time per unit. For the copy sources (a loader may copy
batch k+1 during step k) the fit is also made with a one-step lag (step k's work = the batch
copied in the step before it in time); it is kept (``lag`` 1, ``per_step`` shifted) when its
best r reaches ``FOLLOW_R`` and beats the unlagged one.

**Verdict** per device (``VERDICTS``): ``too_few_steps`` (fewer than ``MIN_STEPS`` kept
steps, or kept steps with a work size), ``no_sizes`` (unit None), ``fixed_shapes`` (every
kept step the same work size and the same batch dims), ``follows_work`` (``r`` >=
``FOLLOW_R`` and the work size's spread ``(max - min) / mean`` > ``MIN_SPREAD``),
``independent`` (otherwise: the same work in other shapes included). ``copies_cost``: not
``follows_work``, but ``r_with_copies`` >= ``FOLLOW_R`` with that spread: the copies are the
cost, not the work on the data.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import asdict, dataclass, field, replace
from typing import Any, Final, NamedTuple

import numpy as np

from traceforensics.analysis.context import AnalysisContext
from traceforensics.analysis.idle.results import StepStats
from traceforensics.analysis.kernels.flops import INT_ITEMSIZE
from traceforensics.analysis.kernels.results import MfuRow
from traceforensics.analysis.one_off import WARMUP_STEP, one_off_windows
from traceforensics.analysis.work_shapes import (
    OpShapes,
    StepSizes,
    exposed_copy_ns,
    step_sizes,
)
from traceforensics.model.units import I64, Mask

VERDICTS: Final[tuple[str, ...]] = (
    "too_few_steps", "no_sizes", "fixed_shapes", "follows_work", "independent",
)  # fmt: skip
UNITS: Final[tuple[str, ...]] = ("tokens", "samples", "elements", "h2d_bytes")
#: Fewer kept steps (with a work size) than this: no verdict on the trend.
MIN_STEPS: Final = 4
#: Pearson r from which step time follows the work size.
FOLLOW_R: Final = 0.7
#: The work size must vary by more than this fraction of its mean ((max - min) / mean).
MIN_SPREAD: Final = 0.05
#: ``Input type`` texts of integer tensors (token ids); ``bool`` masks are not ids.
INT_TYPES: Final = tuple(t for t in INT_ITEMSIZE if t != "bool")
#: How a unit reads in a sentence, and the amount of it a slope is quoted per.
_UNIT_TEXT: Final = {
    "tokens": ("tokens", 1_000, "1k tokens"),
    "samples": ("samples", 1, "sample"),
    "elements": ("elements", 1_000, "1k elements"),
    "h2d_bytes": ("bytes copied host-to-device", 1_000_000, "MB copied"),
}


@dataclass(frozen=True)
class DeviceWork:
    """The work size of each step of one device and whether step time follows it.

    ``per_step``: work per step in ``unit``, aligned with the device's ``StepStats`` in order
    (None: unknown, or no unit; with ``lag`` 1, the batch copied in the step before);
    ``used``: the steps the verdict reads (kept, with a size); ``r``: Pearson r of step
    duration less exposed copy time vs work; ``slope_ns``: its ns per unit; ``spread``:
    ``(max - min) / mean`` of the work used; ``shape``: the batch tensor's dims of the first
    step used (``8 x 512``), None for ``h2d_bytes``; ``copy_ns``: exposed host-to-device copy
    ns per step; ``r_with_copies`` / ``copy_slope_ns`` / ``copies_cost`` /
    ``pageable_copies``: the module docstring's fit."""

    rank: int
    device: int
    unit: str | None
    per_step: list[int | None]
    verdict: str
    r: float | None
    slope_ns: float | None
    steps_used: int
    used: list[bool] = field(default_factory=list)
    spread: float | None = None
    work_min: int | None = None
    work_max: int | None = None
    shape: str | None = None
    steps_kept: int = 0
    lag: int = 0
    copy_ns: list[int] = field(default_factory=list)
    r_with_copies: float | None = None
    copy_slope_ns: float | None = None
    copies_cost: bool = False
    pageable_copies: bool = False
    #: FLOPs of each step (aligned as ``per_step``) by the kernels pass's FLOPs model
    #: (``mfu.steps``: the kernels that started in the step); None where no model covers them
    flops: list[int | None] = field(default_factory=list)

    def to_json(self) -> dict[str, Any]:
        """Every field, by name (plain JSON: docs/work_size.md)."""
        return asdict(self)

    def sentence(self) -> str:
        """One sentence with its figures (what the report prints)."""
        sized = self.work_min is not None and self.work_max is not None
        if self.verdict in ("no_sizes", "too_few_steps") or self.unit is None or not sized:
            return self._too_few_text()
        what, per, per_text = _UNIT_TEXT[self.unit]
        n = self.steps_used
        if self.verdict == "fixed_shapes" or self.work_min == self.work_max:
            return self._fixed_text(what)
        span = f"{self.work_min:,}-{self.work_max:,} {what} per step"
        span += ", each step's batch copied in the step before" if self.lag else ""
        r = "r undefined (constant step time)" if self.r is None else f"r = {self.r:.2f}"
        if self.copies_cost:
            return self._copies_text(what, per, per_text, span)
        # say the fit is net of the copies only where taking them out changed r
        net = ""
        if self.r is not None and self.r_with_copies is not None:
            net = " net of copies" if f"{self.r:.2f}" != f"{self.r_with_copies:.2f}" else ""
        if self.verdict == "follows_work":
            return (
                f"step time follows {what} per step ({r}{net}, "
                f"{_slope_text(self.slope_ns, per)} per {per_text} over {n} steps, {span}): "
                "the fluctuation comes from the data (padding, dynamic batches, variable "
                "sequence length), not the pipeline; bucket by length, pack sequences or use "
                "fixed shapes"
            )
        if self.spread is not None and self.spread <= MIN_SPREAD:
            return (
                f"{what} per step vary by only {self.spread:.0%} ({span} over "
                f"{n} steps): too little to explain the step time's fluctuation"
            )
        return (
            f"step time does not follow {what} per step ({r}{net} over {n} steps, "
            f"{span}): its fluctuation does not come from the data's size"
        )

    def _fixed_text(self, what: str) -> str:
        n = self.steps_used
        if self.verdict != "fixed_shapes":  # the same work in other shapes
            return (
                f"{what} per step are the same in every step though the shapes vary "
                f"({self.work_min:,} over {n} steps, {self.shape} in the first): step time "
                "does not vary with the data's size"
            )
        head = "shapes are fixed" if self.unit != "h2d_bytes" else "the batch is fixed"
        shape = f"{self.shape}, " if self.shape else ""
        return (
            f"{head} ({shape}{self.work_min:,} {what} every step over {n} "
            "steps): step time does not vary with the data"
        )

    def _copies_text(self, what: str, per: int, per_text: str, span: str) -> str:
        net = "constant" if self.r is None else f"r = {self.r:.2f}"
        remedy = (
            "pin the loader's memory (pin_memory=True) and copy with non_blocking=True so "
            "the copy runs beside compute"
            if self.pageable_copies
            else "overlap the copy with compute (a side stream, non_blocking=True)"
        )
        return (
            f"step time follows {what} per step only through the copies' own time "
            f"(r = {self.r_with_copies or 0:.2f} with it, {net} without; the copies take "
            f"{_slope_text(self.copy_slope_ns, per)} per {per_text} over {self.steps_used} "
            f"steps, {span}): the copies are the cost, not the work on the data; {remedy}, "
            "or copy less (e.g. uint8 images normalised on the GPU)"
        )

    def _too_few_text(self) -> str:
        if self.verdict == "no_sizes":
            return (
                "the trace shows no work size per step (no input shapes, no host-to-device "
                "copies): whether step time follows the data cannot be told"
            )
        if self.steps_kept < MIN_STEPS:
            return (
                "too few steps to tell whether step time follows the work size "
                f"({self.steps_kept} steady step(s), {MIN_STEPS} needed)"
            )
        return (
            "too few steps show a work size to tell whether step time follows it "
            f"({self.steps_used} of {self.steps_kept} steady steps, {MIN_STEPS} needed)"
        )


def _slope_text(slope_ns: float | None, per: int) -> str:
    ns = 0.0 if slope_ns is None else slope_ns * per
    if abs(ns) >= 1e6:
        return f"{ns / 1e6:+.2f} ms"
    if abs(ns) >= 1e3:
        return f"{ns / 1e3:+.1f} µs"
    return f"{ns:+.0f} ns"


def step_work(ctx: AnalysisContext, steps: list[StepStats]) -> list[DeviceWork]:
    """One ``DeviceWork`` per (rank, device) of ``steps``, in order of first appearance."""
    groups: dict[tuple[int, int], list[int]] = {}
    for i, s in enumerate(steps):
        groups.setdefault((s.rank, s.device), []).append(i)
    if not groups:
        return []
    dev_index = {rd: g for g, rd in enumerate(ctx.devices)}
    shapes = OpShapes(ctx, INT_TYPES)
    out: list[DeviceWork] = []
    for (rank, device), idx in groups.items():
        mine = [steps[i] for i in idx]
        lo = np.array([s.start_ns for s in mine], dtype=np.int64)
        hi = lo + np.array([max(s.dur_ns, 0) for s in mine], dtype=np.int64)
        g = dev_index.get((rank, device))
        warm = _warm_spans(ctx, g) if g is not None else []
        kept = np.array(
            [not any(n == s.name and a < e and b > s.start_ns for n, a, b in warm)
             for s, e in zip(mine, hi.tolist(), strict=True)],
            dtype=bool,
        )  # fmt: skip
        none: list[Any] = [None] * len(mine)
        sizes = StepSizes(None, none, none)
        copy, pageable = np.zeros(len(mine), dtype=np.int64), False
        if g is not None:
            sizes = step_sizes(ctx, g, lo, hi, kept, shapes)
            if sizes.unit is not None:
                copy, pageable = exposed_copy_ns(ctx, g, lo, hi)
        order = np.argsort(lo, kind="stable")
        out.append(_judge(rank, device, sizes, hi - lo, copy, pageable, kept, order))
    return out


def with_flops(
    work: list[DeviceWork], steps: list[StepStats], mfu_steps: Sequence[MfuRow]
) -> list[DeviceWork]:
    """``work`` with each step's FLOPs (``DeviceWork.flops``) from the kernels pass's per-step
    rows (``mfu.steps``: the same windows as ``steps[]``)."""
    known = {
        (r.rank, r.device, r.window_start_ns, r.window_ns): r.flops
        for r in mfu_steps
        if r.flops_known_kernel_ns > 0
    }
    out = []
    for w in work:
        mine = [s for s in steps if (s.rank, s.device) == (w.rank, w.device)]
        flops = [known.get((w.rank, w.device, s.start_ns, s.dur_ns)) for s in mine]
        out.append(replace(w, flops=flops))
    return out


def _warm_spans(ctx: AnalysisContext, g: int) -> list[tuple[str, int, int]]:
    """The device's one-off warm-up steps, ``(step name, start_ns, end_ns)`` (``one_off``'s
    rule, not a second one); a step is one when its name and window match (names repeat)."""
    prefix = f"{WARMUP_STEP} "
    return [
        (sp.label[len(prefix) :], sp.start_ns, sp.end_ns)
        for sp in one_off_windows(ctx, g).spans
        if sp.label.startswith(prefix)
    ]


class _Fit(NamedTuple):
    """One fit over the steps used (module docstring)."""

    r: float | None
    slope: float | None
    r_with: float | None
    copy_slope: float | None
    follows: bool
    copies_cost: bool

    @property
    def best(self) -> float:
        """The higher of the two r (-1 when neither is defined): what a lag is chosen by."""
        return max((x for x in (self.r, self.r_with) if x is not None), default=-1.0)


def _judge(
    rank: int,
    device: int,
    sizes: StepSizes,
    dur: I64,
    copy: I64,
    pageable: bool,
    kept: Mask,
    order: I64,
) -> DeviceWork:
    """The verdict over the kept steps with a work size (module docstring)."""
    n_kept = int(kept.sum())

    def result(
        verdict: str,
        values: list[int | None],
        shapes: list[str | None],
        fit: _Fit | None = None,
        lag: int = 0,
    ) -> DeviceWork:
        used = [bool(k) and v is not None for v, k in zip(values, kept, strict=True)]
        x = [int(v) for v, u in zip(values, used, strict=True) if u and v is not None]
        f = fit or _Fit(None, None, None, None, False, False)
        return DeviceWork(
            rank, device, sizes.unit, values, verdict, f.r, f.slope, len(x), used,
            spread=_spread(x), work_min=min(x, default=None), work_max=max(x, default=None),
            shape=next((s for s, u in zip(shapes, used, strict=True) if u), None),
            steps_kept=n_kept, lag=lag, copy_ns=[int(c) for c in copy], r_with_copies=f.r_with,
            copy_slope_ns=f.copy_slope, copies_cost=f.copies_cost, pageable_copies=pageable,
        )  # fmt: skip

    values, shapes = sizes.values, sizes.shapes
    used = np.array([v is not None for v in values], dtype=bool) & kept
    if n_kept < MIN_STEPS or (sizes.unit is not None and int(used.sum()) < MIN_STEPS):
        return result("too_few_steps", values, shapes)
    if sizes.unit is None:
        return result("no_sizes", values, shapes)
    x = [int(v) for v, u in zip(values, used, strict=True) if u and v is not None]
    if min(x) == max(x):  # the same work: fixed shapes only when the dims are the same too
        same = len({s for s, u in zip(shapes, used, strict=True) if u}) == 1
        return result("fixed_shapes" if same else "independent", values, shapes)
    lag, fit = 0, _fit(values, dur, copy, kept)
    if sizes.copied:  # a prefetching loader copies step k's batch in step k-1
        lagged, lag_shapes = _lagged(values, order), _lagged(shapes, order)
        f1 = _fit(lagged, dur, copy, kept)
        if f1 is not None and f1.best >= FOLLOW_R and (fit is None or f1.best > fit.best):
            lag, fit, values, shapes = 1, f1, lagged, lag_shapes
    verdict = "follows_work" if fit is not None and fit.follows else "independent"
    return result(verdict, values, shapes, fit, lag)


def _fit(values: list[int | None], dur: I64, copy: I64, kept: Mask) -> _Fit | None:
    """The fit over the kept steps with a value (None: fewer than ``MIN_STEPS``, or the
    work does not vary)."""
    used = np.array([v is not None for v in values], dtype=bool) & kept
    if int(used.sum()) < MIN_STEPS:
        return None
    x = np.array([v for v, u in zip(values, used, strict=True) if u], dtype=np.float64)
    if x.min() == x.max():
        return None
    y, c = dur[used].astype(np.float64), copy[used].astype(np.float64)
    r, slope = _line(x, y - c)
    r_with, _ = _line(x, y)
    copy_slope = _line(x, c)[1] if c.any() else None
    spread = _spread([int(v) for v in x])
    varied = spread is not None and spread > MIN_SPREAD
    follows = varied and r is not None and r >= FOLLOW_R
    cost = varied and not follows and r_with is not None and r_with >= FOLLOW_R
    return _Fit(r, slope, r_with, copy_slope, follows, cost)


def _line(x: np.ndarray, y: np.ndarray) -> tuple[float | None, float]:
    """Pearson r (None when ``y`` is constant) and least-squares slope of ``y`` on ``x``
    (``x`` varies)."""
    xc, yc = x - x.mean(), y - y.mean()
    sxy, sxx, syy = float((xc * yc).sum()), float((xc * xc).sum()), float((yc * yc).sum())
    return (sxy / float(np.sqrt(sxx * syy)) if syy > 0 else None), sxy / sxx


def _lagged(values: list[Any], order: I64) -> list[Any]:
    """Per step, the value of the step before it in time (``order``: steps by start); the
    first step's is unknown (copied before the trace)."""
    out: list[Any] = [None] * len(values)
    for prev, k in zip(order[:-1].tolist(), order[1:].tolist(), strict=True):
        out[k] = values[prev]
    return out


def _spread(x: list[int]) -> float | None:
    """``(max - min) / mean`` of the work sizes ``x`` (sizes are >= 0, so the mean is 0 only
    when all are: None then, and without any)."""
    mean = float(np.mean(x)) if x else 0.0
    return (max(x) - min(x)) / mean if mean > 0 else None
