"""The rows of the report tables, built once for the HTML and the Markdown report.

Which records each table lists, in what order, and the text of every cell (durations, shares,
rates formatted; shares computed) live here; the renderers (``report.html``,
``report.markdown``) only choose the columns and add the markup: escaping, code spans, colour
squares, ``rank/GPU`` or ``rank:GPU``. Cell text is plain text straight from the trace (names
are not escaped here).
"""

from __future__ import annotations

from dataclasses import dataclass

from traceforensics.analysis.idle.causes import ranked_causes
from traceforensics.analysis.idle.results import Evidence
from traceforensics.analysis.pipeline import Analysis
from traceforensics.analysis.ranks.results import RankAnalysis
from traceforensics.report.format import fmt_bytes, fmt_ns, fmt_pct, fmt_rate, truncate
from traceforensics.report.job_findings import finding_groups, group_back, group_where

#: What a report writes instead of a table with no rows (a single-kernel trace has no idle time,
#: no gap and may have no finding).
EMPTY = {
    "findings": "No findings: nothing to give back.",
    "causes": "No idle time in the window.",
    "gaps": "No idle gaps.",
}
#: Evidence events listed per gap in the reports' gap tables.
GAP_EVIDENCE = 3
#: Evidence events listed per finding in the HTML findings table.
FINDING_EVIDENCE = 2


def evidence_name(e: Evidence) -> str:
    """The evidence event's name, or what its absence means: an evidence of kind ``none``
    records that nothing was recorded (``analysis.idle.evidence``)."""
    return e.name or ("nothing recorded" if e.kind == "none" else "(unnamed)")


def evidence_label(e: Evidence) -> str:
    """``kind name (duration)`` of one evidence event; ``nothing recorded (duration)`` for
    the absence of any."""
    if e.kind == "none" and not e.name:
        return f"nothing recorded ({fmt_ns(e.dur_ns)})"
    return f"{e.kind} {e.name} ({fmt_ns(e.dur_ns)})"


@dataclass(frozen=True)
class Row:
    """A row about one device: ``where(sep)`` is ``rank/GPU`` (``sep="/"``) or ``rank:GPU``."""

    rank: int
    device: int

    def where(self, sep: str = "/") -> str:
        return f"{self.rank}{sep}{self.device}"


@dataclass(frozen=True)
class FindingRow(Row):
    number: int
    category: str
    gives_back: str  # ~time (share of the window)
    confidence: str
    title: str
    remedy: str
    evidence: str  # the first FINDING_EVIDENCE events, "name: detail; ..."
    group: str = ""  # the ranks of a grouped row ("ranks 0-3, 5-7"), else empty

    def where(self, sep: str = "/") -> str:
        return self.group or super().where(sep)


def finding_rows(analysis: Analysis, top: int) -> list[FindingRow]:
    """The ``top`` findings, largest time to give back first. In a multi-rank job the same
    change on several ranks in a row is one row (``job_findings.finding_groups``): its
    ``where`` names the ranks, its time back is each rank's (a range), its title the
    largest's."""
    rows = []
    for i, run in enumerate(finding_groups(analysis)[:top], 1):
        f = run[0]
        back, share = group_back(run)
        many = len(run) > 1
        rows.append(
            FindingRow(
                f.rank,
                f.device,
                i,
                f.category,
                f"{back}{' each' if many else ''} ({share})",
                f.confidence,
                f"largest, rank {f.rank} GPU {f.device}: {f.title}" if many else f.title,
                f.remedy,
                "; ".join(
                    truncate(f"{evidence_name(e)}: {e.detail}", 120)
                    for e in f.evidence[:FINDING_EVIDENCE]
                ),
                group_where(run) if many else "",
            )
        )
    return rows


@dataclass(frozen=True)
class TransferRow(Row):
    direction: str
    count: int
    bytes: str
    time: str
    bandwidth: str  # "-" when unknown
    pageable_count: int


@dataclass(frozen=True)
class DeviceRow(Row):
    name: str
    window: str
    busy: str  # time (share of the window)
    idle: str
    busy_by_kind: str  # "kernel 1.0 ms, memcpy ..." ("" when nothing ran)
    has_comm: bool
    exposed_comm: str  # exposed of all communication kernel time
    pattern: str | None  # the utilization pattern id
    kernels: int
    memcpy: int
    memset: int
    transfers: tuple[TransferRow, ...]
    exposed_copies: str | None  # copy time not overlapped by compute, of all copy time


def device_rows(analysis: Analysis) -> list[DeviceRow]:
    """One row per device, with its copies by direction."""
    out: list[DeviceRow] = []
    for d in analysis.devices:
        transfers = tuple(
            TransferRow(
                d.rank,
                d.device,
                t.direction,
                t.count,
                fmt_bytes(t.bytes),
                fmt_ns(t.time_ns),
                fmt_rate(t.gbps) if t.gbps is not None else "-",
                t.pageable_count,
            )
            for t in d.transfers
        )
        out.append(
            DeviceRow(
                d.rank,
                d.device,
                d.name,
                fmt_ns(d.window_ns),
                f"{fmt_ns(d.busy_ns)} ({fmt_pct(d.busy_fraction)})",
                fmt_ns(d.idle_ns),
                ", ".join(f"{k} {fmt_ns(ns)}" for k, ns in d.busy_by_kind.items() if ns),
                bool(d.comm_ns),
                f"{fmt_ns(d.exposed_comm_ns)} of {fmt_ns(d.comm_ns)}",
                d.pattern.pattern.pattern if d.pattern is not None else None,
                d.kernel_count,
                d.memcpy_count,
                d.memset_count,
                transfers,
                f"{fmt_ns(d.exposed_copy_ns)} of {fmt_ns(d.copy_ns)}" if d.copy_ns else None,
            )
        )
    return out


@dataclass(frozen=True)
class CauseRow(Row):
    cause: str
    time: str
    of_idle: str
    of_window: str


def cause_rows(analysis: Analysis) -> list[CauseRow]:
    """Idle time by cause per device, largest first (causes with no time left out)."""
    return [
        CauseRow(
            d.rank,
            d.device,
            cause,
            fmt_ns(ns),
            fmt_pct(ns / max(d.idle_ns, 1)),
            fmt_pct(ns / max(d.window_ns, 1)),
        )
        for d in analysis.devices
        for cause, ns in ranked_causes(d.idle_by_cause)
    ]


@dataclass(frozen=True)
class GapEvidence:
    label: str  # evidence_label
    detail: str


@dataclass(frozen=True)
class GapRow(Row):
    length: str
    causes: tuple[tuple[str, str], ...]  # (cause, time), largest first
    evidence: tuple[GapEvidence, ...]  # the first GAP_EVIDENCE events


def gap_rows(analysis: Analysis, top: int) -> list[GapRow]:
    """The ``top`` largest idle gaps, each split over its causes, with its first evidence."""
    return [
        GapRow(
            g.rank,
            g.device,
            fmt_ns(g.dur_ns),
            tuple((c, fmt_ns(v)) for c, v in ranked_causes(g.causes)),
            tuple(GapEvidence(evidence_label(e), e.detail) for e in g.evidence[:GAP_EVIDENCE]),
        )
        for g in analysis.idle.gaps[:top]
    ]


@dataclass(frozen=True)
class ShortKernelRow(Row):
    name: str
    launching_op: str  # "" when none was found
    count: int
    total: str
    recoverable: str
    remedy: str


def short_kernel_rows(analysis: Analysis, top: int) -> list[ShortKernelRow]:
    """The ``top`` short-kernel groups worth fusing, most recoverable first."""
    return [
        ShortKernelRow(
            r.rank,
            r.device,
            r.name,
            r.launching_op,
            r.count,
            fmt_ns(r.total_ns),
            fmt_ns(r.recoverable_ns),
            r.remedy,
        )
        for r in analysis.kernels.short_kernels[:top]
    ]


@dataclass(frozen=True)
class RankTableRow(Row):
    step: str  # median step time
    busy: str
    idle: str
    top_cause: str
    comm: str
    wait: str
    transfer: str
    last: int  # matched collectives it arrived last at
    note: str  # "straggler", "waits for rank N", "estimated split"


def rank_table(ranks: RankAnalysis | None) -> tuple[list[str], list[RankTableRow]]:
    """``(sentences, rows)`` of the multi-rank table (``Analysis.ranks``): how the ranks were
    matched and the straggler with its evidence, then one row per rank and device. Both empty
    for a trace of one rank (the reports then leave the section out)."""
    if ranks is None or len({r.rank for r in ranks.per_rank}) < 2:
        return [], []
    loaded = len({r.rank for r in ranks.per_rank})
    size = f" of world size {ranks.world_size}" if ranks.world_size > loaded else ""
    how = (
        f"{ranks.matched_collectives} collectives matched across ranks by {ranks.matching}"
        if ranks.matched_collectives
        else "collectives not matched across ranks: waits are estimated per rank"
    )
    text = [f"{loaded} ranks{size} (ranks from {ranks.rank_source}); {how}."]
    lead = ranks.straggler
    if lead is None and not ranks.matched_collectives:
        text.append("No straggler named: without matched collectives, who arrives last is unknown.")
    elif lead is None:
        text.append("No straggler: no rank keeps the others waiting in the matched collectives.")
    else:
        text.append(f"Straggler: rank {lead.rank} GPU {lead.device}, cause {lead.cause}.")
        text += [f"{e}." for e in lead.evidence]
    text += [f"Note: {n}." for n in ranks.notes]
    rows = []
    for r in ranks.per_rank:
        note = "estimated split" if r.comm_estimated and r.comm_ns else ""
        if r.waiting_for is not None:
            note = f"waits for rank {r.waiting_for}"
        elif lead is not None and (r.rank, r.device) == (lead.rank, lead.device):
            note = "straggler"
        if r.clock_offset_ns:  # another host's clock, found from the collectives' ends
            sign = "+" if r.clock_offset_ns > 0 else "-"
            note += f" (clock {sign}{fmt_ns(abs(r.clock_offset_ns))})"
        step = fmt_ns(r.step_time_ns_median) if r.step_time_ns_median is not None else "-"
        rows.append(
            RankTableRow(
                r.rank,
                r.device,
                step,
                fmt_ns(r.busy_ns),
                fmt_ns(r.idle_ns),
                r.top_cause or "-",
                fmt_ns(r.comm_ns),
                fmt_ns(r.comm_wait_ns),
                fmt_ns(r.comm_transfer_ns),
                r.last_arrivals,
                note,
            )
        )
    return text, rows


#: Column heads of the rank table, shared by both reports.
RANK_HEADER = [
    "rank/GPU", "step p50", "busy", "idle", "top cause", "collectives", "waiting",
    "transfer", "last", "note",
]  # fmt: skip


def rank_cells(row: RankTableRow, sep: str = "/") -> list[str | int]:
    return [
        row.where(sep), row.step, row.busy, row.idle, row.top_cause, row.comm, row.wait,
        row.transfer, row.last, row.note,
    ]  # fmt: skip
