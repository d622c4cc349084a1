"""The serving findings (issue 48): ``serving_scheduler_gap`` and ``serving_eager_decode``.

Rules, per device, over the iterations (``analysis.serving``) inside the device's window:

- one-off first: an iteration whose gap window (or, for eager decode, GPU span) overlaps a
  one-off window of the device (``analysis.one_off``: warm-up, set-up, lead-in) is one-off
  work, left to the ``one_off`` finding (never counted twice);
- ``serving_scheduler_gap``: ``recoverable = sum(host_gap_ns)`` of the iterations whose gap
  window ``[gap_start_ns, gap_end_ns)`` (previous GPU end, first GPU start) lies in the
  window: overlapping the engine's host work with the running batch hides it all. The title
  gives the split (scheduler, sampling, detokenisation, other). Confidence ``high`` when
  named ranges cover at least half of it, else ``medium``. When the engine already overlaps
  scheduling (``ServingAnalysis.async_scheduling``) the remedy says so and does not advise it;
- ``serving_eager_decode``: precondition: the device replays graphs for some decode iteration
  (graphs are in use). Counted: its eager decode iterations whose batch size is known and has
  no graph-replayed decode iteration (a size with a graph runs eagerly for another reason).
  ``recoverable`` = the GPU idle inside their GPU span (first GPU start to last end, less
  busy): a replay runs the same kernels back to back. Confidence ``medium`` (a replay has its
  own cost).

``serving_idle_by_cause`` gives, per device, the idle of the windows these findings count by
idle cause, so the idle-cause findings can leave it out (no time counted twice).
"""

from __future__ import annotations

from typing import Final

import numpy as np

from traceforensics.analysis.context import AnalysisContext
from traceforensics.analysis.devices import DeviceRecord
from traceforensics.analysis.findings.busy_losses import EVIDENCE_KEPT, window_share
from traceforensics.analysis.findings.remedies import remedy
from traceforensics.analysis.findings.results import (
    SERVING_EAGER_DECODE,
    SERVING_SCHEDULER_GAP,
    Finding,
)
from traceforensics.analysis.idle.results import Evidence
from traceforensics.analysis.idle.windows import full_causes, window_gaps
from traceforensics.analysis.intervals import union
from traceforensics.analysis.one_off import one_off_windows
from traceforensics.analysis.program import Program
from traceforensics.analysis.serving import Iteration, ServingAnalysis
from traceforensics.analysis.serving.engines import GAP_CLASS_IDS
from traceforensics.model.units import fmt_ns, fmt_pct

#: Engine-specific remedies (the generic one of ``findings.remedies`` otherwise).
ENGINE_REMEDIES: Final[dict[tuple[str, str], str]] = {
    (SERVING_SCHEDULER_GAP, "vllm"): "overlap scheduling with the running batch "
    "(--async-scheduling), keep output processing off the model loop, and raise "
    "--max-num-seqs so each iteration carries a larger decode batch",
    (SERVING_SCHEDULER_GAP, "sglang"): "keep the overlap scheduler on (no "
    "--disable-overlap-schedule) and let decode batches grow (--max-running-requests)",
    (SERVING_EAGER_DECODE, "vllm"): "capture graphs up to the decode batch sizes seen "
    "(compilation_config cudagraph_capture_sizes / max_cudagraph_capture_size) or cap "
    "--max-num-seqs at the largest captured size",
    (SERVING_EAGER_DECODE, "sglang"): "raise --cuda-graph-max-bs (or list the sizes in "
    "--cuda-graph-bs) to cover the decode batch sizes seen",
}


#: The scheduler-gap remedy when the engine already overlaps scheduling with the GPU.
ASYNC_ON_REMEDY: Final = (
    "scheduling already overlaps the GPU ({evidence}): the gaps left are the host work that "
    "cannot: keep output processing (detokenisation, stop checks) off the model loop, trim "
    "the scheduler's per-step work, and let each iteration carry a larger decode batch"
)


def _remedy(category: str, serving: ServingAnalysis, program: Program) -> str:
    if category == SERVING_SCHEDULER_GAP and serving.async_scheduling:
        return ASYNC_ON_REMEDY.format(evidence="; ".join(serving.async_evidence[:2]))
    return ENGINE_REMEDIES.get((category, serving.engine)) or remedy(category, program)


def _one_off(ctx: AnalysisContext, rec: DeviceRecord) -> tuple[np.ndarray, np.ndarray]:
    key = (rec.rank, rec.device)
    if key not in ctx.devices:
        return np.zeros(0, np.int64), np.zeros(0, np.int64)
    w = one_off_windows(ctx, ctx.devices.index(key))
    return np.asarray(w.lo, np.int64), np.asarray(w.hi, np.int64)


def _overlaps(lo: np.ndarray, hi: np.ndarray, a: int, b: int) -> bool:
    """Whether ``[a, b)`` meets one of the sorted disjoint ``[lo, hi)``."""
    k = int(np.searchsorted(hi, a, side="right"))  # the first window ending after a
    return k < lo.size and int(lo[k]) < b


def _gap_iterations(
    ctx: AnalysisContext, serving: ServingAnalysis, rec: DeviceRecord
) -> list[Iteration]:
    """The device's iterations with a host gap lying inside its window and outside its one-off
    windows."""
    lo, hi = rec.window_start_ns, rec.window_start_ns + rec.window_ns
    olo, ohi = _one_off(ctx, rec)
    return [
        i
        for i in serving.iterations
        if (i.rank, i.device) == (rec.rank, rec.device)
        and i.host_gap_ns > 0
        and i.gap_start_ns is not None
        and i.gap_end_ns is not None
        and i.gap_start_ns >= lo
        and i.gap_end_ns <= hi
        and not _overlaps(olo, ohi, i.gap_start_ns, i.gap_end_ns)
    ]


def _eager_iterations(
    ctx: AnalysisContext, serving: ServingAnalysis, rec: DeviceRecord
) -> list[Iteration]:
    """The device's eager decode iterations inside its window and outside its one-off windows
    whose batch size has no graph; none unless it replays a graph for some decode iteration
    (the precondition)."""
    lo, hi = rec.window_start_ns, rec.window_start_ns + rec.window_ns
    olo, ohi = _one_off(ctx, rec)
    mine = [
        i
        for i in serving.iterations
        if (i.rank, i.device) == (rec.rank, rec.device) and i.phase == "decode"
    ]
    graphed = {i.batch_size for i in mine if i.graph}
    if not graphed:
        return []
    return [
        i
        for i in mine
        if not i.graph
        and i.batch_size is not None
        and i.batch_size not in graphed
        and i.gpu_start_ns is not None
        and i.gpu_end_ns is not None
        and i.gpu_start_ns >= lo
        and i.gpu_end_ns <= hi
        and not _overlaps(olo, ohi, i.gpu_start_ns, i.gpu_end_ns)
    ]


def _gap_window(i: Iteration) -> tuple[int, int]:
    # [previous GPU end, first GPU start): its idle is host_gap_ns (GPU work launched outside
    # the iterations, e.g. a sampler, may run in it: busy, not idle)
    assert i.gap_start_ns is not None and i.gap_end_ns is not None
    return i.gap_start_ns, i.gap_end_ns


def scheduler_gap_finding(
    ctx: AnalysisContext, serving: ServingAnalysis, rec: DeviceRecord, program: Program
) -> list[Finding]:
    """The device's ``serving_scheduler_gap`` finding, or none (module docstring)."""
    its = _gap_iterations(ctx, serving, rec)
    ns = sum(i.host_gap_ns for i in its)
    if ns <= 0:
        return []
    split = {c: sum(i.gap.get(c, 0) for i in its) for c in GAP_CLASS_IDS}
    share = window_share(ns, rec)
    parts = ", ".join(f"{c} {fmt_ns(v)}" for c, v in split.items() if v > 0)
    decode = sum(i.phase == "decode" for i in its)
    title = (
        f"CPU work between {len(its)} iterations ({decode} decode) leaves the GPU idle "
        f"{fmt_ns(ns)} ({fmt_pct(share)} of the window): {parts}"
    )
    worst = sorted(its, key=lambda i: -i.host_gap_ns)[:EVIDENCE_KEPT]
    evidence = [
        Evidence(
            SERVING_SCHEDULER_GAP,
            "gap",
            f"before {i.phase} iteration at {i.start_ns}",
            _gap_window(i)[0],
            i.host_gap_ns,
            None,
            ", ".join(f"{c} {fmt_ns(v)}" for c, v in i.gap.items() if v > 0),
        )
        for i in worst
    ]
    named = ns - split.get("other", 0)
    figures = {
        "iterations": len(its),
        "host_gap_ns": ns,
        "gap": split,
        "engine": serving.engine,
        "async_scheduling": serving.async_scheduling,
    }
    confidence = "high" if named * 2 >= ns else "medium"
    cat = SERVING_SCHEDULER_GAP
    return [
        Finding(
            cat,
            rec.rank,
            rec.device,
            ns,
            share,
            title,
            _remedy(cat, serving, program),
            confidence,
            evidence,
            figures,
        )
    ]


def eager_decode_finding(
    ctx: AnalysisContext, serving: ServingAnalysis, rec: DeviceRecord, program: Program
) -> list[Finding]:
    """The device's ``serving_eager_decode`` finding, or none (module docstring)."""
    eager = _eager_iterations(ctx, serving, rec)
    idle = [max(0, (i.gpu_end_ns or 0) - (i.gpu_start_ns or 0) - i.busy_ns) for i in eager]
    ns = sum(idle)
    if ns <= 0:
        return []
    mine = [i for i in serving.iterations if (i.rank, i.device) == (rec.rank, rec.device)]
    graphed = sorted(
        {i.batch_size for i in mine if i.graph and i.phase == "decode" and i.batch_size is not None}
    )
    sizes = sorted({i.batch_size for i in eager if i.batch_size is not None})
    share = window_share(ns, rec)
    shown = ", ".join(map(str, sizes)) or "unknown"
    title = (
        f"decode runs eagerly for batch sizes without a captured graph ({shown}): "
        f"{len(eager)} iterations leave the GPU idle {fmt_ns(ns)} between their kernels "
        f"({fmt_pct(share)} of the window); graphs replay for "
        f"{', '.join(map(str, graphed)) or 'other iterations'}"
    )
    order = np.argsort(-np.asarray(idle, dtype=np.int64), kind="stable")[:EVIDENCE_KEPT]
    evidence = [
        Evidence(
            SERVING_EAGER_DECODE,
            "iteration",
            f"decode batch {eager[k].batch_size} (eager)",
            eager[k].start_ns,
            eager[k].dur_ns,
            None,
            f"GPU idle {fmt_ns(idle[k])} inside",
        )
        for k in order.tolist()
    ]
    figures = {
        "iterations": len(eager),
        "idle_ns": ns,
        "eager_batch_sizes": sizes,
        "graph_batch_sizes": graphed,
    }
    cat = SERVING_EAGER_DECODE
    return [
        Finding(
            cat,
            rec.rank,
            rec.device,
            ns,
            share,
            title,
            _remedy(cat, serving, program),
            "medium",
            evidence,
            figures,
        )
    ]


def serving_findings(
    ctx: AnalysisContext, records: list[DeviceRecord], serving: ServingAnalysis, program: Program
) -> list[Finding]:
    """The serving findings of every device (rules in the module docstring)."""
    out: list[Finding] = []
    for rec in records:
        out += scheduler_gap_finding(ctx, serving, rec, program)
        out += eager_decode_finding(ctx, serving, rec, program)
    return out


def serving_windows(
    ctx: AnalysisContext, serving: ServingAnalysis, rec: DeviceRecord
) -> tuple[np.ndarray, np.ndarray]:
    """The disjoint windows (ns, sorted) whose idle the device's serving findings count: the
    host gaps, and the GPU spans of the eager decode iterations when that finding applies
    (one-off windows left out)."""
    spans = [_gap_window(i) for i in _gap_iterations(ctx, serving, rec)]
    spans += [
        (i.gpu_start_ns or 0, i.gpu_end_ns or 0) for i in _eager_iterations(ctx, serving, rec)
    ]
    lo = np.asarray([s for s, _ in spans], dtype=np.int64)
    hi = np.asarray([e for _, e in spans], dtype=np.int64)
    return union(lo, hi) if lo.size else (lo, hi)


def serving_idle_by_cause(
    ctx: AnalysisContext, records: list[DeviceRecord], serving: ServingAnalysis | None
) -> dict[tuple[int, int], dict[str, int]]:
    """Per device, the idle (ns) by idle cause inside ``serving_windows``: what the serving
    findings re-describe, for the idle-cause findings to leave out (``without_serving``)."""
    out: dict[tuple[int, int], dict[str, int]] = {}
    if serving is None:
        return out
    for rec in records:
        key = (rec.rank, rec.device)
        if key not in ctx.devices:
            continue
        lo, hi = serving_windows(ctx, serving, rec)
        if lo.size == 0:
            continue
        dev = np.full(lo.size, ctx.devices.index(key), dtype=np.int64)
        wg = window_gaps(ctx, dev, lo, hi, keep=0)
        out[key] = full_causes(wg.by_window.sum(axis=0))
    return out


def without_serving(steady: dict[str, int], taken: dict[str, int]) -> dict[str, int]:
    """``steady`` idle by cause less the serving findings' share (never below 0)."""
    return {c: ns - min(ns, max(taken.get(c, 0), 0)) for c, ns in steady.items()}


__all__ = [
    "ASYNC_ON_REMEDY",
    "ENGINE_REMEDIES",
    "eager_decode_finding",
    "scheduler_gap_finding",
    "serving_findings",
    "serving_idle_by_cause",
    "serving_windows",
    "without_serving",
]
