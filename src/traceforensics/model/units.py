"""Units and array aliases shared by every layer: integer nanoseconds, numpy array types.

Times in the event table are integer ns; these constants are the only conversion factors.
"""

from __future__ import annotations

from typing import Final

import numpy as np
import numpy.typing as npt

#: Integer ns arrays (starts, ends, durations, packed keys).
I64 = npt.NDArray[np.int64]
#: Float arrays (fractions, percentages, seconds).
F64 = npt.NDArray[np.float64]
#: Small class codes (cause indices).
I8 = npt.NDArray[np.int8]
#: Boolean masks.
Mask = npt.NDArray[np.bool_]

NS_PER_US: Final = 1_000
NS_PER_MS: Final = 1_000_000
NS_PER_S: Final = 1_000_000_000

#: Largest GPU index or rank taken as recorded (both ingesters apply it; the ``rank`` and
#: ``device`` columns are Int32); a larger or negative value is damage, read as unknown.
#: (Here, not in ``schema``: the early-scan child applies it without importing polars.)
MAX_INDEX: Final = 1 << 20


def us_text(ns: int) -> str:
    """``ns`` nanoseconds as an exact decimal µs text, the Chrome trace format's unit
    (``-1234`` -> ``-1.234``): JSON numbers written so, never through a float."""
    sign = "-" if ns < 0 else ""
    q, r = divmod(abs(ns), 1000)
    return f"{sign}{q}.{r:03d}"


def fmt_ns(ns: int | float) -> str:
    """Human duration from ns: 812 ns, 15.3 µs, 4.21 ms, 1.204 s."""
    v = float(ns)
    a = abs(v)
    if a < NS_PER_US:
        return f"{v:.0f} ns"
    if a < NS_PER_MS:
        return f"{v / NS_PER_US:.1f} µs"
    if a < NS_PER_S:
        return f"{v / NS_PER_MS:.2f} ms"
    return f"{v / NS_PER_S:.3f} s"


def fmt_pct(x: float) -> str:
    """A share in [0, 1] as a percentage with one decimal."""
    return f"{100.0 * x:.1f}%"


def fmt_bytes(n: int | float) -> str:
    """Human size in decimal units: 512 B, 4.1 kB, 13.6 MB, 13.63 GB."""
    v = float(n)
    for unit, scale in (("GB", 1e9), ("MB", 1e6), ("kB", 1e3)):
        if abs(v) >= scale:
            return f"{v / scale:.2f} {unit}" if unit == "GB" else f"{v / scale:.1f} {unit}"
    return f"{v:.0f} B"


def fmt_rate(bytes_per_ns: float) -> str:
    """Bandwidth from bytes per ns (= GB/s): 12.3 GB/s, or 4.2 MB/s below 0.1 GB/s."""
    if bytes_per_ns >= 0.1:
        return f"{bytes_per_ns:.1f} GB/s"
    return f"{bytes_per_ns * 1e3:.2f} MB/s"
