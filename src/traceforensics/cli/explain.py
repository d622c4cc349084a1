"""``tf explain [ID]``: what a cause, finding category or diagnostic code means, how it is
detected, what to do (the words: ``report.explain``)."""

from __future__ import annotations

import click

from traceforensics.report.explain import explanation, explanation_index, explanation_lines


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
        rows = [r for r in explanation_index() if r["kind"] == "category"]
        width = max(len(r["id"]) for r in rows)
        for r in rows:
            click.echo(f"{r['id']:<{width}}  {r['meaning']}")
        return
    for line in explanation_lines(explanation(category)):
        click.echo(line)
