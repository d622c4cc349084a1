"""Two analysis documents compared: ``diff_documents(before, after) -> Diff``.

Both sides are ``traceforensics.analysis/1`` documents (``tf analyze --json``, a stored run), so
a saved run and a fresh trace compare the same way. Devices are matched by (rank, device);
unmatched ones are named (``unmatched``, a warning) and still count in the job's figures. The
result converts to the ``traceforensics.diff/1`` JSON (``to_json``, docs/json-output.md) and to
polars DataFrames (``frames``).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

import polars as pl

from traceforensics._version import __version__
from traceforensics.compare.changes import (
    FindingChange,
    KernelChange,
    finding_changes,
    kernel_changes,
)
from traceforensics.compare.deltas import (
    DeviceDiff,
    FigureDelta,
    device_diff,
    figure_delta,
    side_basis,
)
from traceforensics.compare.figures import (
    Side,
    check_document,
    device_sides,
    figure_names,
    job_side,
)
from traceforensics.compare.frames import diff_frames
from traceforensics.compare.verdict import Verdict, build_verdict

SCHEMA_DIFF = "traceforensics.diff/1"
#: Figures whose noise test judges a finding category other than ``idle.<category>``'s.
_FIGURE_CATEGORY = {"comm.exposed": "exposed_communication"}


@dataclass(frozen=True)
class RunInfo:
    """What one side is: its label (a path, or the stored run it came from) and its document's
    provenance."""

    label: str
    tool_version: str | None
    source_format: str | None
    inputs: list[dict[str, Any]]
    range: dict[str, Any] | None
    window_kind: str | None
    devices: int
    steps: int

    @classmethod
    def of(cls, doc: Mapping[str, Any], label: str, steps: int) -> RunInfo:
        kinds = {d.get("window_kind") for d in doc["devices"]}
        return cls(
            label=label,
            tool_version=doc.get("tool_version"),
            source_format=doc.get("source_format"),
            inputs=list(doc.get("inputs") or []),
            range=doc.get("range"),
            window_kind=kinds.pop() if len(kinds) == 1 else None,
            devices=len(doc["devices"]),
            steps=steps,
        )

    def to_json(self) -> dict[str, Any]:
        return {
            "label": self.label,
            "tool_version": self.tool_version,
            "source_format": self.source_format,
            "inputs": self.inputs,
            "range": self.range,
            "window_kind": self.window_kind,
            "devices": self.devices,
            "steps": self.steps,
        }


@dataclass(frozen=True)
class Diff:
    """The comparison: the job's and each matched device's figures, the findings and kernels
    that changed, the verdict and the warnings (docs/diff.md)."""

    before: RunInfo
    after: RunInfo
    job: DeviceDiff
    devices: list[DeviceDiff]
    unmatched: list[dict[str, Any]]
    findings: list[FindingChange]
    kernels: list[KernelChange]
    verdict: Verdict
    warnings: list[str] = field(default_factory=list)

    def to_json(self) -> dict[str, Any]:
        """The ``traceforensics.diff/1`` object (docs/json-output.md)."""
        return {
            "schema": SCHEMA_DIFF,
            "tool_version": __version__,
            "verdict": self.verdict.to_json(),
            "before": self.before.to_json(),
            "after": self.after.to_json(),
            "job": self.job.to_json(),
            "devices": [d.to_json() for d in self.devices],
            "unmatched": self.unmatched,
            "findings": [f.to_json() for f in self.findings],
            "kernels": [k.to_json() for k in self.kernels],
            "warnings": self.warnings,
        }

    def frames(self) -> dict[str, pl.DataFrame]:
        """``figures`` (one row per scope and figure), ``findings``, ``kernels``."""
        return diff_frames(self.job, self.devices, self.findings, self.kernels)


def diff_documents(
    before: Any, after: Any, before_label: str = "BEFORE", after_label: str = "AFTER"
) -> Diff:
    """Compare two analysis documents (module doc). Raises ``InputError`` naming the label of
    a document that is not ``traceforensics.analysis/1``."""
    b_doc, a_doc = check_document(before, before_label), check_document(after, after_label)
    b_sides = {s.key: s for s in device_sides(b_doc)}
    a_sides = {s.key: s for s in device_sides(a_doc)}
    job_b, job_a = job_side(list(b_sides.values())), job_side(list(a_sides.values()))
    names = figure_names(tuple(dict.fromkeys([*job_a.cause_ids, *job_b.cause_ids])))
    matched = [k for k in a_sides if k in b_sides]
    devices = [device_diff(b_sides[k], a_sides[k], names) for k in matched]
    unmatched = [
        {"rank": k[0], "device": k[1], "side": side}
        for side, own, other in (("before", b_sides, a_sides), ("after", a_sides, b_sides))
        for k in own
        if k is not None and k not in other
    ]
    steps = {(d.rank or 0, d.device or 0): (d.steps_before, d.steps_after) for d in devices}
    noise = {
        (_category(name), d.rank or 0, d.device or 0): f.within_noise
        for d in devices
        for name, f in d.figures.items()
        if name.startswith("idle.") or name in _FIGURE_CATEGORY
    }
    job = device_diff(job_b, job_a, names)
    a_findings = a_doc.get("findings") or []
    return Diff(
        before=RunInfo.of(b_doc, before_label, job_b.n_steps),
        after=RunInfo.of(a_doc, after_label, job_a.n_steps),
        job=job,
        devices=devices,
        unmatched=unmatched,
        findings=finding_changes(b_doc.get("findings") or [], a_findings, steps, noise),
        kernels=kernel_changes(b_doc["devices"], a_doc["devices"], steps),
        verdict=build_verdict(
            job, a_findings, partial_sides(b_doc, a_doc), wall_time(b_sides, a_sides)
        ),
        warnings=_warnings(b_doc, a_doc, unmatched, job),
    )


#: Words of the warnings that say an input was read only in part: a trace cut off mid-write
#: (``ingest.kineto.reader``), rank files left out of a directory (``ingest.ranksets``,
#: ``fanout.plan``). tests/test_campaign43.py checks them against the real warnings.
PARTIAL_MARKS = ("the trace is cut off", "left out")


def side_warnings(doc: Mapping[str, Any]) -> list[str]:
    """The warnings a side's analysis carried (its document's ``warnings``, strings only)."""
    found = doc.get("warnings")
    return [w for w in found if isinstance(w, str)] if isinstance(found, list) else []


def partial_sides(b: Mapping[str, Any], a: Mapping[str, Any]) -> list[str]:
    """``"before"``/``"after"``: the sides whose input was read only in part (``PARTIAL_MARKS``
    in their warnings); the verdict names them."""
    return [
        side
        for side, doc in (("before", b), ("after", a))
        if any(mark in w for w in side_warnings(doc) for mark in PARTIAL_MARKS)
    ]


def wall_time(before: Mapping[Any, Side], after: Mapping[Any, Side]) -> FigureDelta:
    """The wall time of the device on each side: its longest device window (first to last GPU
    work with ``--window device``), ns; the verdict's outcome without step times."""
    b = max((s.window_ns for s in before.values()), default=0)
    a = max((s.window_ns for s in after.values()), default=0)
    return FigureDelta("window", "ns", "total", float(b), float(a))


def _category(figure: str) -> str:
    """The finding category whose noise verdict is this figure's."""
    return _FIGURE_CATEGORY.get(figure) or figure.removeprefix("idle.")


def _warnings(
    b: Mapping[str, Any], a: Mapping[str, Any], unmatched: list[dict[str, Any]], job: DeviceDiff
) -> list[str]:
    """What makes the two sides less comparable than they look; then each side's own warnings
    (a cut trace, lost events, a rank file left out), marked with its side."""
    out = [
        f"rank {u['rank']} GPU {u['device']} is only in {u['side'].upper()}: its figures "
        "count in the job's, not in a device comparison"
        for u in unmatched
    ]
    if b.get("range") != a.get("range"):
        out.append(
            f"the sides cover different parts: BEFORE {b.get('range')}, AFTER {a.get('range')}"
        )
    kinds = [{d.get("window_kind") for d in doc["devices"]} for doc in (b, a)]
    if kinds[0] != kinds[1]:
        out.append("the sides use different windows (--window); shares of the window differ")
    if b.get("tool_version") != a.get("tool_version"):
        out.append(
            f"BEFORE was analysed by traceforensics {b.get('tool_version')}, AFTER by "
            f"{a.get('tool_version')}: rules may differ between versions"
        )
    if job.basis == "total":
        out.append(
            "a side has no steps: figures are window totals (not per step) and no change can be "
            "told from step-to-step noise"
        )
    for side, doc in (("BEFORE", b), ("AFTER", a)):
        out.extend(f"{side}: {w}" for w in side_warnings(doc))
    return out


def analysis_figures(doc: Any, label: str = "analysis") -> dict[str, FigureDelta]:
    """The job's figures of one analysis document (``before`` None): what ``tf analyze
    --fail-on`` checks."""
    sides = device_sides(check_document(doc, label))
    job = job_side(sides)
    basis = side_basis(None, job)
    return {n: figure_delta(None, job, n, basis) for n in figure_names(job.cause_ids)}
