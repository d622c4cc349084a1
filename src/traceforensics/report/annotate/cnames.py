"""Chrome's reserved slice colours (``cname``) nearest to the plots' cause colours.

The Chrome trace format colours a slice by ``cname`` only from a fixed set of names (the
legacy trace viewer's colour scheme; Perfetto colours by name and ignores it). Each cause gets
the reserved name whose colour is nearest to its plot colour (``palette.cause_color``, squared
RGB distance), so ``chrome://tracing`` shows a cause in about the colour the figures use.
"""

from __future__ import annotations

from typing import Final

from traceforensics.analysis.idle.causes import CAUSES
from traceforensics.report.palette import cause_color

#: The reserved names and their colours (the Chrome trace viewer's colour scheme).
RESERVED: Final[dict[str, tuple[int, int, int]]] = {
    "thread_state_uninterruptible": (182, 125, 143),
    "thread_state_iowait": (255, 140, 0),
    "thread_state_running": (126, 200, 148),
    "thread_state_runnable": (133, 160, 210),
    "thread_state_unknown": (199, 155, 125),
    "background_memory_dump": (0, 180, 180),
    "light_memory_dump": (0, 0, 180),
    "detailed_memory_dump": (180, 0, 180),
    "generic_work": (125, 125, 125),
    "good": (0, 125, 0),
    "bad": (180, 125, 0),
    "terrible": (180, 0, 0),
    "grey": (221, 221, 221),
    "yellow": (255, 255, 0),
    "olive": (100, 100, 0),
    "rail_response": (67, 135, 253),
    "rail_animation": (244, 74, 63),
    "rail_idle": (238, 142, 0),
    "rail_load": (13, 168, 97),
    "startup": (230, 230, 0),
    "cq_build_running": (255, 255, 119),
    "cq_build_passed": (153, 238, 102),
    "cq_build_failed": (238, 136, 136),
    "cq_build_abandoned": (187, 187, 187),
    "cq_build_attempt_failed": (197, 81, 81),
}


def _rgb(hex_color: str) -> tuple[int, int, int]:
    h = hex_color.lstrip("#")
    return int(h[0:2], 16), int(h[2:4], 16), int(h[4:6], 16)


def nearest(hex_color: str) -> str:
    """The reserved name whose colour is nearest to ``hex_color`` (``#RRGGBB``)."""
    r, g, b = _rgb(hex_color)
    return min(
        RESERVED,
        key=lambda n: (
            (RESERVED[n][0] - r) ** 2 + (RESERVED[n][1] - g) ** 2 + (RESERVED[n][2] - b) ** 2
        ),
    )


#: Cause id -> reserved colour name.
CAUSE_CNAME: Final[dict[str, str]] = {c: nearest(cause_color(c)) for c in CAUSES}
