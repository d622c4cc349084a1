"""The terminal's ``Ranks`` section: the straggler, the per-rank table and the slowest rank of
each step (``analysis.ranks``). Shown when the trace holds more than one rank."""

from __future__ import annotations

from traceforensics.analysis.ranks.results import RankAnalysis
from traceforensics.report.format import fmt_ns

#: Steps listed one per line; more are summarised.
STEPS_SHOWN = 8


def rank_lines(ranks: RankAnalysis | None) -> list[str]:
    """The section's lines; empty for a single-rank trace (the section is then left out)."""
    if ranks is None or len({r.rank for r in ranks.per_rank}) < 2:
        return []
    loaded = len({r.rank for r in ranks.per_rank})
    size = f" of world size {ranks.world_size}" if ranks.world_size > loaded else ""
    how = (
        f"{ranks.matched_collectives} collectives matched across ranks by {ranks.matching}"
        if ranks.matched_collectives
        else "collectives not matched across ranks: waits are estimated per rank"
    )
    out = [f"{loaded} ranks{size} (ranks from {ranks.rank_source}); {how}"]
    s = ranks.straggler
    if s is None:
        out.append("straggler: none (the ranks arrive at the collectives together)")
    else:
        out.append(f"straggler: rank {s.rank} GPU {s.device}, cause {s.cause}")
        out += [f"  {e}" for e in s.evidence]
    out.append(
        f"{'rank':>4} {'GPU':>3} {'step p50':>10} {'busy':>10} {'idle':>10} {'top cause':<16}"
        f" {'comm':>10} {'wait':>10} {'transfer':>10} {'last':>5}  note"
    )
    for r in ranks.per_rank:
        step = fmt_ns(r.step_time_ns_median) if r.step_time_ns_median is not None else "-"
        note = "estimated split" if r.comm_estimated and r.comm_ns else ""
        if r.waiting_for is not None:
            note = f"waits for rank {r.waiting_for}"
        elif s is not None and (r.rank, r.device) == (s.rank, s.device):
            note = "straggler"
        if r.clock_offset_ns:
            note += f" (clock {'+' if r.clock_offset_ns > 0 else '-'}"
            note += f"{fmt_ns(abs(r.clock_offset_ns))})"
        out.append(
            f"{r.rank:>4} {r.device:>3} {step:>10} {fmt_ns(r.busy_ns):>10} "
            f"{fmt_ns(r.idle_ns):>10} {r.top_cause or '-':<16} {fmt_ns(r.comm_ns):>10} "
            f"{fmt_ns(r.comm_wait_ns):>10} {fmt_ns(r.comm_transfer_ns):>10} "
            f"{r.last_arrivals:>5}  {note}".rstrip()
        )
    steps = [st for st in ranks.steps if st.slowest_rank is not None]
    if steps:
        shown = ", ".join(
            f"#{st.step} rank {st.slowest_rank} ({fmt_ns(st.others_wait_ns)})"
            for st in steps[:STEPS_SHOWN]
        )
        more = f", +{len(steps) - STEPS_SHOWN} more" if len(steps) > STEPS_SHOWN else ""
        out.append(f"slowest rank per step (others' wait): {shown}{more}")
    out += [f"note: {n}" for n in ranks.notes]
    return out
