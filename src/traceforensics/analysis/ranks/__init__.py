"""The job across its ranks: collectives matched across ranks and split into waiting and
transfer (``collectives``), the per-rank table, the slowest rank of each step and the straggler
with its cause (``straggler``). With one rank, the split is estimated and said to be.

``analyze_ranks(ctx, records)`` takes the prepared context and the device records of the other
passes (``analyze`` passes them); called alone on a session it runs those passes first, so it
gives the same answer.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import replace
from typing import Any

import polars as pl

from traceforensics.analysis.context import AnalysisContext, as_context
from traceforensics.analysis.devices import DeviceRecord, device_records
from traceforensics.analysis.idle.gaps import IdleAnalysis, analyze_idle
from traceforensics.analysis.kernels.forensics import analyze_kernels
from traceforensics.analysis.options import AnalysisOptions
from traceforensics.analysis.ranks.collectives import collective_kernels, match_collectives
from traceforensics.analysis.ranks.results import RankAnalysis, RankRow, StepRow, Straggler
from traceforensics.analysis.ranks.straggler import (
    blame,
    find_straggler,
    most_waited_for,
    rank_rows,
    step_medians,
    step_rows,
    waits_for,
)
from traceforensics.analysis.transfers import device_transfers
from traceforensics.analysis.utilization.timeline import analyze_utilization
from traceforensics.model.session import TraceSession


def analyze_ranks(
    source: AnalysisContext | TraceSession,
    options: AnalysisOptions | None = None,
    done: tuple[list[DeviceRecord], IdleAnalysis] | None = None,
) -> RankAnalysis:
    """The multi-rank view of one session (module docstring); ``done``: the device records and
    idle result ``analyze`` already has."""
    ctx = as_context(source, options)
    records, idle = done if done is not None else _records(ctx)
    return rank_analysis(
        collective_kernels(ctx.work, ctx.session.args, ctx.device_table, ctx.tree),
        ctx.steps,
        ctx.devices,
        records,
        idle,
        ctx.session.meta.distributed,
    )


def rank_analysis(
    kernels: pl.DataFrame,
    steps: pl.DataFrame,
    devs: list[tuple[int, int]],
    records: list[DeviceRecord],
    idle: IdleAnalysis,
    distributed: Mapping[str, Any],
) -> RankAnalysis:
    """The multi-rank view from its parts: the collective kernels (``collective_kernels``, with
    ``dev`` = index into ``devs``), the step table (``AnalysisContext.steps``, same ``dev``),
    the (rank, device) of each ``dev``, the device records and idle result of every device, and
    the session's ``meta.distributed``. Parts analysed apart (one rank each) give the same
    answer once their ``dev`` numbers are made global."""
    coll = match_collectives(kernels)
    charged = blame(coll)
    rows = rank_rows(records, coll, charged, steps, devs)
    straggler = find_straggler(rows, charged, devs, step_medians(idle))
    rows = _who_waits_for_whom(rows, coll.rows, devs, straggler)
    loaded = len({r.rank for r in rows})
    return RankAnalysis(
        world_size=_world_size(distributed.get("world_size"), loaded),
        rank_source=str(distributed.get("rank_source", "trace")),
        matching=coll.method,
        matched_collectives=coll.matched,
        per_rank=rows,
        steps=step_rows(charged, steps),
        straggler=straggler,
        collectives=coll.rows,
        notes=coll.notes,
    )


def _who_waits_for_whom(
    rows: list[RankRow],
    coll: pl.DataFrame,
    devs: list[tuple[int, int]],
    straggler: Straggler | None,
) -> list[RankRow]:
    """``rows`` with the rank each waits for: the straggler (``waiting_for``, and the time
    waiting for it) and the rank it waited on longest (``waits_most_for``)."""
    index = {rd: g for g, rd in enumerate(devs)}
    most = most_waited_for(coll)
    lead = None if straggler is None else index.get((straggler.rank, straggler.device))
    for_lead = {} if lead is None else waits_for(coll, lead)
    out = []
    for row in rows:
        g = index.get((row.rank, row.device), -1)
        last, ns = most.get(g, (None, 0))
        new = replace(
            row, waits_most_for=None if last is None else devs[last][0], waits_most_for_ns=ns
        )
        if straggler is not None and row.rank != straggler.rank:
            new = replace(new, waiting_for=straggler.rank, wait_for_straggler_ns=for_lead.get(g, 0))
        out.append(new)
    return out


def _world_size(value: object, loaded: int) -> int:
    """The job's world size as the trace states it (it may hold only some ranks), else the
    number of ranks loaded."""
    try:
        size = int(str(value))
    except ValueError:
        return loaded
    return max(size, loaded)


def _records(ctx: AnalysisContext) -> tuple[list[DeviceRecord], IdleAnalysis]:
    idle = analyze_idle(ctx)
    records = device_records(
        ctx, idle, analyze_kernels(ctx), analyze_utilization(ctx), device_transfers(ctx)
    )
    return records, idle


__all__ = ["RankAnalysis", "RankRow", "StepRow", "Straggler", "analyze_ranks", "rank_analysis"]
