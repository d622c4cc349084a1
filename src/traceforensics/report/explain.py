"""What a cause, finding category or diagnostic code means, as data (``explanation``) and as
``tf explain``'s lines (``explanation_lines``): the command and ``tf mcp``'s ``explain`` tool
say the same words from one place.

A category's entry (``analysis.findings.glossary``) has what it means, how it is detected and
what to do in two programs' terms (``remedies``: the generic CUDA wording and PyTorch's); a
diagnostic code's entry (what a trace is or cannot show) has one thing to do. An unknown id is
an ``InputError`` that lists every id.
"""

from __future__ import annotations

from typing import Any, Final

from traceforensics.analysis.findings.glossary import DIAGNOSTIC_GLOSSARY, GLOSSARY
from traceforensics.analysis.findings.remedies import remedy
from traceforensics.analysis.idle.causes import CAUSES
from traceforensics.analysis.program import Program
from traceforensics.model.errors import InputError

#: The programs whose wording an explanation shows (the others are in ``remedies``).
SHOWN: Final = (
    ("generic", Program("cuda", "unknown", "")),
    ("PyTorch", Program("pytorch", "nvidia", "")),
)
#: Where the details of each kind of id are written.
DETAILS: Final = {
    "category": "docs/causes.md (idle causes), docs/findings.md (estimates)",
    "diagnostic": "docs/json-output.md (diagnostics)",
}


def explanation_index() -> list[dict[str, str]]:
    """Every id ``explanation`` knows, in order (categories, then diagnostic codes): ``id``,
    ``kind`` (``category`` or ``diagnostic``) and ``meaning``."""
    return [
        *({"id": k, "kind": "category", "meaning": e.meaning} for k, e in GLOSSARY.items()),
        *(
            {"id": k, "kind": "diagnostic", "meaning": e.meaning}
            for k, e in DIAGNOSTIC_GLOSSARY.items()
        ),
    ]


def explanation(name: str) -> dict[str, Any]:
    """The entry of one id (case and surrounding spaces ignored): ``id``, ``kind``,
    ``idle_cause`` (whether it is a cause of idle time), ``meaning``, ``detected``,
    ``what_to_do`` (program label -> advice; a diagnostic code: ``{"any": ...}``) and
    ``details`` (the docs that hold the rules)."""
    key = name.strip().lower()
    diag = DIAGNOSTIC_GLOSSARY.get(key)
    if diag is not None:
        return {
            "id": key,
            "kind": "diagnostic",
            "idle_cause": False,
            "meaning": diag.meaning,
            "detected": diag.detection,
            "what_to_do": {"any": diag.todo},
            "details": DETAILS["diagnostic"],
        }
    entry = GLOSSARY.get(key)
    if entry is None:
        every = ", ".join([*GLOSSARY, *DIAGNOSTIC_GLOSSARY])
        raise InputError(f"{name!r}: not a cause or finding category; pass one of {every}")
    return {
        "id": key,
        "kind": "category",
        "idle_cause": key in CAUSES,
        "meaning": entry.meaning,
        "detected": entry.detection,
        "what_to_do": {label: remedy(key, program) for label, program in SHOWN},
        "details": DETAILS["category"],
    }


def explanation_lines(entry: dict[str, Any]) -> list[str]:
    """``tf explain ID``'s lines for one ``explanation`` entry."""
    todo: dict[str, str] = entry["what_to_do"]
    advice = (
        [f"  what to do: {todo['any']}"]
        if entry["kind"] == "diagnostic"
        else [f"  what to do ({label}): {text}" for label, text in todo.items()]
    )
    return [
        f"{entry['id']}: {entry['meaning']}",
        f"  detected: {entry['detected']}",
        *advice,
        f"  details: {entry['details']}",
    ]
