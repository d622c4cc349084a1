"""Example gaps: per device and cause, the gap with the most of it.

The idle pass reports the ``top_gaps`` longest gaps with evidence. A cause made of many tiny
gaps (``gpu_pickup``: 1-6 µs between queued kernels; ``launch_overhead`` on a launch-bound
loop) never appears among them, so nothing recorded would back its total. For each device and
each cause with idle time, the example is the gap with the most ns of that cause (ties: the
earliest gap), with its evidence; an idle-cause finding quotes it first
(``findings.build``). Examples do not depend on which gaps are listed, so a rank analysed
alone has the same ones as in its job::

    gaps of device 0:   |== 300 µs data_loading ==|  |2 µs|  |3 µs|  |1 µs| ...
    data_loading: example = the 300 µs gap
    gpu_pickup (total 40 µs over 20 gaps): example = the 3 µs gap (the most gpu_pickup ns)

``CauseBest`` tracks, chunk by chunk of the attribution (``windows.window_gaps``), the best gap
per (window, cause) with two ints each; the examples are attributed again on their own
(``windows.attribute_some``: each gap is attributed independently, so the split is the same).
"""

from __future__ import annotations

import numpy as np

from traceforensics.analysis.idle.causes import N_CAUSES
from traceforensics.model.units import I64


class CauseBest:
    """Per window k and cause c: the gap index with the most ns of c (``gap``, -1: none) and
    those ns (``ns``), over the chunks seen so far."""

    def __init__(self, n_win: int) -> None:
        self.gap: I64 = np.full((n_win, N_CAUSES), -1, dtype=np.int64)
        self.ns: I64 = np.zeros((n_win, N_CAUSES), dtype=np.int64)

    def update(self, win: I64, mat: I64, offset: int) -> None:
        """Take the gaps of one chunk: row r of ``mat`` (ns per cause) is gap ``offset + r`` of
        window ``win[r]``. A gap of a later chunk replaces the best only with strictly more ns
        (chunks come in gap order, so ties keep the earliest gap)."""
        for c in range(N_CAUSES):
            rows = np.flatnonzero(mat[:, c] > 0)
            if rows.size == 0:
                continue
            w, v = win[rows], mat[rows, c]
            order = np.lexsort((rows, -v, w))  # per window: most ns first, then earliest
            first = order[np.concatenate(([True], w[order][1:] != w[order][:-1]))]
            k, best_v, best_g = w[first], v[first], rows[first] + offset
            better = best_v > self.ns[k, c]
            self.ns[k[better], c] = best_v[better]
            self.gap[k[better], c] = best_g[better]


def example_gaps(best: I64) -> I64:
    """Sorted unique gap indices of the examples: ``best[k, c]`` (``CauseBest.gap``) for every
    window k and cause c with a gap."""
    out: I64 = np.unique(best[best >= 0]).astype(np.int64)
    return out
