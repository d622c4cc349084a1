"""The answers of ``tf mcp``'s run tools: a comparison (``diff_view``, of a
``traceforensics.diff/1`` document) and the stored runs (``history_view``, of a
``traceforensics.history/1`` or ``traceforensics.trend/1`` object), cut to fit a model's
context (``report.views_fit``) with the rest pointed to in ``more``.

A figure keeps the fields of ``tf diff --json`` that say what changed (``before``, ``after``,
``delta``, ``delta_pct``, ``unit``, ``share_before``, ``share_after``, ``within_noise``); its
noise test and basis are in the full document. ``rules`` are the ``--fail-on`` rules checked
against the job's figures, exactly as ``tf diff --fail-on`` checks them (``compare.check_rules``).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Any, Final

from traceforensics.report.views_fit import cut, fit

if TYPE_CHECKING:
    from traceforensics.compare.rules import Check

#: A figure's fields in a view.
_FIGURE_FIELDS: Final = (
    "before", "after", "delta", "delta_pct", "unit", "share_before", "share_after",
    "within_noise",
)  # fmt: skip
#: Rows of each list a comparison shows.
SHOWN_DIFF: Final = {"findings": 10, "kernels": 5, "devices": 8}


def _figure(f: dict[str, Any]) -> dict[str, Any]:
    return {k: f.get(k) for k in _FIGURE_FIELDS}


def _changed(figures: dict[str, dict[str, Any]]) -> dict[str, dict[str, Any]]:
    """The figures that moved beyond step-to-step noise (or have no noise test and moved)."""
    return {
        name: _figure(f)
        for name, f in figures.items()
        if f.get("within_noise") is False or (f.get("within_noise") is None and f.get("delta"))
    }


def check_rows(checks: Sequence[Check]) -> list[dict[str, Any]]:
    """The rules checked: ``rule`` (as written), ``broken``, ``within_noise`` (it crossed its
    threshold inside the noise, so it does not count) and ``line`` (what was measured)."""
    return [
        {"rule": c.rule.text, "broken": c.broken, "within_noise": c.held, "line": c.line}
        for c in checks
    ]


def diff_view(doc: dict[str, Any], checks: Sequence[Check], command: str) -> dict[str, Any]:
    """The verdict, both sides, the job's figures (all, compact), the devices' figures that
    moved, the largest finding and kernel changes and the rules' outcome (``gate``:
    ``failed`` when a rule broke, ``passed`` when none did, None without rules)."""
    more: list[dict[str, Any]] = []
    job = doc.get("job") or {}
    devices = [
        {k: d.get(k) for k in ("rank", "device", "name_before", "name_after")}
        | {"changed": _changed(d.get("figures") or {})}
        for d in doc.get("devices", [])
    ]
    rules = check_rows(checks)
    out = {
        "verdict": doc.get("verdict"),
        "gate": None if not rules else ("failed" if any(r["broken"] for r in rules) else "passed"),
        "rules": rules,
        "job": {name: _figure(f) for name, f in (job.get("figures") or {}).items()},
        "findings": cut(
            doc.get("findings", []), SHOWN_DIFF["findings"], "findings", more, command=command
        ),
        "kernels": cut(
            doc.get("kernels", []), SHOWN_DIFF["kernels"], "kernels", more, command=command
        ),
        "devices": cut(devices, SHOWN_DIFF["devices"], "devices", more, command=command),
        "unmatched": doc.get("unmatched", []),
        "before": doc.get("before"),
        "after": doc.get("after"),
        "schema": doc.get("schema"),
        "warnings": doc.get("warnings", []),
        "more": more,
    }
    return fit(out, command)


def history_view(obj: dict[str, Any], command: str) -> dict[str, Any]:
    """A listing (``runs``, newest first) or a trend (``points``, oldest first) as
    ``tf history --json`` writes it, cut to fit."""
    return fit(dict(obj) | {"more": []}, command)
