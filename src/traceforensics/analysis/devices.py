"""Per-device summary: window, busy, idle, counts and top kernels.

Rules (all times integer ns):

- window  = [first GPU op start, last GPU op end) over the device's kernel, memcpy and memset rows
  (syncs, annotations and zero-length ops do not open or close the window);
- busy    = length of the union of kernel, memcpy and memset intervals over all streams of the
  device (overlapping streams count once; sync records are waits, not work);
- idle    = window - busy.

      stream 7:   |==k1==|    |==k3==|
      stream 9:       |==k2==|           |=m=|
      busy:       |=============|==|      |=|     (union)
      idle:                      gap   gap
      window:     [first start ................ last end)
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import polars as pl

from traceforensics.analysis.intervals import total, union
from traceforensics.model.schema import BUSY_KINDS
from traceforensics.model.session import TraceSession


@dataclass
class KernelTotal:
    """One kernel name's totals on a device."""

    name: str
    count: int
    total_ns: int
    mean_ns: int
    share_of_busy: float


@dataclass
class DeviceSummary:
    """The first-pass numbers for one (rank, device)."""

    rank: int
    device: int
    name: str
    window_start_ns: int
    window_ns: int
    busy_ns: int
    idle_ns: int
    kernel_count: int
    memcpy_count: int
    memset_count: int
    stream_count: int
    top_kernels: list[KernelTotal] = field(default_factory=list)

    @property
    def utilization(self) -> float:
        """busy / window (0.0 when the window is empty)."""
        return self.busy_ns / self.window_ns if self.window_ns else 0.0

    def to_json(self) -> dict[str, Any]:
        return {
            "rank": self.rank,
            "device": self.device,
            "name": self.name,
            "window_start_ns": self.window_start_ns,
            "window_ns": self.window_ns,
            "busy_ns": self.busy_ns,
            "idle_ns": self.idle_ns,
            "busy_fraction": round(self.utilization, 6),
            "kernel_count": self.kernel_count,
            "memcpy_count": self.memcpy_count,
            "memset_count": self.memset_count,
            "stream_count": self.stream_count,
            "top_kernels": [
                {
                    "name": k.name,
                    "count": k.count,
                    "total_ns": k.total_ns,
                    "mean_ns": k.mean_ns,
                    "share_of_busy": round(k.share_of_busy, 6),
                }
                for k in self.top_kernels
            ],
        }


@dataclass
class Summary:
    """Summary of every device in a session, plus host-only facts."""

    devices: list[DeviceSummary]
    event_count: int
    host_event_count: int

    def device(self, rank: int, device: int) -> DeviceSummary | None:
        for d in self.devices:
            if d.rank == rank and d.device == device:
                return d
        return None


def summarize(session: TraceSession, top_kernels: int = 10) -> Summary:
    """Compute the per-device summary of a session (pure; no printing)."""
    ev = session.events
    gpu = ev.filter(pl.col("kind").is_in(list(BUSY_KINDS))).select(
        "rank", "device", "stream", "kind", "name", "start_ns", "dur_ns"
    )
    names = {(d.rank, d.device): d.name for d in session.meta.devices}
    devices: list[DeviceSummary] = []
    for (rank, device), part in sorted(
        gpu.partition_by(["rank", "device"], as_dict=True).items(),
        key=lambda kv: (int(kv[0][0]), int(kv[0][1])),  # type: ignore[arg-type]
    ):
        starts = part.get_column("start_ns").to_numpy()
        ends = starts + part.get_column("dur_ns").to_numpy()
        us, ue = union(starts, ends)
        busy = total(us, ue)
        # zero-length ops cover no time and do not open the window (the gap pass agrees)
        w_start = int(us[0]) if us.size else int(starts.min())
        window = int(ue[-1]) - w_start if us.size else 0
        counts = dict(
            part.group_by("kind").len().select(pl.col("kind").cast(pl.String), "len").iter_rows()
        )
        kernels = part.filter(pl.col("kind") == "kernel")
        top = (
            kernels.group_by("name")
            .agg(pl.len().alias("count"), pl.col("dur_ns").sum().alias("total_ns"))
            .sort(["total_ns", "count"], descending=True)
            .head(top_kernels)
        )
        devices.append(
            DeviceSummary(
                rank=int(rank),  # type: ignore[call-overload]
                device=int(device),  # type: ignore[call-overload]
                name=names.get((int(rank), int(device)), ""),  # type: ignore[call-overload]
                window_start_ns=w_start,
                window_ns=window,
                busy_ns=busy,
                idle_ns=window - busy,
                kernel_count=int(counts.get("kernel", 0)),
                memcpy_count=int(counts.get("memcpy", 0)),
                memset_count=int(counts.get("memset", 0)),
                stream_count=int(part.get_column("stream").n_unique()),
                top_kernels=[
                    KernelTotal(
                        name=str(n),
                        count=int(c),
                        total_ns=int(t),
                        mean_ns=int(t) // int(c),
                        share_of_busy=int(t) / busy if busy else 0.0,
                    )
                    for n, c, t in top.select(
                        pl.col("name").cast(pl.String), "count", "total_ns"
                    ).iter_rows()
                ],
            )
        )
    return Summary(
        devices=devices,
        event_count=ev.height,
        host_event_count=ev.height - ev.filter(pl.col("device").is_not_null()).height,
    )
