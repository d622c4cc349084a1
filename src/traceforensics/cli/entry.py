"""The console script (``tf``, ``traceforensics``): a ``tf analyze`` of a Kineto file starts
reading it first (``ingest.kineto.early``, before anything else is imported); then a repeat
``tf analyze TRACE --json`` is answered from ``cli.replay`` (the standard library alone: no
polars, no analysis imported), anything else runs through the click commands of ``cli.main``,
imported while the file is read."""

from __future__ import annotations

import gc
import sys
from pathlib import Path


def main() -> None:
    # no collection while the commands are imported: resumed when they are (``startup_done``)
    gc.disable()
    scanning = _scan_early(sys.argv[1:])
    from traceforensics.cli import replay

    if replay.serve(sys.argv[1:]):
        if scanning:  # (rare: a replayed run has its session cached, and then none is started)
            from traceforensics.ingest.kineto import early

            early.stop()
        return
    from traceforensics.cli.main import main as run

    run()


def _scan_early(argv: list[str]) -> bool:
    """Start the early scan of the Kineto file a ``tf analyze`` loads: the first argument after
    the command named like one (``.json``, ``.json.gz``); whether one was asked for. A wrong
    guess (an option's value, ``--monitor m.json``) costs the other core's time: the load takes
    a scan of the very file it reads alone, and stops the child of another. None (False) when
    the load will read the file's cached session instead."""
    if not argv or argv[0] != "analyze":
        return False
    from traceforensics.ingest.detect import KINETO_SUFFIXES

    named = (a for a in argv[1:] if a.endswith(KINETO_SUFFIXES) and not a.startswith("-"))
    path = next(named, None)
    if path is None:
        return False
    from traceforensics.cache_keys import session_entry, session_saved
    from traceforensics.ingest.kineto import early

    try:
        if "--no-cache" not in argv and session_saved(session_entry(Path(path))):
            return False
    except Exception:  # a path that cannot be read (a symlink loop): the command says why
        return False
    early.start(Path(path))
    return True
