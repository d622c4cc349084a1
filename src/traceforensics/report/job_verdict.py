"""The verdict of a multi-rank job, built once for every renderer (terminal, Markdown, HTML).

A job's report opens with the job's answer, not with one verdict per rank: the straggler (the
rank the others wait for, ``analysis.ranks``), its cause, and the time the other ranks lose
waiting for it; then the change to make on the straggler (its finding for that cause, else what
the rank analysis found about the cause); then, per step, which rank arrived last. The per-rank
verdicts follow, grouped: ranks whose verdicts say the same thing (same dominant idle cause,
same first change, figures aside) share one line with the ranges of their figures
(``ranks 0-3, 5-7: idle 3.3–3.6% ...``).

One waiting quantity, at two scopes, each labelled with its scope (``trace_wait``,
``step_wait``): the other ranks' mean wait for the rank that arrived last, summed

* over the trace: ``Straggler.waited_for_ns`` ("the other 7 ranks wait 5.34 ms each for it
  over the trace");
* per step: ``StepRow.slowest_rank_wait_ns`` ("in step 3 rank 4 arrived last; the others
  waited 1.32 ms each for it in that step"). Over the straggler's steps these add up to the
  first (plus any collective outside a step).

Where the rank analysis has no such fields, both fall back to the wait in any collective
(``Straggler.others_wait_ns``, ``StepRow.others_wait_ns``), labelled "in collectives".

A job is an analysis with two ranks or more (``is_job``); single-rank reports never use this
module. All times are integer ns, formatted by ``report.format``.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from typing import Final, TypeVar

import polars as pl

from traceforensics.analysis.pipeline import Analysis
from traceforensics.analysis.ranks.results import RankAnalysis, StepRow, Straggler
from traceforensics.report.format import fmt_ns, fmt_pct, same_text
from traceforensics.report.verdict import Verdict, device_verdict, first_change_text, verdict_text

Mark = Callable[[str], str]
Num = TypeVar("Num", int, float)
#: Steps named one by one in the per-step sentence; more are summarised by rank.
STEPS_NAMED: Final = 6


def is_job(analysis: Analysis) -> bool:
    """Whether ``analysis`` is a multi-rank job (two ranks or more in its rank analysis)."""
    r = analysis.ranks
    return r is not None and len({row.rank for row in r.per_rank}) >= 2


@dataclass(frozen=True)
class JobVerdict:
    """The job's answer as sentences: ``head`` (straggler, cause, the others' wait over the
    trace), ``change`` (what to change first, on the straggler; None without one) and
    ``steps`` (who arrived last per step; None without matched steps)."""

    head: str
    change: str | None
    steps: str | None


def job_verdict(analysis: Analysis, code: Mark = str, label: Mark = str) -> JobVerdict:
    """The job verdict of a multi-rank ``analysis`` (``is_job``); ``code`` marks ids and
    ``label`` the subject (Markdown: backticks, bold)."""
    ranks = analysis.ranks
    assert ranks is not None, "job_verdict needs a rank analysis (is_job)"
    loaded = len({r.rank for r in ranks.per_rank})
    size = f" (world size {ranks.world_size})" if ranks.world_size > loaded else ""
    subject = label(f"job of {loaded} ranks") + size
    lead = ranks.straggler
    if lead is None:
        return JobVerdict(_no_straggler(ranks, subject), None, step_sentence(ranks.steps))
    others = [r for r in ranks.per_rank if (r.rank, r.device) != (lead.rank, lead.device)]
    window = sum(r.window_ns for r in others) / max(len(others), 1)
    waited, for_it = trace_wait(lead)
    me = next((r for r in ranks.per_rank if (r.rank, r.device) == (lead.rank, lead.device)), None)
    last = int(getattr(lead, "last_arrivals", 0) or (me.last_arrivals if me else 0))
    matched = int(getattr(lead, "matched_collectives", 0) or ranks.matched_collectives)
    excess = (
        f", +{fmt_ns(lead.cause_excess_ns_per_step)}/step over the other ranks"
        if lead.cause_excess_ns_per_step > 0
        else ""
    )
    # the waiting for it, and (when others were late too) all the waiting in collectives
    overall = (
        f"; {fmt_ns(lead.others_wait_ns)} each in all collectives"
        if for_it and fmt_ns(lead.others_wait_ns) != fmt_ns(waited)
        else ""
    )
    head = (
        f"{subject}: rank {lead.rank} (GPU {lead.device}) is the straggler, cause "
        f"{code(lead.cause)}{excess}; the other {len(others)} ranks wait {fmt_ns(waited)} each "
        f"{'for it' if for_it else 'in collectives'} over the trace "
        f"({fmt_pct(waited / max(window, 1))} of their window{overall})"
        + (f"; it arrives last at {last} of the {matched} matched collectives" if matched else "")
        + _kinds(ranks, code)
    )
    return JobVerdict(head, _straggler_change(analysis, lead, code), step_sentence(ranks.steps))


def _straggler_change(analysis: Analysis, lead: Straggler, code: Mark) -> str | None:
    """What to change on the straggler: its finding for its cause (``first change, on rank
    R (cause, ~time back): remedy``); without one (``slow_gpu``, ``unknown``: no finding has
    that category), what the straggler analysis found about its cause (its last evidence),
    never an unrelated top finding of that rank."""
    mine = analysis.findings_of(lead.rank, lead.device)
    first = next((f for f in mine if f.category == lead.cause), None)
    text = first_change_text(first, code)
    if text is None:
        why = lead.evidence[-1] if len(lead.evidence) > 1 else None
        return f"on rank {lead.rank}, {code(lead.cause)}: {why}" if why else None
    if text.startswith("first change ("):
        return text.replace("first change (", f"first change, on rank {lead.rank} (", 1)
    return f"on rank {lead.rank}: {text}"


def _no_straggler(ranks: RankAnalysis, subject: str) -> str:
    """No straggler: the ranks arrive together, or (collectives not matched across ranks)
    nothing says who is late."""
    waits = span_text([r.comm_wait_ns for r in ranks.per_rank], fmt_ns)
    if not ranks.matched_collectives:
        return (
            f"{subject}: no straggler can be named — no collective was matched across the "
            f"ranks, so who arrives last is unknown; each waits {waits} in collectives over "
            "the trace (estimated per rank)"
        )
    return (
        f"{subject}: no straggler — no rank keeps the others waiting in the "
        f"{ranks.matched_collectives} matched collectives; each waits {waits} in collectives "
        "over the trace"
    )


def trace_wait(lead: Straggler) -> tuple[int, bool]:
    """``(ns, for it)``: the others' mean wait over the trace the job verdict states: their
    wait for the straggler (``waited_for_ns``, where the rank analysis gives it: ``for it``
    True), else their wait in any collective (``others_wait_ns``)."""
    waited = int(getattr(lead, "waited_for_ns", 0) or 0)
    return (waited, True) if waited > 0 else (lead.others_wait_ns, False)


def step_wait(step: StepRow) -> tuple[int, bool]:
    """``(ns, for it)``: the others' mean wait in one step, the per-step counterpart of
    ``trace_wait``: for the step's slowest rank (``slowest_rank_wait_ns``, where given), else
    in any of the step's matched collectives (``others_wait_ns``)."""
    if hasattr(step, "slowest_rank_wait_ns"):
        return int(step.slowest_rank_wait_ns), True
    return step.others_wait_ns, False


def _kinds(ranks: RankAnalysis, code: Mark = str) -> str:
    """``; matched by kind: all_reduce 3, all_to_all 5``: the matched collectives counted by
    kind (the collectives table's ``kind``, else its ``op``), when there are any."""
    rows = ranks.collectives
    col = next((c for c in ("kind", "op") if c in rows.columns), None)
    if col is None or not {"matched", "group", "k"} <= set(rows.columns):
        return ""
    per = (
        rows.filter(pl.col("matched"))
        .unique(["group", "k"])
        .group_by(col)
        .len()
        .sort(["len", col], descending=[True, False])
    )
    if per.height == 0:
        return ""
    return "; matched by kind: " + ", ".join(f"{code(str(k))} {n}" for k, n in per.iter_rows())


def step_sentence(steps: Sequence[StepRow]) -> str | None:
    """Per step, the rank that arrived last and the others' wait in that step (each: the
    step's collectives, each one's wait averaged over the ranks that waited); consecutive steps
    with the same last rank share a clause. None without a step whose last rank is known."""
    known = [s for s in steps if s.slowest_rank is not None]
    if not known:
        return None
    runs: list[list[StepRow]] = []
    for s in known:
        if runs and runs[-1][-1].slowest_rank == s.slowest_rank:
            runs[-1].append(s)
        else:
            runs.append([s])
    parts = []
    for run in runs[:STEPS_NAMED]:
        numbers = _compact(s.step for s in run)
        many = len(run) > 1
        waits = [step_wait(s) for s in run]
        parts.append(
            f"in step{'s' if many else ''} {numbers} rank {run[0].slowest_rank} arrived last; "
            f"the others waited {span_text([w for w, _ in waits], fmt_ns)} each "
            + ("for it " if waits[0][1] else "")
            + ("per step" if many else "in that step")
        )
    more = (
        f"; {len(runs) - STEPS_NAMED} more runs of steps in the Ranks section"
        if (len(runs) > STEPS_NAMED)
        else ""
    )
    return "per step: " + "; ".join(parts) + more


@dataclass(frozen=True)
class RankGroup:
    """Devices whose verdicts say the same thing: ``head``/``change`` as ``verdict_text``
    gives them, figures as ranges over the members."""

    members: tuple[tuple[int, int], ...]
    head: str
    change: str | None


def rank_groups(analysis: Analysis, code: Mark = str, label: Mark = str) -> list[RankGroup]:
    """The per-rank verdicts of a job, grouped (module docstring): the straggler's group first,
    then the others in device order. A group of one reads as ``verdict_text``."""
    verdicts = [device_verdict(d, analysis.findings_of(d.rank, d.device)) for d in analysis.devices]
    groups: dict[tuple[object, ...], list[Verdict]] = {}
    for v in verdicts:
        groups.setdefault(_key(v), []).append(v)
    straggler = analysis.ranks.straggler if analysis.ranks is not None else None
    lead = (straggler.rank, straggler.device) if straggler is not None else None
    # (False sorts first: the group holding the straggler)
    ordered = sorted(groups.values(), key=lambda g: lead not in {(v.rank, v.device) for v in g})
    return [_group(g, code, label) for g in ordered]


def _key(v: Verdict) -> tuple[object, ...]:
    """What must agree for two verdicts to share a line: the dominant cause and the first
    change (its category, remedy and whether it is minor). Not the runner-up causes: jitter
    swaps two small ones (the group line names them only when all members agree)."""
    f = v.first
    first = None if f is None else (f.category, same_text(f.remedy), f.minor)
    return (v.top, first)


def _group(vs: list[Verdict], code: Mark, label: Mark) -> RankGroup:
    members = tuple((v.rank, v.device) for v in vs)
    if len(vs) == 1:
        head, change = verdict_text(vs[0], code, label)
        return RankGroup(members, head, change)
    v0 = vs[0]
    idle = span_text([v.idle_share for v in vs], fmt_pct)
    windows = span_text([v.window_ns for v in vs], fmt_ns)
    head = f"{label(members_label(members))}: idle {idle} of {windows} windows"
    if v0.top is None:
        head += " — no idle time to attribute."
    else:
        top = span_text([v.top_share for v in vs], fmt_pct)
        head += f" — mostly {code(v0.top)} ({top} of idle)"
        same = all([c for c, _ in v.runners_up] == [c for c, _ in v0.runners_up] for v in vs)
        rest = [
            f"{code(c)} {span_text([v.runners_up[i][1] for v in vs], fmt_pct)}"
            for i, (c, _) in enumerate(v0.runners_up if same else ())
        ]
        head += f"; then {', '.join(rest)}" if rest else ""
    return RankGroup(members, head, _group_change(vs, code))


def _group_change(vs: list[Verdict], code: Mark) -> str | None:
    firsts = [v.first for v in vs if v.first is not None]
    if len(firsts) < len(vs) or not firsts:
        return None
    f = firsts[0]
    back = (
        f"~{span_text([x.recoverable_ns for x in firsts], fmt_ns)} back each, "
        f"{span_text([x.share_of_window for x in firsts], fmt_pct)} of the window"
    )
    if f.minor:
        return f"no large loss found: the largest, {code(f.category)}, would give {back}"
    return f"first change ({code(f.category)}, {back}): {f.remedy}"


def members_label(members: Sequence[tuple[int, int]]) -> str:
    """``ranks 0-3, 5-7`` when every member is a different rank, else ``rank 0 GPU 0-1, rank 1
    GPU 0``; ``rank 4 GPU 4`` for one member."""
    if len(members) == 1:
        r, d = members[0]
        return f"rank {r} GPU {d}"
    ranks = [r for r, _ in members]
    if len(set(ranks)) == len(ranks):
        return f"ranks {_compact(ranks)}"
    by_rank: dict[int, list[int]] = {}
    for r, d in members:
        by_rank.setdefault(r, []).append(d)
    return ", ".join(f"rank {r} GPU {_compact(ds)}" for r, ds in sorted(by_rank.items()))


def _compact(values: Iterable[int]) -> str:
    """``0-3, 5-7`` for 0,1,2,3,5,6,7 (sorted, duplicates once)."""
    out: list[str] = []
    run: list[int] = []
    for v in sorted(set(values)):
        if run and v != run[-1] + 1:
            out.append(_run(run))
            run = []
        run.append(v)
    if run:
        out.append(_run(run))
    return ", ".join(out)


def _run(run: list[int]) -> str:
    return str(run[0]) if len(run) == 1 else f"{run[0]}-{run[-1]}"


def span_text(values: Sequence[Num], fmt: Callable[[Num], str]) -> str:
    """``fmt(v)`` when the formatted values agree, else ``lo–hi`` (formatted; empty: ``-``)."""
    if not values:
        return "-"
    lo, hi = fmt(min(values)), fmt(max(values))
    if lo == hi:
        return lo
    # one unit for both ends when they share it: ``30.60–30.94 ms``, ``3.3–3.6%``
    for unit in (hi.rpartition(" ")[2], "%"):
        if unit and not unit[0].isdigit() and lo.endswith(unit) and hi.endswith(unit):
            return f"{lo.removesuffix(unit).rstrip()}–{hi}"
    return f"{lo}–{hi}"
