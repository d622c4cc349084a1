"""The terminal's ``Ranks`` section: the straggler, the per-rank table and the slowest rank of
each step (``analysis.ranks``). Shown when the trace holds more than one rank."""

from __future__ import annotations

from traceforensics.analysis.ranks.results import RankAnalysis
from traceforensics.report.format import fmt_ns
from traceforensics.report.job_verdict import step_wait
from traceforensics.report.tables import rank_table

#: Steps listed one per line; more are summarised.
STEPS_SHOWN = 8


def rank_lines(ranks: RankAnalysis | None) -> list[str]:
    """The section's lines; empty for a single-rank trace (the section is then left out)."""
    text, rows = rank_table(ranks)
    if ranks is None or not rows:
        return []
    # the sentences end with the notes: the table and the steps go between
    split = len(text) - len(ranks.notes)
    out = text[:split]
    out.append(
        f"{'rank':>4} {'GPU':>3} {'step p50':>10} {'busy':>10} {'idle':>10} {'top cause':<16}"
        f" {'comm':>10} {'wait':>10} {'transfer':>10} {'last':>5}  note"
    )
    out += [
        f"{r.rank:>4} {r.device:>3} {r.step:>10} {r.busy:>10} {r.idle:>10} {r.top_cause:<16} "
        f"{r.comm:>10} {r.wait:>10} {r.transfer:>10} {r.last:>5}  {r.note}".rstrip()
        for r in rows
    ]
    steps = [st for st in ranks.steps if st.slowest_rank is not None]
    if steps:
        # per step, not over the trace: the job verdict's figure is the trace's
        waits = [step_wait(st) for st in steps[:STEPS_SHOWN]]
        shown = ", ".join(
            f"step {st.step} rank {st.slowest_rank} ({fmt_ns(ns)})"
            for st, (ns, _) in zip(steps, waits, strict=False)
        )
        more = f", +{len(steps) - STEPS_SHOWN} more" if len(steps) > STEPS_SHOWN else ""
        what = "the others' wait each for it" if waits[0][1] else "the others' wait each"
        out.append(f"last to arrive per step ({what}, in that step): {shown}{more}")
    return out + text[split:]
