"""Communication time and its exposed part, per device and window.

    compute kernels:  |=======|        |====|
    comm kernels:         |======|  |=========|
    exposed comm:             |==|  |==|    |=|    (comm not overlapped by compute)

``exposed = |comm ∪ compute| - |compute|`` inside the window, computed on interval unions.
Compute = kernels that are not communication; copies and memsets are neither.
"""

from __future__ import annotations

from traceforensics.analysis.idle.windows import in_window
from traceforensics.analysis.intervals import exposed
from traceforensics.model.units import I64


def comm_in_window(
    comm_s: I64, comm_e: I64, comp_s: I64, comp_e: I64, *, lo: int, hi: int
) -> tuple[int, int]:
    """``(comm_ns, exposed_comm_ns)`` inside ``[lo, hi)``; inputs are disjoint sorted unions, of
    which only the intervals that can overlap the window are read (``windows.in_window``)."""
    return exposed(
        *in_window(comm_s, comm_e, lo, hi), *in_window(comp_s, comp_e, lo, hi), lo=lo, hi=hi
    )
