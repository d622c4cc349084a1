"""One colour per idle cause and per busy kind, shared by every plot and the HTML report.

A cause has the same colour in the timeline, the per-step bars, the utilization shading, the
idle-by-cause bar and the HTML tables, so a reader learns it once. Each cause's colour and
hatch are fields of its row in ``analysis.cause_table`` (the scheme is described there:
Okabe-Ito colours first, then Paul Tol's "muted" colours with a hatch as a second cue, a light
grey for ``untraced``); this module only reads them. Busy kinds are dark neutral shades of
different lightness, so busy work never reads as a cause.
"""

from __future__ import annotations

import html
from typing import Any, Final

from traceforensics.analysis.cause_table import CAUSE_TABLE, CAUSES

#: Cause id -> (hex colour, matplotlib hatch; "" for none), from the cause table.
CAUSE_STYLE: Final[dict[str, tuple[str, str]]] = {c.id: (c.color, c.hatch) for c in CAUSE_TABLE}
#: A cause id the table does not hold (a report written by another version) is drawn in this
#: colour.
UNKNOWN_CAUSE_COLOR: Final = "#777777"
#: Busy kinds (the keys of ``DeviceRecord.busy_by_kind``) -> colour, dark to light.
BUSY_COLORS: Final[dict[str, str]] = {
    "kernel": "#1A1A1A",
    "communication": "#6E6250",  # dull taupe: apart from the blue and indigo causes
    "memcpy": "#5E5E5E",
    "memset": "#8C8C8C",
}
#: GPU busy time by step phase (``StepStats.phases``) -> (colour, hatch): dark greys apart
#: from the coloured idle causes, told apart by shade and hatch.
PHASE_STYLE: Final[dict[str, tuple[str, str]]] = {
    "data_loading": ("#3B3B3B", "xx"),
    "h2d": ("#5E5E5E", ".."),
    "forward": ("#1A1A1A", ""),
    "backward": ("#505050", ""),
    "optimizer": ("#7F7F7F", "//"),
    "communication": ("#6E6250", ""),
    "other": ("#3F3F3F", "--"),  # dark: never mistaken for the light-grey idle causes
}
#: Lane labels of the busy kinds in the timeline.
BUSY_LABELS: Final[dict[str, str]] = {
    "kernel": "kernels",
    "communication": "communication",
    "memcpy": "memcpy",
    "memset": "memset",
}
#: Idle time outside the gaps kept with their causes (the timeline cannot split it by cause).
OTHER_IDLE_COLOR: Final = "#9A9A9A"
#: Transparency of idle shading drawn over a utilization curve (the curve stays readable).
SHADE_ALPHA: Final = 0.45


def cause_color(cause: str) -> str:
    """Hex colour of a cause id."""
    return CAUSE_STYLE.get(cause, (UNKNOWN_CAUSE_COLOR, ""))[0]


def cause_hatch(cause: str) -> str:
    """Hatch pattern of a cause id ("" for none)."""
    return CAUSE_STYLE.get(cause, (UNKNOWN_CAUSE_COLOR, ""))[1]


def cause_patch(cause: str, alpha: float = 1.0) -> Any:
    """A legend handle for ``cause`` (colour and hatch as drawn)."""
    from matplotlib.patches import Patch

    return Patch(
        facecolor=cause_color(cause),
        hatch=cause_hatch(cause),
        edgecolor="#333333",
        linewidth=0.4,
        alpha=alpha,
        label=cause,
    )


def causes_in_order(*maps: dict[str, int]) -> list[str]:
    """Causes with time in any of ``maps``, in report order (``CAUSES``): legends list them
    in the same order in every figure."""
    seen = {c for m in maps for c, v in m.items() if v > 0}
    return [c for c in CAUSES if c in seen] + sorted(seen - set(CAUSES))


def swatch_html(cause: str) -> str:
    """An inline colour square for the HTML report, striped where the figures hatch the cause
    (the same second cue); class ``sw`` sizes it. The cause id is escaped."""
    color = cause_color(cause)
    fill = (
        f"repeating-linear-gradient(45deg,{color} 0 3px,#fff 3px 4.5px)"
        if cause_hatch(cause)
        else color
    )
    return (
        f"<span class='sw' style='background:{html.escape(fill, quote=True)}' "
        f"title='{html.escape(cause, quote=True)}'></span>"
    )
