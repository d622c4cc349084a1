"""Findings of a multi-rank job with a straggler: the waiting ranks point at it.

When ``analyze_ranks`` names a straggler, every other rank spends its collective wait waiting
for it. Each waiting device then gets a ``straggler_wait`` finding (recoverable: its measured
wait, ns), and its ``exposed_communication`` finding keeps only the rest (``exposed - wait``,
floored at 0): the wait is already counted, and hiding it behind compute is not the fix. The
straggler's own findings are unchanged; the one for its cause says it is the job's straggler.
Estimated splits (no matched collectives) never produce these findings.
"""

from __future__ import annotations

from dataclasses import replace

import polars as pl

from traceforensics.analysis.devices import DeviceRecord
from traceforensics.analysis.findings.busy_losses import EVIDENCE_KEPT, window_share
from traceforensics.analysis.findings.program import Program
from traceforensics.analysis.findings.remedies import remedy
from traceforensics.analysis.findings.results import (
    EXPOSED_COMMUNICATION,
    STRAGGLER_WAIT,
    Finding,
    ranked,
)
from traceforensics.analysis.idle.results import Evidence
from traceforensics.analysis.ranks.results import RankAnalysis
from traceforensics.model.units import fmt_ns, fmt_pct


def straggler_findings(
    findings: list[Finding],
    ranks: RankAnalysis,
    records: list[DeviceRecord],
    program: Program,
) -> list[Finding]:
    """``findings`` with the waiting ranks pointed at the straggler (module docstring)."""
    lead = ranks.straggler
    if lead is None:
        return findings
    waits = {
        (r.rank, r.device): r.comm_wait_ns
        for r in ranks.per_rank
        if r.waiting_for is not None and not r.comm_estimated and r.comm_wait_ns > 0
    }
    by_key = {(d.rank, d.device): d for d in records}
    out: list[Finding] = []
    for found in findings:
        key, f = (found.rank, found.device), found
        if f.category == EXPOSED_COMMUNICATION and key in waits:
            rest = max(f.recoverable_ns - waits[key], 0)
            f = replace(
                f,
                title=f"{f.title}; {fmt_ns(waits[key])} of it is waiting for rank "
                f"{lead.rank} (straggler_wait)",
                recoverable_ns=rest,
                share_of_window=window_share(rest, by_key[key]),
                figures={**f.figures, "straggler_wait_ns": waits[key]},
            )
        elif key == (lead.rank, lead.device) and f.category == lead.cause:
            f = replace(
                f,
                title=f"{f.title} — this rank is the job's straggler: the others wait "
                f"{fmt_ns(lead.others_wait_ns)} each for it",
                figures={**f.figures, "straggler": True},
            )
        out.append(f)
    for key, wait in waits.items():
        out.append(_wait_finding(by_key[key], wait, ranks, program))
    return ranked([f for f in out if f.recoverable_ns > 0])


def _wait_finding(rec: DeviceRecord, wait: int, ranks: RankAnalysis, program: Program) -> Finding:
    lead = ranks.straggler
    assert lead is not None  # callers check
    share = window_share(wait, rec)
    mine = ranks.collectives.filter(
        (pl.col("rank") == rec.rank) & (pl.col("device") == rec.device) & pl.col("matched")
    ).sort("wait_ns", descending=True)
    proof = [
        Evidence(STRAGGLER_WAIT, "kernel", str(n), int(s), int(w), None, "waiting in collective")
        for n, s, w in mine.head(EVIDENCE_KEPT).select("name", "start_ns", "wait_ns").iter_rows()
    ]
    title = (
        f"{lead.pointer()} — {fmt_ns(wait)} ({fmt_pct(share)} of the window) waiting in "
        "collectives for it"
    )
    return Finding(
        STRAGGLER_WAIT,
        rec.rank,
        rec.device,
        wait,
        share,
        title,
        # the generic remedy names "the straggler rank": here it has a number and a cause
        remedy(STRAGGLER_WAIT, program).replace(
            "the straggler rank's cause", f"rank {lead.rank}'s {lead.cause}"
        ),
        "high",
        proof,
        {"straggler_rank": lead.rank, "straggler_cause": lead.cause, "comm_wait_ns": wait},
    )
