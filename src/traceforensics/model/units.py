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
