"""Copies and memsets of each device: time, bytes and achieved bandwidth by direction, and the
part of the copy time that no compute overlaps.

Rules (integer ns, bytes; only ops inside the device's analysis window count):

- one row per direction: ``h2d``, ``d2h``, ``d2d``, ``h2h``, ``p2p``, ``unknown`` (the copy
  kind) and ``memset``: ``count``, ``bytes``, ``time_ns`` (sum of the ops' durations),
  ``gbps`` = bytes / time_ns (bytes per ns = GB/s; None without bytes or time), and
  ``pageable_count`` (copies with a pageable host end: they cannot run asynchronously and move
  at a fraction of the link's speed);
- ``copy_ns`` = length of the union of copies and memsets; ``exposed_copy_ns`` = the part of
  it that compute (kernels, communication, graph replays) does not overlap::

      compute:   |=======|        |====|
      copies:        |======|  |=========|
      exposed:           |==|  |==|    |=|
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Final

import numpy as np
import polars as pl

from traceforensics.analysis.busy import COMMUNICATION, KERNEL, MEMCPY, MEMSET
from traceforensics.analysis.context import OP_DUR_NS, AnalysisContext
from traceforensics.analysis.intervals import exposed, union

#: Report order of the directions.
DIRECTIONS = ("h2d", "d2h", "d2d", "p2p", "h2h", "unknown", "memset")


@dataclass(frozen=True)
class TransferRow:
    """One direction's copies on one device (see the module docstring)."""

    direction: str
    count: int
    bytes: int
    time_ns: int
    pageable_count: int

    @property
    def gbps(self) -> float | None:
        """Achieved bandwidth, GB/s (= bytes per ns)."""
        return self.bytes / self.time_ns if self.bytes and self.time_ns else None

    def to_json(self) -> dict[str, Any]:
        gbps = self.gbps
        return {
            "direction": self.direction,
            "count": self.count,
            "bytes": self.bytes,
            "time_ns": self.time_ns,
            "gbps": None if gbps is None else round(gbps, 3),
            "pageable_count": self.pageable_count,
        }


@dataclass(frozen=True)
class DeviceTransfers:
    """Copies of one (rank, device): rows by direction, their union and its exposed part."""

    rank: int
    device: int
    rows: list[TransferRow]
    copy_ns: int
    exposed_copy_ns: int


def device_transfers(ctx: AnalysisContext) -> list[DeviceTransfers]:
    """One entry per device of the context (devices without copies get no rows, zeros)."""
    rows = _rows(ctx)
    out: list[DeviceTransfers] = []
    for g, key in enumerate(ctx.devices):
        lo, hi = int(ctx.window_lo[g]), int(ctx.window_hi[g])
        copy_s, copy_e = _union_of(ctx, g, MEMCPY, MEMSET)
        comp_s, comp_e = _union_of(ctx, g, KERNEL, COMMUNICATION)
        copy_ns, exposed_ns = exposed(copy_s, copy_e, comp_s, comp_e, lo=lo, hi=hi)
        out.append(DeviceTransfers(key[0], key[1], rows.get(key, []), copy_ns, exposed_ns))
    return out


def _union_of(ctx: AnalysisContext, g: int, *classes: int) -> tuple[np.ndarray, np.ndarray]:
    """Union of busy classes ``classes`` on device ``g``: one class's own union as it is (it is
    disjoint and sorted already: no copy of 16 bytes per interval), else merged."""
    parts = [p for p in (ctx.busy.kind(g, c) for c in classes) if p[0].size]
    if len(parts) <= 1:
        return parts[0] if parts else ctx.busy.kind(g, classes[0])
    return union(np.concatenate([p[0] for p in parts]), np.concatenate([p[1] for p in parts]))


def _rows(ctx: AnalysisContext) -> dict[tuple[int, int], list[TransferRow]]:
    """Per (rank, device): one ``TransferRow`` per direction with ops in the window."""
    lo = pl.DataFrame(
        {
            "rank": [k[0] for k in ctx.devices],
            "device": [k[1] for k in ctx.devices],
            "lo": ctx.window_lo.tolist(),
            "hi": ctx.window_hi.tolist(),
        },
        schema={"rank": pl.Int32, "device": pl.Int32, "lo": pl.Int64, "hi": pl.Int64},
    )
    copies = (
        ctx.work.filter(pl.col("kind").is_in(["memcpy", "memset"]))
        .with_columns(pl.col("rank").cast(pl.Int32), pl.col("device").cast(pl.Int32))
        .join(lo, on=["rank", "device"], how="inner")
        .filter((pl.col("start_ns") >= pl.col("lo")) & (pl.col("end_ns") <= pl.col("hi")))
        .with_columns(*_DIRECTION_COLS)
        .group_by("rank", "device", "direction")
        .agg(*_DIRECTION_AGG)
    )
    out: dict[tuple[int, int], list[TransferRow]] = {}
    for r in copies.iter_rows(named=True):
        out.setdefault((int(r["rank"]), int(r["device"])), []).append(_row(r))
    for rows in out.values():
        rows.sort(key=_report_order)
    return out


#: An op's direction (its copy kind, ``memset``) and whether it has a pageable host end.
_DIRECTION_COLS: Final = (
    pl.when(pl.col("kind") == "memset")
    .then(pl.lit("memset"))
    .otherwise(pl.col("copy_kind").cast(pl.String).fill_null("unknown"))
    .alias("direction"),
    (
        (pl.col("src_mem").cast(pl.String) == "pageable")
        | (pl.col("dst_mem").cast(pl.String) == "pageable")
    )
    .fill_null(False)
    .alias("pageable"),
)
#: The figures of a ``TransferRow`` per group.
_DIRECTION_AGG: Final = (
    pl.len().alias("count"),
    pl.col("bytes").fill_null(0).sum().alias("bytes"),
    OP_DUR_NS.sum().alias("time_ns"),
    pl.col("pageable").sum().alias("pageable_count"),
)


def _row(r: dict[str, Any]) -> TransferRow:
    return TransferRow(
        str(r["direction"]),
        int(r["count"]),
        int(r["bytes"]),
        int(r["time_ns"]),
        int(r["pageable_count"]),
    )


def _report_order(t: TransferRow) -> int:
    return DIRECTIONS.index(t.direction) if t.direction in DIRECTIONS else len(DIRECTIONS)


def _direction_rows(ops: pl.DataFrame) -> list[TransferRow]:
    """One ``TransferRow`` per direction of the copy/memset rows ``ops`` (report order)."""
    if ops.height == 0:
        return []
    grouped = ops.with_columns(*_DIRECTION_COLS).group_by("direction").agg(*_DIRECTION_AGG)
    return sorted((_row(r) for r in grouped.iter_rows(named=True)), key=_report_order)


@dataclass(frozen=True)
class CopySplit:
    """The copies of one device split into steady state and one-off (``one_off.py``): a copy
    whose start lies inside a one-off window is one-off. ``steady`` rows, union and exposed part
    as ``DeviceTransfers``; ``steady_compute_ns``: kernels and collectives in the window outside
    the one-off windows; ``hidden_copy_ns``: steady copy time compute already overlaps;
    ``one_off_*``: the one-off copies' count, bytes and the part of their union no compute
    overlaps (ns)."""

    steady: list[TransferRow]
    copy_ns: int
    exposed_copy_ns: int
    steady_compute_ns: int
    one_off_count: int
    one_off_bytes: int
    one_off_exposed_ns: int

    @property
    def hidden_copy_ns(self) -> int:
        return self.copy_ns - self.exposed_copy_ns


def copy_split(ctx: AnalysisContext, g: int, off_lo: np.ndarray, off_hi: np.ndarray) -> CopySplit:
    """Split device ``g``'s copies by the one-off windows ``[off_lo, off_hi)`` (disjoint,
    sorted, ns): see ``CopySplit``. Only ops inside the device's analysis window count."""
    lo, hi = int(ctx.window_lo[g]), int(ctx.window_hi[g])
    a, b = int(ctx.dev_lo[g]), int(ctx.dev_hi[g])
    ops = ctx.work.slice(a, b - a).filter(
        pl.col("kind").is_in(["memcpy", "memset"])
        & (pl.col("start_ns") >= lo)
        & (pl.col("end_ns") <= hi)
    )
    starts = ops.get_column("start_ns").to_numpy().astype(np.int64)
    once = np.zeros(starts.size, dtype=bool)
    if off_lo.size:  # the window opening last at or before the copy's start holds it
        i = np.searchsorted(off_lo, starts, side="right") - 1
        once = (i >= 0) & (starts < off_hi[np.maximum(i, 0)])
    ops = ops.with_columns(pl.Series("once", once, dtype=pl.Boolean))
    comp_s, comp_e = _union_of(ctx, g, KERNEL, COMMUNICATION)
    parts: dict[bool, tuple[int, int]] = {}
    for flag in (False, True):
        mine = ops.filter(pl.col("once") == flag)
        s, e = union(
            mine.get_column("start_ns").to_numpy().astype(np.int64),
            mine.get_column("end_ns").to_numpy().astype(np.int64),
        )
        parts[flag] = exposed(s, e, comp_s, comp_e, lo=lo, hi=hi)
    _, comp_off = exposed(comp_s, comp_e, off_lo, off_hi, lo=lo, hi=hi)
    rows = _direction_rows(ops.filter(~pl.col("once")))
    once_ops = ops.filter(pl.col("once"))
    return CopySplit(
        steady=rows,
        copy_ns=parts[False][0],
        exposed_copy_ns=parts[False][1],
        steady_compute_ns=comp_off,
        one_off_count=once_ops.height,
        one_off_bytes=int(once_ops.get_column("bytes").fill_null(0).sum()),
        one_off_exposed_ns=parts[True][1],
    )
