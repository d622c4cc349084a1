"""The figures a Markdown report of ``tf analyze`` links (``--markdown``, ``--report X.md``)."""

from __future__ import annotations

import os
from pathlib import Path

from traceforensics.analysis.pipeline import Analysis
from traceforensics.model.errors import InputError


def figure_links(
    result: Analysis, md: Path, written: dict[str, Path], beside: bool
) -> list[tuple[str, str]]:
    """(caption, path relative to the Markdown file) of the figures it links: those ``--plot``
    wrote in this run, else for a ``.md`` report its own, written beside it as ``<stem>.png``,
    ``<stem>.timeline.png``, ... (figures with nothing to draw are left out)."""
    from traceforensics.report.plots import caption, has_content, write_figures

    if not written and beside and result.devices:
        try:
            written = write_figures(result, md.with_suffix(".png"), only_content=True)
        except InputError:  # no matplotlib: the report's tables still tell it all
            return []
    return [
        (caption(name), os.path.relpath(path, md.parent))
        for name, path in written.items()
        if has_content(name, result)
    ]
