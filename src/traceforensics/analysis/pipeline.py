"""Run every analysis pass over a session and gather the typed results.

Like pyinstrument's processors: the session goes in, an ``Analysis`` (plain data) comes out;
renderers in ``report/`` turn it into text, JSON or plots. Nothing here prints.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from traceforensics.analysis.summary import Summary, summarize
from traceforensics.model.session import TraceSession


@dataclass
class AnalysisOptions:
    """Knobs of ``tf analyze``; defaults are the CLI defaults."""

    top_kernels: int = 10
    top_gaps: int = 10


@dataclass
class Analysis:
    """Everything ``tf analyze`` computed for one session."""

    session: TraceSession
    options: AnalysisOptions
    summary: Summary
    warnings: list[str] = field(default_factory=list)


def analyze(session: TraceSession, options: AnalysisOptions | None = None) -> Analysis:
    """Run the passes selected by ``options`` over ``session``."""
    opts = options or AnalysisOptions()
    summary = summarize(session, top_kernels=opts.top_kernels)
    return Analysis(
        session=session,
        options=opts,
        summary=summary,
        warnings=list(session.meta.warnings),
    )
