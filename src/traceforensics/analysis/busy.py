"""The one busy union: per device, the union of its GPU work over all streams, and per kind.

    stream 7:   |==k1==|    |==k3==|
    stream 9:       |==k2==|           |=m=|
    busy:       |=============|==|      |=|     (union; overlapping streams count once)
    idle:                      gap   gap

Busy kinds (``BUSY_CLASSES``) partition a device's ops: ``communication`` (any op flagged as
collective/peer communication), ``kernel`` (other kernels: compute, including graph-level
``cuda_graph`` records, a whole graph replay whose nodes were not traced), ``memcpy``,
``memset``.
Each kind's busy time is the length of its own union; kinds overlap on different streams, so
they can sum to more than the total. Sync records are waits, not work. Times are integer ns.
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import cached_property

import numpy as np
import polars as pl

from traceforensics.analysis.intervals import grouped_union, pack_shift
from traceforensics.model.schema import BUSY_CLASSES
from traceforensics.model.units import I8, I64, Mask

KERNEL, COMMUNICATION, MEMCPY, MEMSET = range(len(BUSY_CLASSES))


@dataclass
class DeviceBusy:
    """Busy unions of every device (index ``g`` into ``AnalysisContext.devices``): device
    ``g``'s intervals are ``start``/``end[dev_bounds[g]:dev_bounds[g + 1]]``, and class ``c``'s
    on it ``kind_start``/``kind_end[kind_bounds[k]:kind_bounds[k + 1]]`` with
    ``k = g * len(BUSY_CLASSES) + c`` (offsets, not a device index per interval: 8 bytes per
    interval less, twice)."""

    n_dev: int
    dev_bounds: I64
    start: I64
    end: I64
    kind_bounds: I64
    kind_start: I64
    kind_end: I64
    first_start: I64
    busy_ns: I64
    by_kind_ns: I64
    end_keys: I64
    end_is_comm: Mask
    t0_ns: int
    shift: int

    def of(self, g: int) -> tuple[I64, I64]:
        """Disjoint sorted busy intervals of device ``g``."""
        lo, hi = int(self.dev_bounds[g]), int(self.dev_bounds[g + 1])
        return self.start[lo:hi], self.end[lo:hi]

    def kind(self, g: int, cls: int) -> tuple[I64, I64]:
        """Disjoint sorted intervals of one busy class (``BUSY_CLASSES`` index) on device g."""
        key = g * len(BUSY_CLASSES) + cls
        lo, hi = int(self.kind_bounds[key]), int(self.kind_bounds[key + 1])
        return self.kind_start[lo:hi], self.kind_end[lo:hi]

    def has_work(self) -> Mask:
        """Devices with non-zero-length work."""
        out: Mask = self.busy_ns > 0
        return out

    @property
    def span_lo(self) -> I64:
        """First busy instant per device (first op start when nothing has length)."""
        out = self.first_start.copy()
        g = np.flatnonzero(self.has_work())
        out[g] = self.start[self.dev_bounds[g]]
        return out

    @property
    def span_hi(self) -> I64:
        """Last busy instant per device (first op start when nothing has length)."""
        out = self.first_start.copy()
        g = np.flatnonzero(self.has_work())
        out[g] = self.end[self.dev_bounds[g + 1] - 1]
        return out

    def by_kind(self, g: int) -> dict[str, int]:
        """Busy ns of each class on device ``g`` (``BUSY_CLASSES`` keys)."""
        return {c: int(v) for c, v in zip(BUSY_CLASSES, self.by_kind_ns[g], strict=True)}

    @cached_property
    def _comm_cum(self) -> I64:
        """Running count of communication ops in ``end_keys`` order (0 first): built once,
        the idle pass asks once per chunk of gaps."""
        out: I64 = np.concatenate(([0], np.cumsum(self.end_is_comm))).astype(np.int64)
        return out

    def prev_comm(self, dev: I64, s: I64) -> Mask:
        """Whether some op of device ``dev[i]`` ends exactly at ``s[i]`` and is communication."""
        if self.end_keys.size == 0:
            return np.zeros(s.size, dtype=bool)
        q = (dev << self.shift) | (s - self.t0_ns)
        i = np.searchsorted(self.end_keys, q, side="left")
        j = np.searchsorted(self.end_keys, q, side="right")
        cum = self._comm_cum
        out: Mask = (j > i) & ((cum[j] - cum[i]) > 0)  # several ops may end at s: any counts
        return out


def op_classes(kind: pl.Series, is_comm: Mask) -> I8:
    """``BUSY_CLASSES`` index of each op (``kind``: the ops' kind column; compared in polars,
    never converted to a numpy array of Python strings: ~60 bytes per op, 0.6 GB at 10M)."""
    cls = np.full(kind.len(), KERNEL, dtype=np.int8)
    cls[(kind == "memcpy").to_numpy()] = MEMCPY
    cls[(kind == "memset").to_numpy()] = MEMSET
    cls[is_comm] = COMMUNICATION
    return cls


def device_busy(work: pl.DataFrame, n_dev: int, t0_ns: int, span_ns: int) -> DeviceBusy:
    """Busy unions of the GPU ops ``work`` (sorted by device index ``dev``, with ``kind``,
    ``start_ns``, ``end_ns``, ``is_comm``); ``span_ns`` bounds every time minus ``t0_ns``."""
    # views of the columns where they are int64 without nulls (no copy of 24 bytes per op)
    dev = np.asarray(work.get_column("dev").to_numpy(), dtype=np.int64)
    start = np.asarray(work.get_column("start_ns").to_numpy(), dtype=np.int64)
    end = np.asarray(work.get_column("end_ns").to_numpy(), dtype=np.int64)
    is_comm = work.get_column("is_comm").fill_null(False).to_numpy().astype(bool)
    cls = op_classes(work.get_column("kind"), is_comm)
    n_cls = len(BUSY_CLASSES)
    shift = pack_shift(span_ns, max(n_dev * n_cls, 1))
    ug, us, ue = grouped_union(dev, start, end, t0_ns, shift)
    if cls.size < 2 or bool(((cls[1:] == cls[:-1]) | (dev[1:] != dev[:-1])).all()):
        # every device runs one class only (a kernel-only program): each class union is its
        # device's busy union, shared rather than computed and held twice (16 bytes/interval)
        class_of = np.zeros(n_dev, dtype=np.int64)
        class_of[dev] = dev * n_cls + cls
        kg, ks, ke = class_of[ug], us, ue
    else:
        kg, ks, ke = grouped_union(dev * n_cls + cls, start, end, t0_ns, shift)
    del cls
    busy = np.zeros(n_dev, dtype=np.int64)
    np.add.at(busy, ug, ue - us)
    by_kind = np.zeros(n_dev * n_cls, dtype=np.int64)
    np.add.at(by_kind, kg, ke - ks)
    first = np.zeros(n_dev, dtype=np.int64)
    if dev.size and n_dev:
        first = np.minimum.reduceat(start, np.searchsorted(dev, np.arange(n_dev), side="left"))
    if is_comm.any():
        ek = (dev << shift) | (end - t0_ns)
        eo = np.argsort(ek, kind="stable")
        end_keys, end_is_comm = ek[eo], is_comm[eo]
    else:  # no op ends in communication: ``prev_comm`` needs no index (9 bytes per op)
        end_keys, end_is_comm = np.zeros(0, dtype=np.int64), np.zeros(0, dtype=bool)
    return DeviceBusy(
        n_dev=n_dev,
        dev_bounds=np.searchsorted(ug, np.arange(n_dev + 1)).astype(np.int64),
        start=us,
        end=ue,
        kind_bounds=np.searchsorted(kg, np.arange(n_dev * n_cls + 1)).astype(np.int64),
        kind_start=ks,
        kind_end=ke,
        first_start=first.astype(np.int64),
        busy_ns=busy,
        by_kind_ns=by_kind.reshape(n_dev, n_cls),
        end_keys=end_keys,
        end_is_comm=end_is_comm,
        t0_ns=t0_ns,
        shift=shift,
    )
