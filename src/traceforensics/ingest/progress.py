"""Progress of a long load, as one-line phase texts (``reading trace.json.gz: 120 of 300 MB``).

Ingesters call ``report(text)`` at each phase; nothing happens unless a listener is set (the
CLI sets one that draws on a terminal's stderr, ``report/progress.py``). Library use stays
silent. The listener is process-wide: one load at a time reports.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path

#: The current listener (a stack: ``listening`` restores the previous one).
_LISTENERS: list[Callable[[str], None]] = []


def report(text: str) -> None:
    """Tell the listener, if any, what the load is doing now."""
    if _LISTENERS:
        _LISTENERS[-1](text)


def report_read(path: Path, read: list[int], events: int) -> None:
    """The progress line of a file being read: ``read`` is [bytes of the file read, its
    size], ``events`` how many were decoded so far."""
    report(f"reading {path.name}: {read[0] / 1e6:.0f} of {read[1] / 1e6:.0f} MB, {events:,} events")


@contextmanager
def listening(fn: Callable[[str], None]) -> Iterator[None]:
    """Send every ``report`` to ``fn`` inside the ``with`` block."""
    _LISTENERS.append(fn)
    try:
        yield
    finally:
        _LISTENERS.pop()
