"""How many decode worker processes a big Kineto load may use (``ingest.kineto.parallel``).

A setting apart from the reader, so the CLI turns it on without importing the Kineto reader:
a repeat run that the caches serve never reads a trace, and does not import what reads one.
Off (0) unless ``set_workers(1)`` is called; ``TF_INGEST_WORKERS=0`` keeps it off whatever
was set.
"""

from __future__ import annotations

import os


class _Setting:
    workers = 0


_SETTING = _Setting()


def set_workers(n: int) -> None:
    """Use ``n`` (0 or 1) worker processes for big Kineto files from now on."""
    _SETTING.workers = max(0, min(int(n), 1))


def decode_workers() -> int:
    """The worker processes a big Kineto load may use now (0 or 1)."""
    if os.environ.get("TF_INGEST_WORKERS", "") == "0":
        return 0
    return _SETTING.workers
