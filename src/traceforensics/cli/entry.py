"""The console script (``tf``, ``traceforensics``): a repeat ``tf analyze TRACE --json`` from
the cache (``traceforensics.cache.serve``: the standard library alone, no polars, no analysis
imported), anything else through the click commands of ``cli.main``; a ``tf analyze`` of a
Kineto file starts reading it first (``ingest.kineto.early``), while the commands are
imported."""

from __future__ import annotations

import gc
import sys
from pathlib import Path

from traceforensics import cache


def main() -> None:
    if cache.serve(sys.argv[1:]):
        return
    # no collection while the commands are imported: resumed when they are (``startup_done``)
    gc.disable()
    _scan_early(sys.argv[1:])
    from traceforensics.cli.main import main as run

    run()


def _scan_early(argv: list[str]) -> None:
    """Start the early scan of the Kineto file a ``tf analyze`` loads: the first argument after
    the command named like one (``.json``, ``.json.gz``). A wrong guess (an option's value,
    ``--monitor m.json``) costs the other core's time: the load takes a scan of the very file
    it reads alone, and stops the child of another. None when the load will read the file's
    cached session instead."""
    if not argv or argv[0] != "analyze":
        return
    from traceforensics.ingest.detect import KINETO_SUFFIXES

    named = (a for a in argv[1:] if a.endswith(KINETO_SUFFIXES) and not a.startswith("-"))
    path = next(named, None)
    if path is None:
        return
    try:
        if "--no-cache" not in argv and cache.entry_path("sessions", Path(path)).exists():
            return  # (a repeat run: ``early`` is not even imported)
    except Exception:  # a path that cannot be read (a symlink loop): the command says why
        return
    from traceforensics.ingest.kineto import early

    early.start(Path(path))
