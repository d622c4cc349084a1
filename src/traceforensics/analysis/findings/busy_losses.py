"""The findings about busy time: communication no compute hides, copies, inefficient kernels.

Each builder takes one device record and returns its finding (or none); the estimates are in
``estimates`` and docs/findings.md; ``window_share`` is the share of a device window both use.
"""

from __future__ import annotations

import polars as pl

from traceforensics.analysis.context import OP_DUR_NS, AnalysisContext
from traceforensics.analysis.devices import DeviceRecord
from traceforensics.analysis.findings import estimates as est
from traceforensics.analysis.findings.preconditions import apply
from traceforensics.analysis.findings.remedies import attention_remedy, remedy
from traceforensics.analysis.findings.results import (
    EXPOSED_COMMUNICATION,
    KERNEL_EFFICIENCY,
    Finding,
)
from traceforensics.analysis.idle.results import Evidence
from traceforensics.analysis.kernels.flops import parse_json_list
from traceforensics.analysis.kernels.results import OpRow
from traceforensics.analysis.names import matching
from traceforensics.analysis.program import Program
from traceforensics.model.schema import ARG_INPUT_DIMS
from traceforensics.model.units import fmt_ns, fmt_pct

#: Evidence items kept per finding.
EVIDENCE_KEPT = 3
#: Smallest sequence length whose S x S softmax counts as materialised attention.
MATERIALISED_MIN_SEQ = 512


def window_share(ns: int, rec: DeviceRecord) -> float:
    """``ns`` as a share of the device's window."""
    return ns / rec.window_ns if rec.window_ns else 0.0


def within_window(ns: float, rec: DeviceRecord) -> int:
    """``ns`` (integer ns) at most the device's window: no change gives back more time than
    the window holds. A sum of per-op kernel times exceeds it only on impossible input
    (duplicated rows, a kernel lasting years: ``ingest.suspects`` warns of both)."""
    return int(max(0, min(ns, rec.window_ns)))


def window_kernels(ctx: AnalysisContext, rec: DeviceRecord) -> pl.DataFrame:
    """The device's kernel rows of ``ctx.work`` that lie inside its window (the one filter the
    kernel-name findings share)."""
    lo, hi = rec.window_start_ns, rec.window_start_ns + rec.window_ns
    return ctx.work.filter(
        (pl.col("rank") == rec.rank)
        & (pl.col("device") == rec.device)
        & (pl.col("kind") == "kernel")
        & (pl.col("start_ns") >= lo)
        & (pl.col("end_ns") <= hi)
    )


def comm_finding(ctx: AnalysisContext, rec: DeviceRecord, program: Program) -> Finding:
    lo, hi = rec.window_start_ns, rec.window_start_ns + rec.window_ns
    top = (
        ctx.work.filter(
            (pl.col("rank") == rec.rank)
            & (pl.col("device") == rec.device)
            & pl.col("is_comm").fill_null(False)
            & (pl.col("start_ns") >= lo)
            & (pl.col("end_ns") <= hi)
        )
        .with_columns(OP_DUR_NS)
        .sort("dur_ns", descending=True)
        .head(EVIDENCE_KEPT)
    )
    proof = [
        Evidence(EXPOSED_COMMUNICATION, "kernel", str(n), int(s), int(d), None, "collective")
        for n, s, d in top.select("name", "start_ns", "dur_ns").iter_rows()
    ]
    ns, share = rec.exposed_comm_ns, window_share(rec.exposed_comm_ns, rec)
    title = (
        f"{fmt_ns(ns)} of communication ({fmt_pct(share)} of the window) not overlapped by "
        f"compute, of {fmt_ns(rec.comm_ns)} in all"
    )
    figures = {"comm_ns": rec.comm_ns, "exposed_comm_ns": ns}
    return Finding(
        EXPOSED_COMMUNICATION,
        rec.rank,
        rec.device,
        ns,
        share,
        title,
        remedy(EXPOSED_COMMUNICATION, program),
        "medium",
        proof,
        figures,
    )


def attention_scores(ctx: AnalysisContext) -> dict[int, tuple[int, Evidence]]:
    """Per rank, the largest materialised attention: a softmax whose input's last two dims are
    equal and at least ``MATERIALISED_MIN_SEQ`` (an S x S score matrix written to memory; a
    fused attention kernel never stores it). ``(S, the softmax op as evidence)``. Names are
    matched and shapes parsed once per distinct value; the events are joined, not looked up."""
    soft = ctx.cpu_ops.filter(matching(ctx.cpu_ops, "softmax"))
    if soft.height == 0:
        return {}
    dims = ctx.args.filter(pl.col("key").cast(pl.String) == ARG_INPUT_DIMS).select(
        "event_id", "value"
    )
    rows = soft.select("rank", "event_id").join(dims, on="event_id", how="inner")
    seq = {v: _square_seq(v) for v in rows.get_column("value").unique().to_list()}
    rows = rows.with_columns(
        pl.col("value").replace_strict(seq, return_dtype=pl.Int64, default=None).alias("seq")
    ).filter(pl.col("seq").is_not_null())
    if rows.height == 0:
        return {}
    top = (
        rows.sort(["seq", "event_id"], descending=[True, False])
        .group_by("rank", maintain_order=True)
        .first()
        .join(ctx.session.events.select("event_id", "start_ns", "dur_ns", "name"), on="event_id")
    )
    out: dict[int, tuple[int, Evidence]] = {}
    for rank, seq_len, value, start, dur, name in top.select(
        "rank", "seq", "value", "start_ns", "dur_ns", pl.col("name").cast(pl.String)
    ).iter_rows():
        shape = (parse_json_list(value) or [[]])[0]
        detail = f"softmax over {seq_len} x {seq_len} scores (input {shape})"
        out[int(rank)] = (
            int(seq_len),
            Evidence(KERNEL_EFFICIENCY, "cpu_op", name, start, dur, None, detail),
        )
    return out


def _square_seq(value: str | None) -> int | None:
    """S when the first input of an ``Input Dims`` value ends in S x S with S large enough."""
    first = (parse_json_list(value) or [[]])[0]
    shape = [x for x in first if type(x) is int] if isinstance(first, list) else []
    if len(shape) < 2 or shape[-1] != shape[-2] or shape[-1] < MATERIALISED_MIN_SEQ:
        return None
    return int(shape[-1])


def efficiency_finding(
    rec: DeviceRecord, ops: list[OpRow], program: Program, scores: tuple[int, Evidence] | None
) -> list[Finding]:
    """Roofline shortfall summed over the device's modelled ops (suspect figures skipped);
    an op Nsight Compute measured is judged on its measured figures instead (``estimates``:
    ``ATTAINABLE_SOL``), cited as measured, and the remedy follows its measured class
    (``bound_remedy``). A materialised attention on the rank is named in the title and the
    evidence. The remedy is checked against the trace (``preconditions.apply``)."""
    scored: list[tuple[float, OpRow, str]] = []
    # with a report, an op it does not cover (or gives no class) says its figure is estimated
    mark = ", estimated" if any(o.ncu is not None for o in ops) else ""
    for o in ops:
        got = _score(o, mark)
        if got is not None:
            scored.append((o.kernel_ns * got[0], o, got[1]))
    summed = int(sum(s for s, _, _ in scored))
    ns = within_window(summed, rec)
    if ns <= 0:
        return []
    scored.sort(key=lambda t: -t[0])
    proof = [
        Evidence(
            KERNEL_EFFICIENCY,
            "cpu_op",
            o.op,
            rec.window_start_ns,
            o.kernel_ns,
            None,
            f"{o.shapes} {o.dtype or ''}: {how}"
            + ("" if _measured(o) else f" ({o.bound or 'FLOP'}-bound)")
            + f"; kernel time over x{o.count} calls in the window",
        )
        for _, o, how in scored[:EVIDENCE_KEPT]
    ]
    share = window_share(ns, rec)
    top = scored[0][1]
    title = (
        f"kernels below what the chip can do: about {fmt_ns(ns)} ({fmt_pct(share)} of the "
        f"window) recoverable; largest {top.op} ({scored[0][2]})"
    )
    if ns < summed:  # the kernel times sum past the window: say so, the cap is no estimate
        title += (
            f" (capped at the window: the kernel times sum to {fmt_ns(summed)}, see the warnings)"
        )
    fix = remedy(KERNEL_EFFICIENCY, program)
    if _measured(top) and top.ncu is not None:
        fix = bound_remedy(top.ncu.bound, program, fix, top)
    if scores is not None:
        title = f"materialised attention ({scores[0]} x {scores[0]} scores): " + title
        proof = [scores[1], *proof][:EVIDENCE_KEPT]
        fix = f"{attention_remedy(program)}; then {fix}"
    measured = sum(_measured(o) for _, o, _ in scored)
    figures: dict[str, object] = {
        "attainable_mfu": est.ATTAINABLE_MFU,
        "attainable_membw": est.ATTAINABLE_MEMBW,
        "ops_scored": len(scored),
    }
    if measured:
        figures |= {"ops_measured": measured, "attainable_sol": est.ATTAINABLE_SOL}
    confidence = "medium" if _measured(top) else "low"
    # checked here too: a job's merge rebuilds this finding without ``findings.build``
    found = Finding(
        KERNEL_EFFICIENCY, rec.rank, rec.device, ns, share, title, fix, confidence, proof, figures
    )
    return [apply(found, program)]


def _measured(o: OpRow) -> bool:
    """Whether the op's class is measured (``source: "ncu"``: a report gave SM and memory
    figures); a report without them leaves the estimate."""
    return o.source == "ncu" and o.ncu is not None and o.ncu.bound != "unknown"


def _score(o: OpRow, mark: str) -> tuple[float, str] | None:
    """``(missing share of the op's kernel time, how it was judged)``, None when it cannot
    be judged: measured (Nsight Compute) figures first, else the roofline estimate. The
    measured memory figure cited is the one the class used: Memory Throughput (DRAM beside
    it), else DRAM Throughput."""
    m = o.ncu
    if m is not None and _measured(o):
        mem = m.mem_pct if m.mem_pct is not None else m.dram_pct
        if m.sm_pct is None or mem is None:
            return None
        sol = max(m.sm_pct, mem) / 100
        if m.mem_pct is None:
            cite = f"{mem:.0f}% DRAM"
        elif m.dram_pct is None:
            cite = f"{mem:.0f}% memory"
        else:
            cite = f"{mem:.0f}% memory (DRAM {m.dram_pct:.0f}%)"
        how = f"measured: {m.sm_pct:.0f}% SM, {cite} -> {m.bound}-bound (Nsight Compute)"
        return max(0.0, 1.0 - sol / est.ATTAINABLE_SOL), how
    if o.suspect:  # above peak or against a guessed peak (kernels.suspect): no shortfall
        return None
    # without a byte count (no dtype sizes recorded) an op is judged on its FLOPs
    if o.bound in ("compute", None) and o.mfu is not None:
        return max(0.0, 1.0 - o.mfu / est.ATTAINABLE_MFU), f"{fmt_pct(o.mfu)} MFU{mark}"
    if o.bound == "memory" and o.membw_share is not None:
        missing = max(0.0, 1.0 - o.membw_share / est.ATTAINABLE_MEMBW)
        return missing, f"{fmt_pct(o.membw_share)} of memory bandwidth{mark}"
    return None


#: Op dtypes that already move 16 bits or fewer per element (no "16-bit activations").
_NARROW_DTYPES = frozenset({"fp16", "bf16", "fp8", "int8"})


def bound_remedy(bound: str, program: Program, table: str, op: OpRow | None = None) -> str:
    """The change a measured class calls for; ``table`` is the category's remedy, kept for a
    compute-bound kernel (faster math: its precondition rules still apply to it) and for an
    unknown class. Advice the trace shows applied is left out: fusion as new work where
    torch.compile already runs (``compiled_kernels``; for latency, ``mostly_compiled``),
    CUDA graphs where they already replay, 16-bit activations where ``op`` already runs in
    16 bits or fewer (or, without an op dtype, the matmuls run on tensor cores and none in
    fp32); ``channels_last`` only for a convolution ``op``."""
    facts = program.facts
    if bound == "memory":
        fuse = (
            "fuse what torch.compile left unfused around it"
            if facts.compiled_kernels
            else "fuse the elementwise/normalization chains around it (torch.compile)"
        )
        dtype = op.dtype if op is not None else None
        narrow = (
            dtype in _NARROW_DTYPES
            if dtype
            else (facts.tensor_core_matmuls > 0 and facts.fp32_matmuls == 0)
        )
        ways = [fuse, *([] if narrow else ["16-bit activations (autocast)"])]
        if op is not None and op.family == "conv":
            ways.append("channels_last so convolutions read contiguous memory")
        return f"memory-bound (measured): move fewer bytes per result: {', '.join(ways)}"
    if bound == "latency":
        fewer = [
            *([] if facts.mostly_compiled else ["fusion"]),
            *([] if facts.graph_replays else ["CUDA graphs"]),
        ]
        launches = f"fewer small launches ({', '.join(fewer)})" if fewer else "fewer small launches"
        return (
            "latency-bound (measured: neither compute nor memory throughput reaches 60%): "
            f"more work in flight: larger batches or grids, {launches}, higher occupancy "
            "(fewer registers or less shared memory per block)"
        )
    if bound == "compute":
        return f"compute-bound (measured): the math units are the limit: {table}"
    return table
