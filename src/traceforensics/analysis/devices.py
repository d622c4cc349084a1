"""The one per-device record: window, busy (total and by kind), idle, idle by cause, MFU, top
cause, counts, top kernels and the utilization pattern checked against the idle causes.

Rules (all times integer ns):

- window  = the device's analysis window (``IdleOptions.window``): ``device`` = [first GPU op
  start, last GPU op end) over its kernel, memcpy and memset rows (zero-length ops do not open
  or close it); ``trace`` = the rank's first to last recorded interval;
- busy    = length of the busy union (``busy``), ``busy_by_kind`` the union of each kind;
- idle    = window - busy = the sum of ``idle_by_cause`` (the idle pass splits it exactly);
- mfu     = the kernel pass's MFU over the device's GPU-active span (first to last GPU work),
  whichever window kind the record uses;
- transfers, copy_ns, exposed_copy_ns = copies by direction and their exposed part
  (``transfers``);
- top_kernels = the ``--top`` kernel names with most summed time; ``share_of_kernel_time`` =
  that time / the device's summed kernel time (the shares add up to at most 1),
  ``share_of_busy`` = that time / busy (more than 1 in sum when streams overlap).

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

from traceforensics.analysis.cause_table import ranked_causes
from traceforensics.analysis.context import OP_DUR_NS, AnalysisContext
from traceforensics.analysis.idle.gaps import IdleAnalysis
from traceforensics.analysis.kernels.results import KernelAnalysis
from traceforensics.analysis.transfers import DeviceTransfers, TransferRow, device_transfers
from traceforensics.analysis.utilization.patterns import CauseVerdict, check_causes
from traceforensics.analysis.utilization.timeline import DevicePattern
from traceforensics.model.session import UNKNOWN_DEVICE


@dataclass
class KernelTotal:
    """One kernel name's totals on a device.

    ``share_of_kernel_time`` = ``total_ns`` / the summed durations of all the device's kernels
    (graph-level records included): the shares of a device's kernels add up to at most 1,
    whatever the streams' overlap. ``share_of_busy`` = ``total_ns`` / the device's busy union
    (``busy``): kernels running at once on several streams each count their full time against
    one union, so these shares can add up to more than 1 (kept for JSON readers)."""

    name: str
    count: int
    total_ns: int
    mean_ns: int
    share_of_busy: float
    share_of_kernel_time: float

    def to_json(self) -> dict[str, Any]:
        return {
            "name": self.name,
            "count": self.count,
            "total_ns": self.total_ns,
            "mean_ns": self.mean_ns,
            "share_of_busy": round(self.share_of_busy, 6),
            "share_of_kernel_time": round(self.share_of_kernel_time, 6),
        }


@dataclass
class DeviceRecord:
    """Everything known about one (rank, device); see the module docstring for the rules."""

    rank: int
    device: int
    name: str
    window_kind: str
    window_start_ns: int
    window_ns: int
    busy_ns: int
    busy_by_kind: dict[str, int]
    idle_ns: int
    kernel_count: int
    memcpy_count: int
    memset_count: int
    stream_count: int
    graph_count: int = 0
    top_kernels: list[KernelTotal] = field(default_factory=list)
    idle_by_cause: dict[str, int] = field(default_factory=dict)
    n_gaps: int = 0
    comm_ns: int = 0
    exposed_comm_ns: int = 0
    mfu: float | None = None
    transfers: list[TransferRow] = field(default_factory=list)
    copy_ns: int = 0
    exposed_copy_ns: int = 0
    pattern: DevicePattern | None = None
    pattern_causes: list[CauseVerdict] = field(default_factory=list)

    @property
    def busy_fraction(self) -> float:
        """busy / window (0.0 when the window is empty)."""
        return self.busy_ns / self.window_ns if self.window_ns else 0.0

    @property
    def top_cause(self) -> str | None:
        """The idle cause with the most time (``ranked_causes``), None without idle."""
        ranked = ranked_causes(self.idle_by_cause)
        return ranked[0][0] if ranked else None


def device_records(
    ctx: AnalysisContext,
    idle: IdleAnalysis | None = None,
    kernels: KernelAnalysis | None = None,
    patterns: list[DevicePattern] | None = None,
    transfers: list[DeviceTransfers] | None = None,
) -> list[DeviceRecord]:
    """One record per device of the context, completed with whichever pass results are given
    (``transfers``: ``device_transfers(ctx)``, computed here when not given)."""
    names = {(d.rank, d.device): d.name for d in ctx.session.meta.devices}
    counts = _counts(ctx)
    top, kernel_ns = _top_kernels(ctx, ctx.options.kernels.top)
    mfu = {(m.rank, m.device): m.mfu for m in (kernels.mfu_by_device if kernels else [])}
    pats = {(p.rank, p.device): p for p in patterns or []}
    moved = device_transfers(ctx) if transfers is None else transfers
    out: list[DeviceRecord] = []
    for g, key in enumerate(ctx.devices):
        lo, hi = int(ctx.window_lo[g]), int(ctx.window_hi[g])
        busy = int(ctx.busy.busy_ns[g])
        c = counts.get(key, {})
        rec = DeviceRecord(
            rank=key[0],
            device=key[1],
            name=names.get(key, UNKNOWN_DEVICE),
            window_kind=ctx.options.idle.window,
            window_start_ns=lo,
            window_ns=hi - lo,
            busy_ns=busy,
            busy_by_kind=ctx.busy.by_kind(g),
            idle_ns=hi - lo - busy,
            kernel_count=c.get("kernel", 0),
            memcpy_count=c.get("memcpy", 0),
            memset_count=c.get("memset", 0),
            graph_count=c.get("cuda_graph", 0),
            stream_count=c.get("streams", 0),
            top_kernels=[
                KernelTotal(
                    n,
                    k,
                    t,
                    t // k,
                    t / busy if busy else 0.0,
                    t / kernel_ns[key] if kernel_ns.get(key) else 0.0,
                )
                for n, k, t in top.get(key, [])
            ],
            mfu=mfu.get(key),
            transfers=moved[g].rows,
            copy_ns=moved[g].copy_ns,
            exposed_copy_ns=moved[g].exposed_copy_ns,
            pattern=pats.get(key),
        )
        d_idle = idle.device(*key) if idle else None
        if d_idle is not None:
            rec.idle_by_cause = dict(d_idle.idle_by_cause)
            rec.n_gaps, rec.comm_ns = d_idle.n_gaps, d_idle.comm_ns
            rec.exposed_comm_ns = d_idle.exposed_comm_ns
        if rec.pattern is not None and d_idle is not None:
            rec.pattern_causes = check_causes(rec.pattern.pattern.pattern, rec.idle_by_cause)
        out.append(rec)
    return out


def _counts(ctx: AnalysisContext) -> dict[tuple[int, int], dict[str, int]]:
    """Rows per kind and distinct streams of each device."""
    rows = ctx.work.group_by("rank", "device").agg(
        (pl.col("kind") == "kernel").sum().alias("kernel"),
        (pl.col("kind") == "memcpy").sum().alias("memcpy"),
        (pl.col("kind") == "memset").sum().alias("memset"),
        (pl.col("kind") == "cuda_graph").sum().alias("cuda_graph"),
        pl.col("stream").n_unique().alias("streams"),
    )
    return {(int(r["rank"]), int(r["device"])): r for r in rows.iter_rows(named=True)}


Device = tuple[int, int]


def _top_kernels(
    ctx: AnalysisContext, n: int
) -> tuple[dict[Device, list[tuple[str, int, int]]], dict[Device, int]]:
    """``(name, count, total_ns)`` of the ``n`` kernels with most total time per device, and
    each device's summed kernel time (ns) over the same rows; a graph-level record
    (``CUDA Graph <id>``) counts as one kernel of the graph's name."""
    if n <= 0:
        return {}, {}
    per_name = (
        ctx.work.filter(pl.col("kind").is_in(["kernel", "cuda_graph"]))
        .group_by("rank", "device", "name")
        .agg(pl.len().alias("count"), OP_DUR_NS.sum().alias("total_ns"))
    )
    totals = per_name.group_by("rank", "device").agg(pl.col("total_ns").sum())
    top = (
        per_name.sort(["total_ns", "count", "name"], descending=[True, True, False])
        .group_by("rank", "device", maintain_order=True)
        .head(n)
    )
    out: dict[Device, list[tuple[str, int, int]]] = {}
    for r, d, name, count, total in top.iter_rows():
        out.setdefault((int(r), int(d)), []).append((str(name), int(count), int(total)))
    return out, {(int(r), int(d)): int(t) for r, d, t in totals.iter_rows()}
