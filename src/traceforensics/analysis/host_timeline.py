"""Per-thread host timelines: which cause a thread was in at every instant, queryable in bulk.

Host rows of every thread are flattened once into elementary segments (between consecutive
range boundaries of that thread). Each segment takes the highest-``PRIORITY`` class among the
ranges covering it::

    thread:  |===== DataLoader __next__ (data_loading) ======|
                 |= aten::div (cpu_compute) =|   |memcpy call|
    segment: [dl ][dl (dl > cpu_compute)      ][dl][memcpy   ][dl]

Prefix sums of segment time per class then answer "how many ns of class c did thread t spend
in [a, b)" for thousands of queries with two ``searchsorted`` calls, with no per-event Python.

Keys: a time on thread ``t`` is packed as ``t << shift | (time_ns - t0_ns)`` so that one sorted
int64 array holds every thread's boundaries in (thread, time) order.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np
import numpy.typing as npt

from traceforensics.analysis.cause_table import CAUSE_INDEX, N_CAUSES, PRIORITY
from traceforensics.analysis.intervals import sorted_unique
from traceforensics.model.units import I64

_NONE = np.zeros(0, dtype=np.int64)


@dataclass
class HostTimeline:
    """Flattened class timelines of all host threads (see module docstring).

    ``keys``: sorted unique boundary keys; ``win``: class index of the segment starting at each
    boundary (-1: no classified range); for each class ``classes[j]`` that occurs, ``pos[j]``:
    the boundaries whose segment has that class (ascending) and ``run[j]``: the class's ns in
    those segments up to and including each. The class time before boundary i is then
    ``run[j][m - 1]`` with ``m`` the number of ``pos[j]`` below i (0 when none): 12 bytes per
    classified boundary in all, where a dense (classes x boundaries) prefix table took 8 bytes
    per class and boundary (105 MB for 5 classes at 2.8M boundaries).
    """

    t0_ns: int
    shift: int
    keys: I64
    win: npt.NDArray[np.int8]
    pos: list[npt.NDArray[np.integer[Any]]]  # int32 below 2**31 boundaries
    run: list[I64]
    classes: I64

    def key(self, thr: I64, t_ns: I64) -> I64:
        rel = np.asarray(t_ns, dtype=np.int64) - self.t0_ns
        return (np.asarray(thr, dtype=np.int64) << self.shift) | rel

    def _prefix(self, thr: I64, t_ns: I64) -> I64:
        """Class time (N, N_CAUSES) on thread ``thr`` from its beginning up to ``t_ns``."""
        q = self.key(thr, t_ns)
        idx = np.searchsorted(self.keys, q, side="right") - 1
        safe = np.maximum(idx, 0)
        base = np.zeros((q.size, N_CAUSES), dtype=np.int64)
        for ci, pos, run in zip(self.classes.tolist(), self.pos, self.run, strict=True):
            if run.size == 0:  # the class is always under a higher-priority one
                continue
            m = np.searchsorted(pos, safe, side="left")
            base[:, ci] = np.where(m > 0, run[np.maximum(m - 1, 0)], 0)
        within = q - self.keys[safe]
        cls = self.win[safe].astype(np.int64)
        live = (idx >= 0) & (cls >= 0)
        rows = np.flatnonzero(live)
        base[rows, cls[rows]] += within[rows]
        base[idx < 0] = 0
        return base

    def class_time(self, thr: I64, a_ns: I64, b_ns: I64) -> I64:
        """ns per class (N, N_CAUSES) that thread ``thr`` spent in ``[a, b)``; rows with
        ``thr < 0`` (no known thread) or ``b <= a`` are all zero."""
        thr = np.asarray(thr, dtype=np.int64)
        n = thr.size
        out = np.zeros((n, N_CAUSES), dtype=np.int64)
        ok = (thr >= 0) & (b_ns > a_ns)
        if not ok.any() or self.keys.size == 0:
            return out
        sel = np.flatnonzero(ok)
        out[sel] = self._prefix(thr[sel], b_ns[sel]) - self._prefix(thr[sel], a_ns[sel])
        return out


def build_timeline(
    thr: I64,
    start_ns: I64,
    end_ns: I64,
    cause: npt.NDArray[np.int8],
    *,
    t0_ns: int,
    shift: int,
) -> HostTimeline:
    """Flatten classified host ranges (``cause`` >= 0) into a ``HostTimeline``.

    Memory rule (10M host rows: every 8 bytes per row is 80 MB): the inputs are copied only
    when rows must be left out, and the boundary keys are sorted in place."""
    keep = (cause >= 0) & (end_ns > start_ns)
    if keep.all():
        c = cause
    else:
        thr, start_ns, end_ns, c = thr[keep], start_ns[keep], end_ns[keep], cause[keep]
    del keep
    ks = (thr << shift) | (start_ns - t0_ns)
    ke = (thr << shift) | (end_ns - t0_ns)
    del thr, start_ns, end_ns
    keys = sorted_unique(np.concatenate((ks, ke)), in_place=True)
    nb = keys.size
    if nb == 0:
        return HostTimeline(t0_ns, shift, keys, np.zeros(0, np.int8), [], [], _NONE)
    bs, be = np.searchsorted(keys, ks), np.searchsorted(keys, ke)
    del ks, ke  # large temporaries (2 per host range): freed before the next ones
    win = np.full(nb, -1, dtype=np.int8)
    present = {int(x) for x in np.flatnonzero(np.bincount(c.astype(np.intp), minlength=1))}
    for cause_id in reversed(PRIORITY):  # highest priority written last wins
        ci = CAUSE_INDEX[cause_id]
        if ci not in present:
            continue
        # one class (an nsys export's API calls): its rows are all rows, not a copy of them
        m = slice(None) if len(present) == 1 else c == ci
        # ranges of this class open minus closed before each boundary: > 0 means covered
        # (worked in place: two boundary-sized arrays at once, not four)
        depth = np.bincount(bs[m], minlength=nb)
        depth -= np.bincount(be[m], minlength=nb)
        np.cumsum(depth, out=depth)
        win[depth > 0] = ci
        del depth, m
    del bs, be
    seg = _segment_ns(keys, shift)
    classes = np.array(sorted(present), dtype=np.int64)
    index: type[np.integer[Any]] = np.int32 if nb < np.iinfo(np.int32).max else np.int64
    pos = [np.flatnonzero(win == ci).astype(index) for ci in classes.tolist()]
    run = [np.cumsum(seg[p], dtype=np.int64) for p in pos]
    return HostTimeline(t0_ns, shift, keys, win, pos, run, classes)


def _segment_ns(keys: I64, shift: int) -> I64:
    """ns from each boundary key to the next one of the same thread (0 at a thread's last
    boundary and at the end), worked in one output array: every temporary of the boundary
    count is 8 bytes a boundary (160 MB at 10M host ranges)."""
    seg = np.zeros(keys.size, dtype=np.int64)
    if keys.size < 2:
        return seg
    head = seg[:-1]
    np.bitwise_xor(keys[1:], keys[:-1], out=head)
    np.right_shift(head, shift, out=head)
    other_thread = head != 0  # the next key is another thread's
    np.subtract(keys[1:], keys[:-1], out=head)
    head[other_thread] = 0
    return seg
