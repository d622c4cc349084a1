"""The diff's answer in one sentence: did the change work?

The **targeted** cause is the idle cause whose per-step (or total) time changed most, either
way. The **outcome** follows the job's step time (the median step, docs/diff.md):

- ``worked``: the step got faster beyond step-to-step noise;
- ``worse``: the step got slower beyond noise;
- ``mixed``: the step did not change measurably although the targeted cause did (the time
  moved to another cause, or the cause was not on the step's critical path);
- ``no_effect``: neither the step time nor the targeted cause changed beyond noise.

Without per-step values on a side (no steps), the idle share of the window decides instead: a
change of more than ``SHARE_PP`` percentage points counts. When the noise cannot be judged (fewer
than 3 steps), a step-time change within ``STEP_PCT`` % counts as no change. The sentence ends
with AFTER's largest loss: its first finding (largest time to give back).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from traceforensics.compare.deltas import DeviceDiff, FigureDelta
from traceforensics.compare.words import fmt_change, fmt_value

#: Step-time change (%) counted as none when the noise cannot be judged.
STEP_PCT = 2.0
#: Idle-share change (percentage points) counted as none without steps.
SHARE_PP = 1.0
_OUTCOME_WORDS = {
    "worked": "the change worked",
    "worse": "the change made it worse",
    "mixed": "the step time did not change measurably",
    "no_effect": "no measurable effect",
}


@dataclass(frozen=True)
class Verdict:
    """``outcome`` (module doc), the targeted cause, AFTER's first finding, the sentence and
    the sides read only in part (``partial_sides``)."""

    outcome: str
    targeted: str | None
    text: str
    largest_loss: Mapping[str, Any] | None
    partial_sides: list[str] = field(default_factory=list)

    def to_json(self) -> dict[str, Any]:
        return {
            "text": self.text,
            "outcome": self.outcome,
            "targeted_cause": self.targeted,
            "largest_loss_after": None if self.largest_loss is None else dict(self.largest_loss),
            "partial_sides": self.partial_sides,
        }


def direction(d: FigureDelta, tolerance_pct: float) -> int:
    """-1, 0 or +1: the figure's change beyond noise (or beyond ``tolerance_pct`` when the
    noise is unknown); 0 when a side is unknown."""
    delta, pct = d.delta, d.delta_pct
    if delta is None or delta == 0 or d.within_noise is True:
        return 0
    if d.within_noise is None and pct is not None and abs(pct) <= tolerance_pct:
        return 0
    return 1 if delta > 0 else -1


def targeted_cause(job: DeviceDiff) -> str | None:
    """The idle cause whose time changed most (absolute change; ties in report order)."""
    best, size = None, 0.0
    for name, d in job.figures.items():
        if name.startswith("idle.") and d.delta is not None and abs(d.delta) > size:
            best, size = name.removeprefix("idle."), abs(d.delta)
    return best


def build_verdict(
    job: DeviceDiff, after_findings: Sequence[Mapping[str, Any]], partial: Sequence[str] = ()
) -> Verdict:
    """The verdict of the job's figures and AFTER's findings (module doc). ``partial``: the
    sides (``"before"``, ``"after"``) read only in part, named at the end of the sentence."""
    target = targeted_cause(job)
    cause = job.figures.get(f"idle.{target}") if target else None
    step = job.figures.get("step_time")
    parts = []
    if cause is not None:
        noisy = " (within step-to-step noise)" if cause.within_noise else ""
        parts.append(f"{target} idle {fmt_change(cause)}{noisy}")
    if step is not None and step.delta is not None:
        outcome = _outcome(direction(step, STEP_PCT), cause)
        noisy = " (within step-to-step noise)" if step.within_noise else ""
        parts.append(f"step time {fmt_change(step)}{noisy}")
    else:  # no steps on a side: the idle share of the window decides
        idle = job.figures["idle"]
        outcome = _outcome(_share_direction(idle), cause)
        if idle.share_before is not None and idle.share_after is not None:
            parts.append(
                f"idle {100 * idle.share_before:.1f}% → {100 * idle.share_after:.1f}% of the "
                "window (no steps on a side: shares of the window compared)"
            )
    text = ", ".join(parts) or "no idle time and no steps on either side"
    text = f"{text}: {_OUTCOME_WORDS[outcome]}"
    if outcome == "mixed" and cause is not None:
        moved = "fell" if (cause.delta or 0) < 0 else "rose"
        text += f" although {target} idle {moved}"
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
    return Verdict(outcome, target, text, loss, list(partial))


def _outcome(step_dir: int, cause: FigureDelta | None) -> str:
    if step_dir < 0:
        return "worked"
    if step_dir > 0:
        return "worse"
    if cause is not None and direction(cause, STEP_PCT) != 0:
        return "mixed"
    return "no_effect"


def _share_direction(idle: FigureDelta) -> int:
    if idle.share_before is None or idle.share_after is None:
        return 0
    pp = 100 * (idle.share_after - idle.share_before)
    return 0 if abs(pp) <= SHARE_PP else (1 if pp > 0 else -1)


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
