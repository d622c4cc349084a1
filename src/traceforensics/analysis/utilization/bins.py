"""The one binning rule of every busy-fraction curve: the utilization pass (its JSON timeline, its
pattern and the p10/p50/p90 the terminal prints) and the utilization plot all use it.

Units: times are trace-clock integer ns; ``bin_ms`` (``--bin-ms``, default 100 ms, the period
dashboards sample at) is in ms; values are busy fractions 0..1.

The rule, per device, over its analysis window ``[lo, hi)`` (``analysis.devices[i]``:
``window_start_ns``, ``window_start_ns + window_ns``; the idle pass's window, so ``--window``
and ``--from``/``--to`` move it):

1. The first bin starts exactly at ``lo`` (never at the trace's first event, which may be a
   host row long before any GPU work); the last bin ends at ``hi``.
2. Width (``utilization_bin_ns``): ``bin_ms`` when the window holds at least
   ``MIN_PATTERN_BINS`` (100) of them — a long window is classified at the dashboard's
   physical bin, so periods and percentiles compare with a monitoring log's samples. A shorter
   window gets the largest 1-2-5 width (1, 2, 5 x 10^k ns) giving at least ``MIN_PATTERN_BINS``
   bins, never under ``MIN_BIN_NS`` (1 µs: Kineto records µs) unless ``bin_ms`` asks for
   finer: 84 ms -> 500 µs (168 bins), 1.17 s -> 10 ms (117), 40 s -> 100 ms (400).
3. Value of bin k: busy ns inside it (the device's busy union, exact overlap) over its length.
4. The last bin is partial when the window is not a whole number of bins. Its value is its
   busy time over its OWN length (so a window busy throughout reads 100 % in every bin), and
   it is kept in the timeline (JSON, plot). The classifier DROPS it (``classified_bins``): a
   sliver would count as a whole sample in the percentiles and break the even sampling the
   period search assumes. It is kept only when it is the only bin (a window under one bin).

::

    window:    lo [.......................................................) hi
    bins:         [  0  |  1  |  2  |  3  | ...                | n-2 | n-1 )   n-1 partial:
    busy:           |======|    |=|       |=============|                    own length,
    value_k  = busy ns in bin k / length of bin k                             not classified
    classified: bins 0 .. n-2 (all n when the last one is whole, or when n == 1)
"""

from __future__ import annotations

from typing import Final

import numpy as np

from traceforensics.analysis.intervals import cumulative
from traceforensics.model.units import F64, I64, NS_PER_MS, NS_PER_US

#: A curve is classified on at least this many bins (finer bins for short windows).
MIN_PATTERN_BINS: Final = 100
#: The finest automatic bin: Kineto records µs, finer bins would only show its rounding.
MIN_BIN_NS: Final = NS_PER_US
#: Most utilization bins per device (a 1 ms bin covers ~17 minutes of window).
MAX_UTILIZATION_BINS: Final = 1_000_000


def physical_bin_ns(bin_ms: float) -> int:
    """``bin_ms`` in whole ns (at least 1)."""
    return max(round(bin_ms * NS_PER_MS), 1)


def nice_floor_ns(ns: float) -> int:
    """The largest 1-2-5 duration (1, 2, 5 x 10^k ns) not above ``ns``, at least 1 ns."""
    n = int(ns)  # a 1-2-5 duration is whole ns: m * scale <= ns iff m * scale <= floor(ns)
    if n < 1:
        return 1
    scale = 1
    while scale * 10 <= n:
        scale *= 10
    return next(m * scale for m in (5, 2, 1) if m * scale <= n)


def utilization_bin_ns(window_ns: int, bin_ms: float = 100.0) -> int:
    """Bin width (ns) for a window of ``window_ns`` (rule 2 of the module docstring):
    ``bin_ms`` when the window holds ``MIN_PATTERN_BINS`` of them, else the largest 1-2-5
    width giving that many bins, never under ``MIN_BIN_NS`` unless ``bin_ms`` is finer."""
    physical = physical_bin_ns(bin_ms)
    if window_ns >= MIN_PATTERN_BINS * physical:
        return physical
    auto = max(nice_floor_ns(window_ns / MIN_PATTERN_BINS), MIN_BIN_NS)
    return min(physical, auto)


def bin_count(window_ns: int, bin_ns: int) -> int:
    """Bins covering ``window_ns`` (the last may be partial); 0 for an empty window."""
    return -(-max(window_ns, 0) // bin_ns)


def classified_bins(window_ns: int, bin_ns: int) -> int:
    """How many leading bins the classifier uses (rule 4): all whole bins; the partial last
    one only when it is the only bin."""
    whole = max(window_ns, 0) // bin_ns
    return whole if whole else bin_count(window_ns, bin_ns)


def busy_fraction_bins(starts: I64, ends: I64, start_ns: int, end_ns: int, bin_ns: int) -> F64:
    """Busy fraction per bin of disjoint sorted intervals over ``[start_ns, end_ns)``: bins of
    ``bin_ns`` from ``start_ns``, the last one cut at ``end_ns`` and divided by its own length.
    Exact overlap from the cumulative busy time B(t) at every edge:
    ``value_k = (B(edge_k+1) - B(edge_k)) / (edge_k+1 - edge_k)``."""
    if bin_ns <= 0:
        raise ValueError("bin_ns must be positive")
    if end_ns <= start_ns:
        return np.zeros(0, dtype=np.float64)
    edges = np.arange(start_ns, end_ns, bin_ns, dtype=np.int64)
    edges = np.append(edges, np.int64(end_ns))
    busy = np.diff(cumulative(starts, ends, edges))
    out: F64 = busy / np.diff(edges).astype(np.float64)
    return out
