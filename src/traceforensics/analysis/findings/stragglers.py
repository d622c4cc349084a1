"""Findings of a multi-rank job whose ranks wait for another: the waiting ranks point at it.

Who a participant waits for (``analysis.ranks``): the job's straggler when one is named (its
``wait_for_straggler_ns``: wall-clock ns waiting in the matched collectives the straggler
arrived last at); else, when that participant's waiting dominates its communication
(``waits_most_for_ns`` >= ``WAIT_DOMINATES`` of ``comm_ns``, and >= ``MIN_WAIT_SHARE`` of its
window), the rank it waited on longest, with that rank's top idle cause as its cause.

Each waiting device then gets a ``straggler_wait`` finding, "waiting for rank R (its cause)"
(recoverable: that wait, ns), and its ``exposed_communication`` finding keeps only the rest
(``exposed - wait``, floored at 0): the wait is already counted, and hiding it behind compute
is not the fix. When the wait dominates the device's communication (e.g. 10.5 of 11.3 ms), the
exposed-communication remedy says so first: the change is on rank R, and only the rest is
transfer that overlap or bandwidth can hide. The straggler's own findings are unchanged; the
one for its cause says it is the job's straggler and what the others wait for it
(``Straggler.waited_for_ns``). Splits of collectives not matched across ranks never produce
these findings.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import Final

import polars as pl

from traceforensics.analysis.devices import DeviceRecord
from traceforensics.analysis.findings.busy_losses import EVIDENCE_KEPT, window_share
from traceforensics.analysis.findings.remedies import remedy
from traceforensics.analysis.findings.results import (
    EXPOSED_COMMUNICATION,
    STRAGGLER_WAIT,
    Finding,
    ranked,
)
from traceforensics.analysis.idle.results import Evidence
from traceforensics.analysis.program import Program
from traceforensics.analysis.ranks.results import RankAnalysis, RankRow
from traceforensics.model.units import fmt_ns, fmt_pct

#: A device's wait dominates its communication at this share of its collective time.
WAIT_DOMINATES: Final = 0.5
#: Without a job straggler, a wait this share of the window or less points at no one.
MIN_WAIT_SHARE: Final = 0.02


@dataclass(frozen=True)
class _Pointer:
    """Who one waiting device waits for: rank, cause, the words naming both, the wait (ns)."""

    rank: int
    cause: str
    words: str
    wait_ns: int
    comm_ns: int

    @property
    def dominates(self) -> bool:
        return self.comm_ns > 0 and self.wait_ns >= WAIT_DOMINATES * self.comm_ns


def straggler_findings(
    findings: list[Finding],
    ranks: RankAnalysis,
    records: list[DeviceRecord],
    program: Program,
) -> list[Finding]:
    """``findings`` with the waiting ranks pointed at the rank they wait for (module
    docstring)."""
    by_key = {(d.rank, d.device): d for d in records}
    pointers = {k: p for k, p in _pointers(ranks).items() if k in by_key}
    if not pointers:
        return findings
    lead = ranks.straggler
    out: list[Finding] = []
    for found in findings:
        key, f = (found.rank, found.device), found
        at = pointers.get(key)
        if f.category == EXPOSED_COMMUNICATION and at is not None:
            rest = max(f.recoverable_ns - at.wait_ns, 0)
            fix = f.remedy
            if at.dominates:  # the change is on the rank it waits for, not the bandwidth
                fix = (
                    f"most of this rank's communication ({fmt_ns(at.wait_ns)} of "
                    f"{fmt_ns(at.comm_ns)}) is {at.words}: fix that first (straggler_wait); "
                    f"only the rest is transfer: {f.remedy}"
                )
            f = replace(
                f,
                title=f"{f.title}; {fmt_ns(at.wait_ns)} of it is waiting for rank "
                f"{at.rank} (straggler_wait)",
                recoverable_ns=rest,
                share_of_window=window_share(rest, by_key[key]),
                remedy=fix,
                figures={**f.figures, "straggler_wait_ns": at.wait_ns},
            )
        elif lead is not None and key == (lead.rank, lead.device) and f.category == lead.cause:
            f = replace(
                f,
                title=f"{f.title} — this rank is the job's straggler: the others wait "
                f"{fmt_ns(lead.waited_for_ns)} each for it",
                figures={**f.figures, "straggler": True},
            )
        out.append(f)
    for key, at in pointers.items():
        out.append(_wait_finding(by_key[key], at, ranks, program))
    return ranked([f for f in out if f.recoverable_ns > 0])


def _pointers(ranks: RankAnalysis) -> dict[tuple[int, int], _Pointer]:
    """Per waiting device, who it waits for (module docstring)."""
    lead = ranks.straggler
    out = {}
    if lead is not None:
        for r in ranks.per_rank:
            if r.waiting_for is not None and r.wait_for_straggler_ns > 0:
                out[(r.rank, r.device)] = _Pointer(
                    lead.rank, lead.cause, lead.pointer(), r.wait_for_straggler_ns, r.comm_ns
                )
        return out
    top = {r.rank: r for r in ranks.per_rank}
    for r in ranks.per_rank:
        late = top.get(r.waits_most_for) if r.waits_most_for is not None else None
        if late is None or r.waits_most_for_ns < MIN_WAIT_SHARE * r.window_ns:
            continue
        at = _Pointer(late.rank, _cause(late), "", r.waits_most_for_ns, r.comm_ns)
        if at.dominates:
            out[(r.rank, r.device)] = replace(at, words=f"waiting for rank {at.rank} ({at.cause})")
    return out


def _cause(row: RankRow) -> str:
    """A late rank's cause when no straggler was named: its top idle cause, if any."""
    return row.top_cause or "unknown"


def _wait_finding(
    rec: DeviceRecord, at: _Pointer, ranks: RankAnalysis, program: Program
) -> Finding:
    wait = at.wait_ns
    share = window_share(wait, rec)
    mine = ranks.collectives.filter(
        (pl.col("rank") == rec.rank) & (pl.col("device") == rec.device) & pl.col("matched")
    ).sort("wait_ns", descending=True)
    proof = [
        Evidence(STRAGGLER_WAIT, "kernel", str(n), int(s), int(w), None, "waiting in collective")
        for n, s, w in mine.head(EVIDENCE_KEPT).select("name", "start_ns", "wait_ns").iter_rows()
    ]
    of_comm = f", {fmt_ns(wait)} of its {fmt_ns(at.comm_ns)} in collectives" if at.dominates else ""
    title = (
        f"{at.words} — {fmt_ns(wait)} ({fmt_pct(share)} of the window) waiting in "
        f"collectives for it{of_comm}"
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
            "the straggler rank's cause", f"rank {at.rank}'s {at.cause}"
        ),
        "high",
        proof,
        {
            "straggler_rank": at.rank,
            "straggler_cause": at.cause,
            "comm_wait_ns": wait,
            "comm_ns": at.comm_ns,
            "job_straggler": ranks.straggler is not None,
        },
    )
