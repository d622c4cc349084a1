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
from typing import Any

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
        .with_columns(
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
        .group_by("rank", "device", "direction")
        .agg(
            pl.len().alias("count"),
            pl.col("bytes").fill_null(0).sum().alias("bytes"),
            OP_DUR_NS.sum().alias("time_ns"),
            pl.col("pageable").sum().alias("pageable_count"),
        )
    )
    out: dict[tuple[int, int], list[TransferRow]] = {}
    for r in copies.iter_rows(named=True):
        row = TransferRow(
            str(r["direction"]),
            int(r["count"]),
            int(r["bytes"]),
            int(r["time_ns"]),
            int(r["pageable_count"]),
        )
        out.setdefault((int(r["rank"]), int(r["device"])), []).append(row)
    order = {d: i for i, d in enumerate(DIRECTIONS)}
    for rows in out.values():
        rows.sort(key=lambda t: order.get(t.direction, len(order)))
    return out
