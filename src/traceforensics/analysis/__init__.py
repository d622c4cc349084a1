"""Pure analysis passes over a ``TraceSession``; each returns typed results and never prints."""

from traceforensics.analysis.pipeline import Analysis, AnalysisOptions, analyze

__all__ = ["Analysis", "AnalysisOptions", "analyze"]
