"""The time each finding covers on its device, as disjoint sorted intervals (tf ns).

Rule per category (the annotated trace draws a finding's slices over these intervals):

- an idle cause (``data_loading``, ``host_sync``, ...): the device's idle pieces of that cause
  (``analysis.idle.pieces``), less the one-off windows when the device has a ``one_off``
  finding (the one-off time is that finding's, as in the findings' steady split);
- ``one_off``: its ``one_off_windows`` (set-up, warm-up, the lead-in to the first step);
- ``exposed_communication``: communication busy time no kernel overlaps (the device's
  ``exposed_comm_ns``);
- ``transfer_bound``: copy and memset busy time no kernel or communication overlaps (the
  device's ``exposed_copy_ns``);
- ``straggler_wait``: the waiting heads of the device's matched collectives;
- any other (kernel-level findings: ``fp32_matmul``, ``kernel_efficiency``, ``zero_grad``,
  ...): every event of the device's rank with the name and kind of one of its evidence
  events (GPU events on the device only), else the evidence events themselves; a finding
  with no evidence covers the device's analysis window.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import polars as pl

from traceforensics.analysis.findings.results import (
    EXPOSED_COMMUNICATION,
    ONE_OFF,
    STRAGGLER_WAIT,
    TRANSFER_BOUND,
    Finding,
)
from traceforensics.analysis.idle.causes import CAUSES
from traceforensics.analysis.intervals import clip, holes, union
from traceforensics.analysis.pipeline import Analysis
from traceforensics.model.units import I64
from traceforensics.report.lanes import DeviceLanes
from traceforensics.report.plot_timeline import wait_heads

Intervals = tuple[I64, I64]
_EMPTY: Intervals = (np.zeros(0, np.int64), np.zeros(0, np.int64))
_GPU_KINDS = ("kernel", "memcpy", "memset", "cuda_graph", "gpu_sync", "gpu_annotation")


def minus(a: Intervals, b: Intervals, lo: int, hi: int) -> Intervals:
    """``a`` without ``b`` inside ``[lo, hi)`` (both disjoint and sorted): the holes of
    ``holes(a) ∪ b`` (what is neither outside ``a`` nor in ``b``)."""
    ha = holes(*a, lo, hi)
    return holes(*union(np.concatenate((ha[0], b[0])), np.concatenate((ha[1], b[1]))), lo, hi)


def of_rows(starts: Any, ends: Any) -> Intervals:
    """The union of ``[starts, ends)`` (any order, overlapping allowed), zero-length dropped."""
    s = np.asarray(starts, dtype=np.int64)
    e = np.asarray(ends, dtype=np.int64)
    keep = e > s
    return union(s[keep], e[keep]) if keep.any() else _EMPTY


def covered(
    analysis: Analysis, finding: Finding, lanes: DeviceLanes, pieces: pl.DataFrame
) -> Intervals:
    """The intervals ``finding`` covers on its device (module docstring), inside the device's
    analysis window ``[lanes.lo, lanes.hi)``."""
    lo, hi, cat = lanes.lo, lanes.hi, finding.category
    if cat in CAUSES:
        mine = pieces.filter(
            (pl.col("rank") == finding.rank)
            & (pl.col("device") == finding.device)
            & (pl.col("cause") == cat)
        )
        s = mine.get_column("start_ns").to_numpy()
        spans = of_rows(s, s + mine.get_column("dur_ns").to_numpy())
        return minus(spans, _one_off(analysis, finding), lo, hi)
    if cat == ONE_OFF:
        return _one_off(analysis, finding, itself=finding)
    kinds = lanes.kinds
    if cat == EXPOSED_COMMUNICATION:
        return minus(kinds.get("communication", _EMPTY), kinds.get("kernel", _EMPTY), lo, hi)
    if cat == TRANSFER_BOUND:
        compute = _joined(kinds.get("kernel", _EMPTY), kinds.get("communication", _EMPTY))
        copies = _joined(kinds.get("memcpy", _EMPTY), kinds.get("memset", _EMPTY))
        return minus(copies, compute, lo, hi)
    if cat == STRAGGLER_WAIT:
        return wait_heads(analysis).get((finding.rank, finding.device), _EMPTY)
    return _named(analysis, finding, lo, hi)


def _joined(a: Intervals, b: Intervals) -> Intervals:
    return union(np.concatenate((a[0], b[0])), np.concatenate((a[1], b[1])))


def _one_off(analysis: Analysis, finding: Finding, itself: Finding | None = None) -> Intervals:
    """The one-off windows of the finding's device (its ``one_off`` finding's figures)."""
    src = itself or next(
        (f for f in analysis.findings_of(finding.rank, finding.device) if f.category == ONE_OFF),
        None,
    )
    windows = [] if src is None else src.figures.get("one_off_windows") or []
    s = [int(w["start_ns"]) for w in windows]
    return of_rows(s, [a + int(w["dur_ns"]) for a, w in zip(s, windows, strict=True)])


def _named(analysis: Analysis, finding: Finding, lo: int, hi: int) -> Intervals:
    """Events named as the finding's evidence (module docstring), clipped to the window."""
    ev = [e for e in finding.evidence if e.kind != "none" and e.name]
    if not ev:
        return (np.array([lo], np.int64), np.array([hi], np.int64)) if hi > lo else _EMPTY
    wanted = pl.DataFrame({"kind": [e.kind for e in ev], "name": [e.name for e in ev]}).unique()
    rows = (
        analysis.session.events.lazy()
        .filter(pl.col("rank") == finding.rank)
        .select(
            pl.col("kind").cast(pl.String),
            pl.col("name").cast(pl.String),
            "device",
            "start_ns",
            (pl.col("start_ns") + pl.col("dur_ns")).alias("end_ns"),
        )
        .join(wanted.lazy(), on=["kind", "name"])
        .filter(~pl.col("kind").is_in(_GPU_KINDS) | (pl.col("device") == finding.device))
        .collect()
    )
    if rows.height == 0:  # the evidence events themselves (the table may not hold them)
        s = [e.start_ns for e in ev]
        return clip(*of_rows(s, [a + e.dur_ns for a, e in zip(s, ev, strict=True)]), lo, hi)
    spans = of_rows(rows.get_column("start_ns").to_numpy(), rows.get_column("end_ns").to_numpy())
    return clip(*spans, lo, hi)
