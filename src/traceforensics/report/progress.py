"""Progress on a terminal: after ``delay_s`` seconds, one status line on stderr redrawn in place
(``tf: reading trace.json.gz: 120 of 300 MB (3.2 s)``) until the work ends, then erased.

Shown only when stderr is a terminal and the output is not ``--json``: nothing when piped,
redirected or in CI logs. Phase texts come from ``ingest.progress.report``.
"""

from __future__ import annotations

import sys
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from typing import TextIO

from traceforensics.ingest.progress import listening

#: Seconds of work before the line appears (short loads stay silent).
DELAY_S = 2.0
#: Seconds between redraws.
TICK_S = 0.5


@contextmanager
def progress_line(
    enabled: bool, stream: TextIO | None = None, delay_s: float = DELAY_S
) -> Iterator[None]:
    """Draw the phase texts reported inside the block (see the module docstring)."""
    out = stream if stream is not None else sys.stderr
    if not enabled or not out.isatty():
        yield
        return
    state = {"text": "starting", "drawn": False}
    done = threading.Event()
    t0 = time.monotonic()

    def draw() -> None:
        if done.wait(delay_s):
            return
        while not done.is_set():
            line = f"tf: {state['text']} ({time.monotonic() - t0:.1f} s)"
            out.write("\r\x1b[K" + line[:200])
            out.flush()
            state["drawn"] = True
            done.wait(TICK_S)

    painter = threading.Thread(target=draw, daemon=True)
    painter.start()
    try:
        with listening(lambda text: state.__setitem__("text", text)):
            yield
    finally:
        done.set()
        painter.join()
        if state["drawn"]:
            out.write("\r\x1b[K")
            out.flush()
