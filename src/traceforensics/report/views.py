"""The answers of ``tf mcp``'s trace tools: views of one ``traceforensics.analysis/1``
document, cut to fit a model's context (``report.views_fit``).

Every field keeps its name and value from ``tf analyze --json`` (docs/json-output.md): a view
is a subset of that document, never a new figure. What a view leaves out is named in its
``more`` list, with the tool call (``arguments``: the path and options of this analysis) or
the command that has it. ``verdict`` is the report's verdict, one line per device or, for a
multi-rank job, the job's verdict first (``report.terminal.headline_lines``).

Each view is a plain function of the document: ``analysis_view`` (verdict, top findings,
devices), ``findings_view`` (one category or all, evidence cut), ``gaps_view`` (the largest
gaps, without their evidence), ``gap_view`` (one gap whole), ``kernels_view`` (short kernels,
MFU, op families) and ``ranks_view`` (straggler and per-rank waits).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Final

from traceforensics.analysis.cause_table import ranked_causes
from traceforensics.analysis.findings.results import CATEGORIES
from traceforensics.analysis.options import DEFAULTS
from traceforensics.model.errors import InputError
from traceforensics.report.views_fit import BUDGET_CHARS, cut, fit, pointer

#: How much of each list a view shows unless the call asks for more (one definition: the
#: tools' schemas quote these).
SHOWN: Final = {
    "findings": 5,  # analyze: the top findings (findings(): all, up to "findings_all")
    "findings_all": 30,
    "evidence": 3,  # evidence events per finding
    "devices": 16,
    "gaps": DEFAULTS.idle.top_gaps,  # (the analysis keeps as many: one analysis answers)
    "kernels": DEFAULTS.kernels.top,
    "ranks": 32,  # per-rank rows
    "steps": 20,  # per-step rows of a job
}
#: A device's fields in a view (the rest: ``tf analyze --json``).
_DEVICE_FIELDS: Final[tuple[str, ...]] = (
    "rank", "device", "name", "window_kind", "window_ns", "busy_ns", "idle_ns",
    "busy_fraction", "top_cause", "n_gaps", "comm_ns", "exposed_comm_ns", "copy_ns",
    "exposed_copy_ns", "mfu", "kernel_count", "stream_count",
)  # fmt: skip
#: A per-rank row's fields in ``ranks_view``.
_RANK_FIELDS: Final[tuple[str, ...]] = (
    "rank", "device", "step_time_ns_median", "steps", "window_ns", "busy_ns", "idle_ns",
    "top_cause", "comm_ns", "comm_wait_ns", "last_arrivals", "waiting_for_rank",
    "wait_for_straggler_ns", "waits_most_for_rank", "waits_most_for_ns", "mfu",
)  # fmt: skip


@dataclass(frozen=True)
class Where:
    """Where a view's analysis came from: ``arguments`` of a tool call that repeats it (path
    and options) and ``command``, the ``tf analyze ... --json`` run whose JSON has it all."""

    arguments: dict[str, Any] = field(default_factory=dict)
    command: str = "tf analyze PATH --json"

    def call(self, tool: str, **extra: Any) -> dict[str, Any]:
        return {"tool": tool, "arguments": self.arguments | extra}


def _head(doc: dict[str, Any]) -> dict[str, Any]:
    return {
        "schema": doc.get("schema"),
        "inputs": [i.get("path") for i in doc.get("inputs", [])],
        "source_format": doc.get("source_format"),
        "range": doc.get("range"),
    }


def _notes(doc: dict[str, Any]) -> dict[str, Any]:
    return {"warnings": doc.get("warnings", []), "diagnostics": doc.get("diagnostics", [])}


def _nonzero(causes: dict[str, int]) -> dict[str, int]:
    """Causes with time, largest first (``ranked_causes``: the report's one ranking); a view
    drops the zeros the JSON lists."""
    return dict(ranked_causes(causes))


def _device(d: dict[str, Any]) -> dict[str, Any]:
    out: dict[str, Any] = {k: d[k] for k in _DEVICE_FIELDS if k in d}
    out["idle_by_cause"] = _nonzero(d.get("idle_by_cause") or {})
    return out


def _finding(f: dict[str, Any], i: int, more: list[dict[str, Any]], where: Where) -> dict[str, Any]:
    out = dict(f)
    out["evidence"] = cut(
        list(f.get("evidence") or []),
        SHOWN["evidence"],
        f"findings[{i}].evidence",
        more,
        command=where.command,
    )
    return out


def analysis_view(doc: dict[str, Any], verdict: list[str], where: Where) -> dict[str, Any]:
    """The verdict, the top findings (largest loss first, with remedies and a few evidence
    events), the devices and the program; the rest pointed to."""
    more: list[dict[str, Any]] = []
    findings = cut(
        doc.get("findings", []), SHOWN["findings"], "findings", more, **where.call("findings")
    )
    devices = cut(doc.get("devices", []), SHOWN["devices"], "devices", more, command=where.command)
    out = {
        "verdict": verdict,
        "findings": [_finding(f, i, more, where) for i, f in enumerate(findings)],
        "devices": [_device(d) for d in devices],
        "program": doc.get("program"),
        "n_gaps_listed": len(doc.get("gaps", [])),
        **_head(doc),
        **_notes(doc),
        "more": more,
    }
    if doc.get("gaps"):
        more.append(pointer("gaps", 0, len(doc["gaps"]), **where.call("gaps")))
    return fit(out, where.command)


def findings_view(doc: dict[str, Any], category: str | None, where: Where) -> dict[str, Any]:
    """The findings of ``category`` (every category when None), largest loss first, each with
    its remedy and first evidence events. An unknown category is an ``InputError``."""
    if category is not None and category not in CATEGORIES:
        raise InputError(
            f"category {category!r}: not a finding category; pass one of {', '.join(CATEGORIES)}"
        )
    more: list[dict[str, Any]] = []
    chosen = [f for f in doc.get("findings", []) if category is None or f["category"] == category]
    # (the evidence pointers name each finding's place in the whole list)
    index = {id(f): i for i, f in enumerate(doc.get("findings", []))}
    shown = cut(chosen, SHOWN["findings_all"], "findings", more, command=where.command)
    out = {
        "category": category,
        "total": len(chosen),
        "findings": [_finding(f, index[id(f)], more, where) for f in shown],
        **_head(doc),
        **_notes(doc),
        "more": more,
    }
    return fit(out, where.command)


def gaps_view(doc: dict[str, Any], top: int, where: Where, start: int = 0) -> dict[str, Any]:
    """The idle gaps from the ``start``-th largest, ``top`` of them (``index``: the gap's
    place for ``gap``), each with its causes (nonzero, largest first) and how many evidence
    events it has. ``gaps_total``: the gaps of every device (``devices[].n_gaps``), of which
    the analysis lists the largest (``gaps_listed``)."""
    more: list[dict[str, Any]] = []
    gaps = doc.get("gaps", [])
    total = sum(int(d.get("n_gaps") or 0) for d in doc.get("devices", []))
    rows = [
        {k: g[k] for k in ("rank", "device", "start_ns", "dur_ns") if k in g}
        | {
            "index": start + i,
            "causes": _nonzero(g.get("causes") or {}),
            "evidence_events": len(g.get("evidence") or []),
        }
        for i, g in enumerate(gaps[start : start + top])
    ]
    out = {
        "gaps_total": total,
        "gaps_listed": len(gaps),
        "gaps": rows,
        **_head(doc),
        **_notes(doc),
        "more": more,
    }
    fit(out, where.command, BUDGET_CHARS - 600)  # (room for the two pointers below)
    out["more"] = [m for m in out["more"] if m["what"] != "gaps"]
    shown = len(out["gaps"])
    if start + shown < max(total, len(gaps)):  # the next gaps: the same call from there on
        nxt = where.call("gaps", start=start + shown, top=top)
        out["more"].append(pointer("gaps", shown, max(total, len(gaps)) - start, **nxt))
    if shown:
        out["more"].append(pointer("gaps[*].evidence", 0, shown, **where.call("gap", index=start)))
    return out


def gap_view(doc: dict[str, Any], index: int, where: Where) -> dict[str, Any]:
    """One gap as ``tf analyze --json`` lists it: its causes and every evidence event. An
    index past the listed gaps is an ``InputError`` naming how many there are."""
    gaps = doc.get("gaps", [])
    if not 0 <= index < len(gaps):
        raise InputError(
            f"gap {index}: the analysis lists {len(gaps)} gap(s) (index 0 to {len(gaps) - 1}); "
            "list them with the gaps tool"
            if gaps
            else f"gap {index}: the analysis lists no idle gap"
        )
    out = {
        "index": index,
        "gaps_listed": len(gaps),
        "gap": gaps[index],
        **_head(doc),
        **_notes(doc),
        "more": [],
    }
    return fit(out, where.command)


def kernels_view(doc: dict[str, Any], top: int, where: Where) -> dict[str, Any]:
    """Short kernels (summary and the ``top`` groups by time to give back), MFU per device
    and the op families (``top`` by kernel time), the longest kernels of each device."""
    more: list[dict[str, Any]] = []
    mfu = doc.get("mfu") or {}
    devices = cut(
        doc.get("devices", []), SHOWN["devices"], "top_kernels", more, command=where.command
    )
    families = sorted(doc.get("op_families", []), key=lambda f: -(f.get("kernel_ns") or 0))
    out = {
        "short_kernel_summary": doc.get("short_kernel_summary"),
        "short_kernels": cut(
            doc.get("short_kernels", []), top, "short_kernels", more, command=where.command
        ),
        "mfu": cut(
            list(mfu.get("devices", [])),
            SHOWN["devices"],
            "mfu.devices",
            more,
            command=where.command,
        ),
        "op_families": cut(families, top, "op_families", more, command=where.command),
        "top_kernels": [_top_kernels(d, top, i, more, where) for i, d in enumerate(devices)],
        **_head(doc),
        **_notes(doc),
        "more": more,
    }
    return fit(out, where.command)


def _top_kernels(
    d: dict[str, Any], top: int, i: int, more: list[dict[str, Any]], where: Where
) -> dict[str, Any]:
    """One device's longest kernels, the first ``top``."""
    rows = list(d.get("top_kernels") or [])
    kernels = cut(rows, top, f"top_kernels[{i}].kernels", more, command=where.command)
    return {"rank": d.get("rank"), "device": d.get("device"), "kernels": kernels}


def ranks_view(doc: dict[str, Any], verdict: list[str], where: Where) -> dict[str, Any]:
    """The job's verdict, its straggler (the rank the others wait for, and why), each rank's
    figures and waits, the per-step last arrivals and the notes on how waits were matched."""
    more: list[dict[str, Any]] = []
    ranks = dict(doc.get("ranks") or {})
    per_rank = [
        {k: r[k] for k in _RANK_FIELDS if k in r}
        | {"idle_by_cause": _nonzero(r.get("idle_by_cause") or {})}
        for r in ranks.get("per_rank", [])
    ]
    ranks["per_rank"] = cut(per_rank, SHOWN["ranks"], "ranks.per_rank", more, command=where.command)
    ranks["steps"] = cut(
        list(ranks.get("steps") or []), SHOWN["steps"], "ranks.steps", more, command=where.command
    )
    out = {"verdict": verdict, "ranks": ranks, **_head(doc), **_notes(doc), "more": more}
    return fit(out, where.command)
