"""Step detection and the per-step idle breakdown.

Step sources, first that yields steps wins (per rank):
1. GPU-side step annotations (Kineto ``gpu_user_annotation`` ``ProfilerStep#N``): their span on
   the device is recorded directly.
2. Host ranges (annotation/cpu_op) named ``ProfilerStep#N`` — or matching
   ``GapOptions.step_pattern`` — else NVTX/user ranges named like steps or iterations
   (``GENERIC_STEP_RE``). Their device-side span is from the first to the last GPU work launched
   (same rank and pid) while the range was open.

Step windows on a device (``GapOptions.step_window``)::

    GPU work:   |==step 1==|....idle....|==step 2==|..|==step 3==|
    annotation: [  step 1  )            [  step 2  )  [  step 3  )
    tiled:      [  step 1  )[          step 2      )[    step 3  )

"tiled" (default): a step runs from the previous step's last GPU work to its own last GPU work,
so the idle before a step's first GPU work (its data loading, its host prologue) is charged to
that step; "annotation" uses the device-side spans as they are.
"""

from __future__ import annotations

import numpy as np
import polars as pl

from traceforensics.analysis.idle.causes import (
    CAUSES,
    OUTLIER_MAD_SIGMAS,
    OUTLIER_MIN_EXCESS_FRACTION,
)
from traceforensics.analysis.idle.comm import comm_in_window
from traceforensics.analysis.context import GapContext
from traceforensics.analysis.idle.results import GapOptions, StepOutlier, StepStats, StepSummary
from traceforensics.analysis.intervals import I64, clip, total
from traceforensics.analysis.idle.windows import full_causes, window_gaps

PROFILER_STEP_RE = r"^ProfilerStep#\d+$"
#: NVTX/user ranges named like a step or iteration: "step 3", "train_step", "Warm-up Step 1",
#: "iteration_10" (not "Optimizer.step#SGD.step": the word must follow a space, _, #, : or -).
GENERIC_STEP_RE = r"(?i)(^|[\s_#:-])(step|iteration|iter)([\s_#:-]*\d+)?$"

#: Columns of a step-window frame (device-side step spans).
_STEP_WINDOW_SCHEMA: dict[str, pl.DataType] = {
    "rank": pl.Int32(),
    "device": pl.Int32(),
    "name": pl.String(),
    "start_ns": pl.Int64(),
    "end_ns": pl.Int64(),
    "source": pl.String(),
}


def detect_steps(ctx: GapContext, step_pattern: str | None) -> pl.DataFrame:
    """Device-side step spans: columns rank, device, name, start_ns, end_ns, source."""
    ev = ctx.events
    patterns = [step_pattern] if step_pattern else [PROFILER_STEP_RE, GENERIC_STEP_RE]
    out: list[pl.DataFrame] = []
    done: set[int] = set()
    for pat in patterns:
        named = ev.filter(pl.col("name").cast(pl.String).str.contains(pat))
        gpu = (
            named.filter(
                (pl.col("kind") == "gpu_annotation")
                & pl.col("device").is_not_null()
                & ~pl.col("rank").is_in(list(done))
            )
            .group_by("rank", "device", pl.col("name").cast(pl.String))
            .agg(pl.col("start_ns").min(), pl.col("end_ns").max())
            .with_columns(pl.lit("gpu_annotation").alias("source"))
        )
        done |= set(gpu.get_column("rank").to_list())
        host = named.filter(
            pl.col("kind").is_in(["annotation", "cpu_op"]) & ~pl.col("rank").is_in(list(done))
        )
        mapped = _host_steps_on_device(ctx, host)
        done |= set(mapped.get_column("rank").to_list())
        out.extend(f for f in (gpu, mapped) if f.height)
    if not out:
        return pl.DataFrame(schema=_STEP_WINDOW_SCHEMA)
    cols = ["rank", "device", "name", "start_ns", "end_ns", "source"]
    return pl.concat(
        [f.select(cols).cast({"rank": pl.Int32, "device": pl.Int32}) for f in out]
    ).sort("rank", "device", "start_ns")


def _host_steps_on_device(ctx: GapContext, host: pl.DataFrame) -> pl.DataFrame:
    """Map host step ranges to the device span of the GPU work launched inside them."""
    empty = pl.DataFrame(schema=_STEP_WINDOW_SCHEMA)
    if host.height == 0:
        return empty
    steps = (
        host.select(
            "rank",
            pl.col("pid").fill_null(-1).alias("l_pid"),
            pl.col("name").cast(pl.String).alias("step"),
            pl.col("start_ns").alias("s_start"),
            pl.col("end_ns").alias("s_end"),
        )
        .with_row_index("step_row")
        .sort("s_start")
    )
    launched = (
        ctx.op_frame.select("rank", "device", "l_pid")
        .with_columns(
            pl.Series("ls", ctx.ops.ls),
            pl.Series("o_start", ctx.ops.start),
            pl.Series("o_end", ctx.ops.end),
            pl.Series("has", ctx.ops.thr >= 0),
        )
        .filter(pl.col("has"))
        .sort("ls")
    )
    if launched.height == 0:
        return empty
    j = launched.join_asof(
        steps,
        left_on="ls",
        right_on="s_start",
        by=["rank", "l_pid"],
        strategy="backward",
        check_sortedness=False,
    ).filter(pl.col("s_end").is_not_null() & (pl.col("ls") < pl.col("s_end")))
    return (
        j.group_by("rank", "device", "step_row", "step")
        .agg(pl.col("o_start").min().alias("start_ns"), pl.col("o_end").max().alias("end_ns"))
        .select(
            "rank",
            "device",
            pl.col("step").alias("name"),
            "start_ns",
            "end_ns",
            pl.lit("host_range").alias("source"),
        )
    )


def step_breakdown(
    ctx: GapContext,
    opts: GapOptions,
    comm_cache: list[tuple[I64, I64, I64, I64]],
) -> tuple[list[StepStats], list[StepSummary]]:
    """Per-step busy/idle-by-cause and per-device step statistics."""
    spans = detect_steps(ctx, opts.step_pattern)
    if spans.height == 0:
        return [], []
    dev_index = {rd: g for g, rd in enumerate(ctx.devices)}
    dev_frame = pl.DataFrame(
        {
            "rank": [r for r, _ in ctx.devices],
            "device": [d for _, d in ctx.devices],
            "dev": list(range(len(ctx.devices))),
        },
        schema={"rank": pl.Int32, "device": pl.Int32, "dev": pl.Int64},
    )
    spans = spans.join(dev_frame, on=["rank", "device"]).sort("dev", "start_ns")
    if opts.step_window == "tiled":
        spans = spans.with_columns(
            pl.col("end_ns").shift(1).over("dev").fill_null(pl.col("start_ns")).alias("start_ns")
        )
    dev = spans.get_column("dev").to_numpy().astype(np.int64)
    lo = spans.get_column("start_ns").to_numpy().astype(np.int64)
    hi = np.maximum(spans.get_column("end_ns").to_numpy().astype(np.int64), lo)
    wg = window_gaps(ctx, dev, lo, hi)
    steps: list[StepStats] = []
    names = spans.get_column("name").to_list()
    for k in range(dev.size):
        m = wg.win == k
        row = wg.matrix[m].sum(axis=0) if m.any() else np.zeros(len(CAUSES), np.int64)
        idle = int((wg.end[m] - wg.start[m]).sum())
        us, ue = clip(*ctx.dev_union(int(dev[k])), int(lo[k]), int(hi[k]))
        busy = total(us, ue)
        comm_ns, exposed = comm_in_window(*comm_cache[int(dev[k])], lo=int(lo[k]), hi=int(hi[k]))
        rank, device = ctx.devices[int(dev[k])]
        steps.append(
            StepStats(
                rank,
                device,
                str(names[k]),
                int(lo[k]),
                int(hi[k] - lo[k]),
                busy,
                idle,
                full_causes(row),
                exposed,
                comm_ns,
            )
        )
    sources = dict(
        zip(spans.get_column("dev").to_list(), spans.get_column("source").to_list(), strict=True)
    )
    return steps, summarize(steps, sources, dev_index)


def summarize(
    steps: list[StepStats], sources: dict[int, str], dev_index: dict[tuple[int, int], int]
) -> list[StepSummary]:
    """Mean/p50/p95/CV of step time per (rank, device), and outlier steps with their reason.

    Outlier: longer than the median by more than ``OUTLIER_MIN_EXCESS_FRACTION`` of it and by
    more than ``OUTLIER_MAD_SIGMAS`` robust sigmas (1.4826·MAD). Reason: the component (busy
    time, or idle of one cause) with the largest excess over its median across the steps.
    """
    out: list[StepSummary] = []
    keys = sorted({(s.rank, s.device) for s in steps})
    for key in keys:
        group = [s for s in steps if (s.rank, s.device) == key]
        d = np.array([s.dur_ns for s in group], dtype=np.float64)
        mean = float(d.mean())
        med = float(np.median(d))
        mad = float(np.median(np.abs(d - med)))
        limit = med + max(OUTLIER_MIN_EXCESS_FRACTION * med, OUTLIER_MAD_SIGMAS * 1.4826 * mad)
        med_busy = float(np.median([s.busy_ns for s in group]))
        med_cause = {c: float(np.median([s.idle_by_cause[c] for s in group])) for c in CAUSES}
        outliers: list[StepOutlier] = []
        for s in group:
            if len(group) < 3 or s.dur_ns <= limit:
                continue
            excess = {c: s.idle_by_cause[c] - med_cause[c] for c in CAUSES}
            top = max(excess, key=lambda c: excess[c])
            busy_x = s.busy_ns - med_busy
            if busy_x >= excess[top]:
                reason, top = f"GPU busy {busy_x / 1e6:+.2f} ms vs the median step", "busy"
            else:
                reason = f"idle {top} {excess[top] / 1e6:+.2f} ms vs the median step"
            outliers.append(StepOutlier(s.name, s.dur_ns, round(s.dur_ns - med), reason, top))
        out.append(
            StepSummary(
                rank=key[0],
                device=key[1],
                source=sources.get(dev_index[key], ""),
                n_steps=len(group),
                mean_ns=mean,
                p50_ns=med,
                p95_ns=float(np.percentile(d, 95)),
                cv=float(d.std() / mean) if mean > 0 else 0.0,
                outliers=outliers,
            )
        )
    return out
