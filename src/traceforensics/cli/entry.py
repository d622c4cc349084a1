"""The console script (``tf``, ``traceforensics``): a repeat ``tf analyze TRACE --json`` from
``cli.replay`` (the standard library alone: no polars, no analysis imported), anything else
through the click commands of ``cli.main``."""

from __future__ import annotations

import sys

from traceforensics.cli import replay


def main() -> None:
    if replay.serve(sys.argv[1:]):
        return
    from traceforensics.cli.main import main as run

    run()
