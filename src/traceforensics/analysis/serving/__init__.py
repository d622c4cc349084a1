"""The serving view (issue 48): an inference server's iterations, their phases and the host
gaps between them. ``analyze_serving(ctx, idle)`` -> ``ServingAnalysis`` or None (not a
server). Rules: ``engines`` (the table of signs), ``iterations`` (ranges, phase, batch, graph),
``gaps`` (the host gap and its split); docs/serving.md.

The workload option (``AnalysisOptions.serving.workload``): ``auto`` classes by the signs,
``serving`` forces the view (every engine's iteration ranges tried when no sign matches),
``training`` turns it off.
"""

from __future__ import annotations

import polars as pl

from traceforensics.analysis.context import AnalysisContext
from traceforensics.analysis.idle.gaps import IdleAnalysis
from traceforensics.analysis.serving.engines import (
    ASYNC_RE,
    GAP_CLASS_IDS,
    RANGE_KINDS,
    detect_engine,
)
from traceforensics.analysis.serving.gaps import add_gaps
from traceforensics.analysis.serving.iterations import iteration_table
from traceforensics.analysis.serving.results import PHASES, Iteration, ServingAnalysis


def analyze_serving(ctx: AnalysisContext, idle: IdleAnalysis) -> ServingAnalysis | None:
    """The server's iterations, or None: not recognised (no sign; ``workload="training"``)."""
    workload = ctx.options.serving.workload
    if workload == "training":
        return None
    sign = detect_engine(ctx.name_counts)
    if sign is None and workload != "serving":
        return None
    engine = sign.engine if sign is not None else "unknown"
    table = iteration_table(ctx, (engine,) if sign is not None else None)
    if table.height == 0 and sign is not None:  # the engine's own tiers find none: try all
        table = iteration_table(ctx, None)
    table = add_gaps(ctx, table)
    its = [
        Iteration(
            rank=int(r["rank"]),
            pid=int(r["pid"]),
            device=int(r["device"]),
            start_ns=int(r["start_ns"]),
            dur_ns=int(r["end_ns"] - r["start_ns"]),
            phase=str(r["phase"]),
            batch_size=None if r["batch_size"] is None else int(r["batch_size"]),
            tokens=None if r["tokens"] is None else int(r["tokens"]),
            busy_ns=int(r["busy_ns"]),
            host_gap_ns=int(r["host_gap_ns"]),
            gap={c: int(r[f"gap_{c}"]) for c in GAP_CLASS_IDS},
            graph=bool(r["graph"]),
            gpu_start_ns=None if r["gpu_start_ns"] is None else int(r["gpu_start_ns"]),
            gpu_end_ns=None if r["gpu_end_ns"] is None else int(r["gpu_end_ns"]),
            gap_start_ns=int(r["gap_start_ns"]) if r["gpu_start_ns"] is not None else None,
            gap_end_ns=int(r["gap_end_ns"]) if r["gpu_start_ns"] is not None else None,
            queued_ahead=bool(r["queued_ahead"]),
        )
        for r in table.iter_rows(named=True)  # one object per iteration, for the JSON
    ]
    evidence = sign.evidence if sign is not None else ["forced by workload=serving"]
    loops = ctx.name_counts.filter(
        pl.col("kind").is_in(RANGE_KINDS) & pl.col("name").str.contains(ASYNC_RE)
    )
    asy = [f"{k} {nm[:80]!r} x{c}" for k, nm, c in loops.head(3).iter_rows()]
    queued = sum(i.queued_ahead for i in its)
    if queued:
        asy.append(f"{queued} iterations queued before the previous one's GPU work ended")
    return ServingAnalysis(engine, its, evidence, sign is None, bool(asy), asy)


__all__ = ["PHASES", "Iteration", "ServingAnalysis", "analyze_serving"]
