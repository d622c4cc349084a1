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


def fmt_ns(ns: int | float) -> str:
    """Human duration from ns: 812 ns, 15.3 us, 4.21 ms, 1.204 s."""
    v = float(ns)
    a = abs(v)
    if a < NS_PER_US:
        return f"{v:.0f} ns"
    if a < NS_PER_MS:
        return f"{v / NS_PER_US:.1f} us"
    if a < NS_PER_S:
        return f"{v / NS_PER_MS:.2f} ms"
    return f"{v / NS_PER_S:.3f} s"


def fmt_pct(x: float) -> str:
    """A share in [0, 1] as a percentage with one decimal."""
    return f"{100.0 * x:.1f}%"
