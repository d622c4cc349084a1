"""A multi-rank job's findings, grouped for the reports: the same change on several ranks in a
row (seven ranks waiting for one straggler) is one row that names the ranks, with each rank's
time back as a range; ``report.tables.finding_rows`` and the terminal's findings use it. A
single-rank analysis keeps one row per finding."""

from __future__ import annotations

from collections.abc import Sequence

from traceforensics.analysis.findings.results import Finding
from traceforensics.analysis.pipeline import Analysis
from traceforensics.report.format import fmt_ns, fmt_pct, same_text
from traceforensics.report.job_verdict import is_job, members_label, span_text


def finding_groups(analysis: Analysis) -> list[list[Finding]]:
    """The findings in rank order (largest first), each alone; in a job, a run of consecutive
    findings with the same category, remedy (figures aside: ``same_text``) and confidence on
    different devices is one group (seven ranks waiting for the same straggler are one change,
    not seven). Only consecutive ones: the straggler's own ``data_loading`` never joins a small
    one of the same kind."""
    if not is_job(analysis):
        return [[f] for f in analysis.findings]
    out: list[list[Finding]] = []
    for f in analysis.findings:
        run = out[-1] if out else None
        if (
            run is not None
            and (run[0].category, same_text(run[0].remedy), run[0].confidence)
            == (f.category, same_text(f.remedy), f.confidence)
            and (f.rank, f.device) not in {(g.rank, g.device) for g in run}
        ):
            run.append(f)
        else:
            out.append([f])
    return out


def group_back(run: Sequence[Finding]) -> tuple[str, str]:
    """``(time back, share of the window)`` of a finding group: one value, or the range over
    its members (``~92.00–92.49 ms``, ``76.8–77.0%``); each member's time is its own rank's."""
    return (
        "~" + span_text([f.recoverable_ns for f in run], fmt_ns),
        span_text([f.share_of_window for f in run], fmt_pct),
    )


def group_where(run: Sequence[Finding], sep: str = "/") -> str:
    """``rank/GPU`` of one finding, ``ranks 0-3, 5-7`` (``members_label``) of a group."""
    if len(run) == 1:
        return f"{run[0].rank}{sep}{run[0].device}"
    return members_label([(f.rank, f.device) for f in run])
