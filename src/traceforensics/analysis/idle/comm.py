"""Communication time and its exposed part, per device and window.

    compute kernels:  |=======|        |====|
    comm kernels:         |======|  |=========|
    exposed comm:             |==|  |==|    |=|    (comm not overlapped by compute)

``exposed = |comm ∪ compute| - |compute|`` inside the window, computed on interval unions.
Compute = kernels that are not communication; copies and memsets are neither.
"""

from __future__ import annotations

import numpy as np

from traceforensics.analysis.intervals import clip, total, union
from traceforensics.model.units import I64


def comm_in_window(
    comm_s: I64, comm_e: I64, comp_s: I64, comp_e: I64, *, lo: int, hi: int
) -> tuple[int, int]:
    """``(comm_ns, exposed_comm_ns)`` inside ``[lo, hi)``; inputs are disjoint sorted unions."""
    cs, ce = clip(comm_s, comm_e, lo, hi)
    if cs.size == 0:
        return 0, 0
    ks, ke = clip(comp_s, comp_e, lo, hi)
    us, ue = union(np.concatenate((cs, ks)), np.concatenate((ce, ke)))
    return total(cs, ce), total(us, ue) - total(ks, ke)
