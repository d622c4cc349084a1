"""``tf explain [ID]``: what a cause or finding category means, how it is detected, what to do."""

from __future__ import annotations

import click

from traceforensics.analysis.findings.glossary import GLOSSARY
from traceforensics.analysis.findings.program import Program
from traceforensics.analysis.findings.remedies import remedy
from traceforensics.model.errors import InputError

#: The programs whose wording ``explain`` shows (the others are in ``remedies``).
_SHOWN = (
    ("generic", Program("cuda", "unknown", "")),
    ("PyTorch", Program("pytorch", "nvidia", "")),
)


@click.command("explain", short_help="What a cause or finding category means, and what to do.")
@click.argument("category", required=False)
def explain_command(category: str | None) -> None:
    """Explain a cause or finding category (e.g. `tf explain host_sync`); no argument lists
    them all."""
    if category is None:
        width = max(len(c) for c in GLOSSARY)
        for cid, item in GLOSSARY.items():
            click.echo(f"{cid:<{width}}  {item.meaning}")
        return
    entry = GLOSSARY.get(category.strip().lower())
    if entry is None:
        raise InputError(
            f"{category!r}: not a cause or finding category; pass one of {', '.join(GLOSSARY)}"
        )
    click.echo(f"{category.strip().lower()}: {entry.meaning}")
    click.echo(f"  detected: {entry.detection}")
    for label, program in _SHOWN:
        click.echo(f"  what to do ({label}): {remedy(category.strip().lower(), program)}")
    click.echo("  details: docs/causes.md (idle causes), docs/findings.md (estimates)")
