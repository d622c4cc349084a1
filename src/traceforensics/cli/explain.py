"""``tf explain [ID]``: what a cause, finding category or diagnostic code means, how it is
detected, what to do."""

from __future__ import annotations

import click

from traceforensics.analysis.findings.glossary import DIAGNOSTIC_GLOSSARY, GLOSSARY
from traceforensics.analysis.findings.remedies import remedy
from traceforensics.analysis.program import Program
from traceforensics.model.errors import InputError

#: The programs whose wording ``explain`` shows (the others are in ``remedies``).
_SHOWN = (
    ("generic", Program("cuda", "unknown", "")),
    ("PyTorch", Program("pytorch", "nvidia", "")),
)


@click.command(
    "explain", short_help="What a cause, finding or diagnostic code means, and what to do."
)
@click.argument("category", required=False)
def explain_command(category: str | None) -> None:
    """Explain a cause, finding category or diagnostic code (e.g. `tf explain host_sync`,
    `tf explain gpu_activity_missing`); no argument lists them all."""
    if category is None:
        # (one line per category: the diagnostic codes are named by the reports that give
        # them, and by the error an unknown id gets)
        width = max(len(c) for c in GLOSSARY)
        for cid, item in GLOSSARY.items():
            click.echo(f"{cid:<{width}}  {item.meaning}")
        return
    key = category.strip().lower()
    diag = DIAGNOSTIC_GLOSSARY.get(key)
    if diag is not None:
        click.echo(f"{key}: {diag.meaning}")
        click.echo(f"  detected: {diag.detection}")
        click.echo(f"  what to do: {diag.todo}")
        click.echo("  details: docs/json-output.md (diagnostics)")
        return
    entry = GLOSSARY.get(key)
    if entry is None:
        every = ", ".join([*GLOSSARY, *DIAGNOSTIC_GLOSSARY])
        raise InputError(f"{category!r}: not a cause or finding category; pass one of {every}")
    click.echo(f"{category.strip().lower()}: {entry.meaning}")
    click.echo(f"  detected: {entry.detection}")
    for label, program in _SHOWN:
        click.echo(f"  what to do ({label}): {remedy(category.strip().lower(), program)}")
    click.echo("  details: docs/causes.md (idle causes), docs/findings.md (estimates)")
