"""Pure analysis passes over one prepared context; each returns typed results and never prints.

``prepare(session, options)`` builds the ``AnalysisContext`` once; ``PASSES`` lists the passes
(``idle``, ``kernels``, ``utilization``), each ``(context) -> result``; ``analyze`` runs them all
and folds the results into one ``DeviceRecord`` per device. See docs/architecture.md.
"""

from traceforensics.analysis.context import AnalysisContext, prepare
from traceforensics.analysis.devices import DeviceRecord
from traceforensics.analysis.idle.gaps import IdleAnalysis, analyze_idle
from traceforensics.analysis.kernels.forensics import analyze_kernels
from traceforensics.analysis.options import DEFAULTS, AnalysisOptions
from traceforensics.analysis.pipeline import PASSES, Analysis, analyze
from traceforensics.analysis.utilization.timeline import analyze_utilization

__all__ = [
    "DEFAULTS",
    "PASSES",
    "Analysis",
    "AnalysisContext",
    "AnalysisOptions",
    "DeviceRecord",
    "IdleAnalysis",
    "analyze",
    "analyze_idle",
    "analyze_kernels",
    "analyze_utilization",
    "prepare",
]
