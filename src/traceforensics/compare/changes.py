"""What happened to the findings and to the kernels between two runs.

Findings are matched by (category, rank, device): a finding only in AFTER ``appeared``, only in
BEFORE ``disappeared``; matched ones ``grew``, ``shrank`` or stayed ``unchanged`` (within
``UNCHANGED_PCT`` of the before value). ``recoverable_ns`` is compared per step when both sides
of the device have steps (the total divided by the device's step count), else as totals.
Matched idle-cause (and exposed-communication) findings carry the noise verdict of their
figure's per-step values (``within_noise``): a finding can grow by its total while its median
step did not change (one slow step).

Kernels come from ``devices[].top_kernels``, the top ``--top`` kernels of each device by total
time: a kernel missing from one side's list is not known to be absent there (it may rank lower),
so that side's value is None and its change is bounded from below by how far its known total
is above the other side's smallest listed total.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from traceforensics.compare.deltas import FigureDelta

#: A matched finding changed by at most this share of its before value is ``unchanged`` (%).
UNCHANGED_PCT = 5.0
#: Kernel changes kept per device, largest first.
TOP_KERNEL_CHANGES = 10

Key = tuple[int, int]


@dataclass(frozen=True)
class FindingChange:
    """One finding category of one device before and after."""

    category: str
    rank: int
    device: int
    change: str
    recoverable: FigureDelta
    title_before: str | None
    title_after: str | None
    minor_after: bool | None
    within_noise: bool | None

    def to_json(self) -> dict[str, Any]:
        return {
            "category": self.category,
            "rank": self.rank,
            "device": self.device,
            "change": self.change,
            "recoverable_ns": self.recoverable.to_json(),
            "title_before": self.title_before,
            "title_after": self.title_after,
            "minor_after": self.minor_after,
            "within_noise": self.within_noise,
        }


@dataclass(frozen=True)
class KernelChange:
    """One kernel of one device: total time before and after (None: not in that top list)."""

    name: str
    rank: int
    device: int
    total: FigureDelta
    count_before: int | None
    count_after: int | None
    magnitude: float

    def to_json(self) -> dict[str, Any]:
        return {
            "name": self.name,
            "rank": self.rank,
            "device": self.device,
            "total_ns": self.total.to_json(),
            "count_before": self.count_before,
            "count_after": self.count_after,
        }


def _per(value: float | None, n: int, per_step: bool) -> float | None:
    return None if value is None else (value / n if per_step else value)


def _delta(figure: str, before: float | None, after: float | None, per_step: bool) -> FigureDelta:
    """A figure per step (the window total over the steps: findings and kernels carry no
    per-step values) or, without steps on a side, as window totals."""
    if per_step:
        return FigureDelta(figure, "ns/step", "window_per_step", before, after)
    return FigureDelta(figure, "ns", "total", before, after)


def finding_changes(
    before: Sequence[Mapping[str, Any]],
    after: Sequence[Mapping[str, Any]],
    steps: Mapping[Key, tuple[int, int]],
    noise_of: Mapping[tuple[str, int, int], bool | None],
) -> list[FindingChange]:
    """Every finding of either side, matched (module doc), largest ``|delta|`` first.
    ``steps``: (steps before, steps after) per device; ``noise_of``: the noise verdict of
    ``idle.<category>`` per (category, rank, device)."""
    b = {(f["category"], int(f["rank"]), int(f["device"])): f for f in before}
    a = {(f["category"], int(f["rank"]), int(f["device"])): f for f in after}
    out: list[FindingChange] = []
    for key in dict.fromkeys([*b, *a]):
        cat, rank, dev = key
        nb, na = steps.get((rank, dev), (0, 0))
        per_step = nb > 0 and na > 0
        fb, fa = b.get(key), a.get(key)
        vb = _per(fb["recoverable_ns"] if fb else 0, nb, per_step)
        va = _per(fa["recoverable_ns"] if fa else 0, na, per_step)
        delta = _delta(f"findings.{cat}", vb, va, per_step)
        out.append(
            FindingChange(
                category=cat,
                rank=rank,
                device=dev,
                change=_change(fb is not None, fa is not None, delta),
                recoverable=delta,
                title_before=fb.get("title") if fb else None,
                title_after=fa.get("title") if fa else None,
                minor_after=bool(fa.get("minor")) if fa else None,
                within_noise=noise_of.get(key) if fb is not None and fa is not None else None,
            )
        )
    out.sort(key=lambda c: -abs(c.recoverable.delta or 0.0))
    return out


def _change(in_before: bool, in_after: bool, d: FigureDelta) -> str:
    if not in_before:
        return "appeared"
    if not in_after:
        return "disappeared"
    pct = d.delta_pct
    if (pct is not None and abs(pct) <= UNCHANGED_PCT) or d.delta == 0:
        return "unchanged"
    return "grew" if (d.delta or 0) > 0 else "shrank"


def kernel_changes(
    before: Sequence[Mapping[str, Any]],
    after: Sequence[Mapping[str, Any]],
    steps: Mapping[Key, tuple[int, int]],
) -> list[KernelChange]:
    """The ``TOP_KERNEL_CHANGES`` kernels whose total time changed most, per matched device
    (module doc); ``before`` and ``after`` are the two documents' ``devices[]`` lists."""
    b_dev = {(int(d["rank"]), int(d["device"])): d for d in before}
    out: list[KernelChange] = []
    for d in after:
        key = (int(d["rank"]), int(d["device"]))
        if key not in b_dev:
            continue
        nb, na = steps.get(key, (0, 0))
        per_step = nb > 0 and na > 0
        tb = {k["name"]: k for k in b_dev[key].get("top_kernels") or []}
        ta = {k["name"]: k for k in d.get("top_kernels") or []}
        floor_b = _per(min((k["total_ns"] for k in tb.values()), default=0), nb, per_step) or 0.0
        floor_a = _per(min((k["total_ns"] for k in ta.values()), default=0), na, per_step) or 0.0
        rows: list[KernelChange] = []
        for name in dict.fromkeys([*tb, *ta]):
            kb, ka = tb.get(name), ta.get(name)
            vb = _per(kb["total_ns"], nb, per_step) if kb else None
            va = _per(ka["total_ns"], na, per_step) if ka else None
            rows.append(
                KernelChange(
                    name, key[0], key[1], _delta("kernel", vb, va, per_step), _count(kb),
                    _count(ka), _magnitude(vb, va, floor_b, floor_a),
                )
            )  # fmt: skip
        rows.sort(key=lambda r: -r.magnitude)
        out += rows[:TOP_KERNEL_CHANGES]
    return out


def _magnitude(vb: float | None, va: float | None, floor_b: float, floor_a: float) -> float:
    """How much a kernel's total changed, or at least changed when it is in one top list only
    (its known total against the other list's smallest: it ranked below that there)."""
    if vb is not None and va is not None:
        return abs(va - vb)
    if vb is None:
        return max((va or 0.0) - floor_b, 0.0)
    return max(vb - floor_a, 0.0)


def _count(k: Mapping[str, Any] | None) -> int | None:
    return None if k is None else int(k.get("count") or 0)
