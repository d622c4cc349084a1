"""The console script (``tf``, ``traceforensics``): a repeat ``tf analyze TRACE --json`` from
``cli.replay`` (the standard library alone: no polars, no analysis imported), anything else
through the click commands of ``cli.main``; a ``tf analyze`` of a Kineto file starts reading it
first (``ingest.kineto.early``), while the commands are imported. A command that ran ends the
process without the interpreter's teardown (``cli.main.end_process``)."""

from __future__ import annotations

import gc
import sys
from pathlib import Path

from traceforensics.cli import replay


def main() -> None:
    if replay.serve(sys.argv[1:]):
        return
    # no collection while the commands are imported: resumed when they are (``startup_done``)
    gc.disable()
    _scan_early(sys.argv[1:])
    from traceforensics.cli.main import end_process
    from traceforensics.cli.main import main as run

    code: int | None = None  # the exit code of a command that ended (None: it raised)
    try:
        run()
        code = 0
    except SystemExit as exc:
        if exc.code is None or type(exc.code) is int:
            code = exc.code or 0
        raise
    finally:
        if code is not None:
            end_process(code)


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
    from traceforensics.cache_keys import session_entry, session_saved

    try:
        if "--no-cache" not in argv and session_saved(session_entry(Path(path))):
            return  # (a repeat run: ``early`` is not even imported)
    except Exception:  # a path that cannot be read (a symlink loop): the command says why
        return
    from traceforensics.ingest.kineto import early

    early.start(Path(path))
