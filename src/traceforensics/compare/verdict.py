"""The diff's answer in one sentence: what changed most, and did the run get faster?

**Parts.** The job's time splits into busy time (``busy``) and idle time by cause
(``idle.<cause>``): per step when both sides have steps, else window totals. A part **moved**
when its change is beyond noise (``part_direction``): the noise rule of ``noise`` when both
sides have at least 3 steps; without it (fewer steps, or none) the change must exceed
``STEP_PCT`` % of its BEFORE value, ``RESOLUTION_NS`` and ``MATERIAL_PCT`` % of BEFORE's device
time (busy + idle), so that a 0.3 µs shift of a 5 µs cause is not claimed as a change.

**Lead.** The sentence leads with the part that moved most (absolute ns), busy or idle, so a
kernel that got 7x slower leads, not a 6 % shift of a tiny idle cause (issue 44). When no part
moved it says so and claims no change.

**Outcome** follows the job's median step time, or without step times on a side the wall time
of the device (``window``: the longest device window, first to last GPU work), judged by
``direction`` (the noise rule, else ``STEP_PCT`` % and ``RESOLUTION_NS``):

- ``worked``: it shrank beyond noise;
- ``worse``: it grew beyond noise;
- ``mixed``: it did not move, but parts moved in opposite directions (time moved between them);
- ``no_effect``: it did not move, and no part moved or all moved the same way.

The targeted cause (``targeted_cause``) stays the idle cause whose time changed most, either
way. The sentence ends with AFTER's largest loss: its first finding.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from traceforensics.compare.deltas import DeviceDiff, FigureDelta
from traceforensics.compare.words import fmt_change, fmt_value

#: A change (%) counted as none when the noise cannot be judged.
STEP_PCT = 2.0
#: Without a noise test, a part must also move by this share (%) of BEFORE's device time.
MATERIAL_PCT = 1.0
#: The finest time step (ns): Kineto's clock. Smaller changes are never claimed.
RESOLUTION_NS = 1_000.0
#: A rise of this factor or more is also written as one (``×7.4``).
FACTOR_FROM = 2.0
_OUTCOME_WORDS = {
    "worked": "the change worked",
    "worse": "the change made it worse",
    "mixed": "the {basis} did not change measurably",
    "no_effect": "no measurable effect",
}


@dataclass(frozen=True)
class Verdict:
    """``outcome`` (module doc), the targeted cause, AFTER's first finding, the sentence, the
    sides read only in part (``partial_sides``), the parts that moved beyond noise (largest
    first: ``moved[0]`` leads) and what decided the outcome (``basis``)."""

    outcome: str
    targeted: str | None
    text: str
    largest_loss: Mapping[str, Any] | None
    partial_sides: list[str] = field(default_factory=list)
    moved: list[FigureDelta] = field(default_factory=list)
    basis: str | None = None

    @property
    def leading(self) -> FigureDelta | None:
        return self.moved[0] if self.moved else None

    def to_json(self) -> dict[str, Any]:
        lead = self.leading
        return {
            "text": self.text,
            "outcome": self.outcome,
            "targeted_cause": self.targeted,
            "largest_loss_after": None if self.largest_loss is None else dict(self.largest_loss),
            "partial_sides": self.partial_sides,
            "leading_change": None if lead is None else _lead_json(lead),
            "changes_beyond_noise": [d.figure for d in self.moved],
            "outcome_basis": self.basis,
        }


def _lead_json(d: FigureDelta) -> dict[str, Any]:
    out = {k: v for k, v in d.to_json().items() if k in ("before", "after", "delta", "unit")}
    ratio = _ratio(d)
    return {
        "figure": d.figure,
        **out,
        "delta_pct": None if d.delta_pct is None else round(d.delta_pct, 2),
        "ratio": None if ratio is None else round(ratio, 4),
    }


def direction(d: FigureDelta, tolerance_pct: float, floor_ns: float = 0.0) -> int:
    """-1, 0 or +1: the figure's change beyond noise; when the noise is unknown, beyond
    ``tolerance_pct`` % of BEFORE and beyond ``floor_ns`` (times only). 0 when a side is
    unknown."""
    delta, pct = d.delta, d.delta_pct
    if delta is None or delta == 0 or d.within_noise is True:
        return 0
    if d.within_noise is None:
        if pct is not None and abs(pct) <= tolerance_pct:
            return 0
        if d.unit != "fraction" and abs(delta) <= floor_ns:
            return 0
    return 1 if delta > 0 else -1


def part_direction(d: FigureDelta, device_time: float | None) -> int:
    """A part's change beyond noise (module doc, "Parts"); ``device_time``: BEFORE's busy +
    idle, the base of ``MATERIAL_PCT``."""
    floor = max(RESOLUTION_NS, MATERIAL_PCT / 100 * (device_time or 0.0))
    return direction(d, STEP_PCT, floor)


def moved_parts(job: DeviceDiff) -> list[FigureDelta]:
    """The parts (``busy``, ``idle.<cause>``) that moved beyond noise, largest change first
    (ties in report order)."""
    busy, idle = job.figures.get("busy"), job.figures.get("idle")
    known = [f.before for f in (busy, idle) if f is not None and f.before is not None]
    device_time = sum(known) if known else None
    parts = [d for n, d in job.figures.items() if n == "busy" or n.startswith("idle.")]
    moved = [d for d in parts if part_direction(d, device_time) != 0]
    return sorted(moved, key=lambda d: -abs(d.delta or 0.0))


def targeted_cause(job: DeviceDiff) -> str | None:
    """The idle cause whose time changed most (absolute change; ties in report order)."""
    best, size = None, 0.0
    for name, d in job.figures.items():
        if name.startswith("idle.") and d.delta is not None and abs(d.delta) > size:
            best, size = name.removeprefix("idle."), abs(d.delta)
    return best


def build_verdict(
    job: DeviceDiff,
    after_findings: Sequence[Mapping[str, Any]],
    partial: Sequence[str] = (),
    window: FigureDelta | None = None,
) -> Verdict:
    """The verdict of the job's figures and AFTER's findings (module doc). ``partial``: the
    sides (``"before"``, ``"after"``) read only in part, named at the end of the sentence;
    ``window``: the wall time of the device on both sides, the outcome's basis without step
    times."""
    moved = moved_parts(job)
    step = job.figures.get("step_time")
    basis, whole = _basis(step, window)
    parts = [part_text(moved[0]) if moved else "no busy or idle time changed beyond noise"]
    step_dir = 0
    if basis is not None and whole is not None:
        step_dir = direction(whole, STEP_PCT, RESOLUTION_NS)
        parts.append(_whole_text(basis, whole))
    outcome = _outcome(step_dir, moved)
    text = f"{', '.join(parts)}: {_OUTCOME_WORDS[outcome].format(basis=_noun(basis))}"
    text += _why_not(outcome, moved, basis)
    loss = _largest_loss(after_findings, job.steps_after)
    if loss is not None:
        text += f"; the largest loss is now {loss['category']} ({loss['text']} to give back)"
    text += "."
    if partial:
        names = " and ".join(side.upper() for side in partial)
        text += (
            f" {names} {'was' if len(partial) == 1 else 'were'} read only in part (see the "
            "warnings): the comparison covers less than the runs."
        )
    return Verdict(outcome, targeted_cause(job), text, loss, list(partial), moved, basis)


def _basis(
    step: FigureDelta | None, window: FigureDelta | None
) -> tuple[str | None, FigureDelta | None]:
    """What decides the outcome: the median step when both sides have one, else the window."""
    if step is not None and step.delta is not None:
        return "step_time", step
    if window is not None and window.delta is not None and (window.before or window.after):
        return "window", window
    return None, None


def _noun(basis: str | None) -> str:
    return "wall time of the device" if basis == "window" else "step time"


def part_label(d: FigureDelta) -> str:
    """``busy time`` or ``data_loading idle``."""
    return "busy time" if d.figure == "busy" else f"{d.figure.removeprefix('idle.')} idle"


def _ratio(d: FigureDelta) -> float | None:
    if d.before is None or d.after is None or d.before <= 0:
        return None
    return d.after / d.before


def part_text(d: FigureDelta) -> str:
    """``busy time +645%, ×7.4 (78.60 → 585.40 ms)``; ``data_loading idle −99.0% (...)``."""
    change, ratio = fmt_change(d), _ratio(d)
    if ratio is not None and ratio >= FACTOR_FROM:
        pct, _, rest = change.partition(" ")
        change = f"{pct}, ×{ratio:.1f} {rest}"
    return f"{part_label(d)} {change}"


def _whole_text(basis: str, d: FigureDelta) -> str:
    if basis == "window":
        lead, _, pair = fmt_change(d).partition(" (")
        return (
            f"wall time {lead} ({pair.removesuffix(')')}; no step times on a side: the "
            "device's window, first to last GPU work)"
        )
    noisy = " (within step-to-step noise)" if d.within_noise else ""
    return f"step time {fmt_change(d)}{noisy}"


def _outcome(step_dir: int, moved: Sequence[FigureDelta]) -> str:
    if step_dir < 0:
        return "worked"
    if step_dir > 0:
        return "worse"
    signs = {1 if (d.delta or 0) > 0 else -1 for d in moved}
    return "mixed" if len(signs) == 2 else "no_effect"


def _why_not(outcome: str, moved: Sequence[FigureDelta], basis: str | None) -> str:
    """Why the whole did not move although parts did: which rose and which fell."""
    if outcome == "mixed":
        rose = next(d for d in moved if (d.delta or 0) > 0)
        fell = next(d for d in moved if (d.delta or 0) < 0)
        return f": {part_label(rose)} rose while {part_label(fell)} fell"
    if outcome == "no_effect" and moved and basis is not None:
        way = "rose" if (moved[0].delta or 0) > 0 else "fell"
        return f" on the {_noun(basis)} although {part_label(moved[0])} {way}"
    return ""


def _largest_loss(findings: Sequence[Mapping[str, Any]], steps_after: int) -> dict[str, Any] | None:
    """AFTER's first finding: category, device, ``recoverable_ns`` (total) and its text (per
    step when AFTER has steps)."""
    if not findings:
        return None
    f = findings[0]
    ns = int(f.get("recoverable_ns") or 0)
    per_step = ns / steps_after if steps_after else None
    text = fmt_value(per_step, "ns/step") if per_step is not None else fmt_value(ns, "ns")
    return {
        "category": f["category"],
        "rank": f.get("rank"),
        "device": f.get("device"),
        "recoverable_ns": ns,
        "text": text,
    }
