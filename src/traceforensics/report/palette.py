"""One colour per idle cause and per busy kind, shared by every plot and the HTML report.

A cause has the same colour in the timeline, the per-step bars, the utilization shading, the
idle-by-cause bar and the HTML tables, so a reader learns it once. The first seven causes take
the Okabe-Ito colours (distinguishable with the common colour-vision deficiencies); the next
four (and ``gpu_pickup``, added later) take Paul Tol's "muted" colours and, because thirteen
hues cannot all stay apart for every reader, a hatch pattern as a second cue; ``untraced``
(nothing recorded explains the time) is a plain light grey, the conventional colour of
"unknown". Busy kinds are dark neutral shades of different lightness, so busy work never reads
as a cause.

    cause               colour     hatch     cause               colour     hatch
    data_loading        #E69F00              io                  #882255    ///
    host_sync           #D55E00              cross_stream_wait   #44AA99    \\\\\\
    memcpy              #56B4E9              cpu_compute         #332288    xxx
    launch_overhead     #CC79A7              profiler_overhead   #999933    ...
    memory_management   #F0E442              untraced            #BBBBBB
    compilation         #009E73              gpu_pickup          #CC6677    |||
    communication       #0072B2
"""

from __future__ import annotations

import html
from typing import Any, Final

from traceforensics.analysis.idle.causes import CAUSES

#: Cause id -> (hex colour, matplotlib hatch; "" for none). Every id of ``CAUSES`` is a key.
CAUSE_STYLE: Final[dict[str, tuple[str, str]]] = {
    "data_loading": ("#E69F00", ""),  # Okabe-Ito orange
    "host_sync": ("#D55E00", ""),  # Okabe-Ito vermillion
    "memcpy": ("#56B4E9", ""),  # Okabe-Ito sky blue
    "launch_overhead": ("#CC79A7", ""),  # Okabe-Ito reddish purple
    "memory_management": ("#F0E442", ""),  # Okabe-Ito yellow
    "compilation": ("#009E73", ""),  # Okabe-Ito bluish green
    "communication": ("#0072B2", ""),  # Okabe-Ito blue
    "io": ("#882255", "///"),  # Tol muted wine
    "cross_stream_wait": ("#44AA99", "\\\\\\"),  # Tol muted teal
    "cpu_compute": ("#332288", "xxx"),  # Tol muted indigo
    "profiler_overhead": ("#999933", "..."),  # Tol muted olive
    "untraced": ("#BBBBBB", ""),  # grey: unknown
    "gpu_pickup": ("#CC6677", "|||"),  # Tol muted rose: queued work picked up, no launch wait
}
#: A cause id added to ``CAUSES`` later and not yet given a style is drawn in this colour.
UNKNOWN_CAUSE_COLOR: Final = "#777777"
#: Busy kinds (the keys of ``DeviceRecord.busy_by_kind``) -> colour, dark to light.
BUSY_COLORS: Final[dict[str, str]] = {
    "kernel": "#1A1A1A",
    "communication": "#6E6250",  # dull taupe: apart from the blue and indigo causes
    "memcpy": "#5E5E5E",
    "memset": "#8C8C8C",
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

assert set(CAUSE_STYLE) >= set(CAUSES), "every cause needs a style"


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
