"""traceforensics: when the GPU was idle, who was it waiting for?

Library first (the notebook façade)::

    import traceforensics as tf

    result = tf.analyze("trace.pt.trace.json.gz", window="trace")   # an Analysis
    result                       # a one-line summary
    result.frames()["gaps"]      # polars DataFrames: devices, gaps, gap_causes, steps, ...
    result.to_json()             # the traceforensics.analysis/1 object
    log = tf.load_monitor_log("smi.csv", utc_offset="+08:00")

``tf.load(path)`` returns the ``TraceSession`` (the unified event table) without analysing it.
``with tf.capture("runs/prof") as cap:`` records a training loop with ``torch.profiler`` set up
for this analysis and prints the verdict at the end (docs/recording.md; needs
``traceforensics[capture]``, imported on first use).
"""

from __future__ import annotations

import os
import sys
from typing import TYPE_CHECKING, Any

from traceforensics._allocator import TF_ALLOCATOR_CONF, limit_arenas

# polars allocates through its own jemalloc, which by default keeps freed pages for 10 s: a
# load builds and drops whole columns, and that retained memory was ~15 % of the peak of a
# 3M-event analysis. Returned after 100 ms instead: at once (0 ms), every temporary was
# faulted in afresh (0.5 M page faults, ~0.5 s of system time on the 10x ResNet-50 trace),
# while 100 ms adds ~5 % to that peak and nothing measurable at 3M-10M events
# (docs/benchmarks.md). Only when polars is not loaded yet (the setting is read once) and
# nobody chose otherwise. (Rank workers of ``fanout`` keep pages 1 s: they reuse them rank
# after rank.)
if "polars" not in sys.modules and "TF_KEEP_ALLOCATOR" not in os.environ:
    os.environ.setdefault("_RJEM_MALLOC_CONF", TF_ALLOCATOR_CONF)
    if "MALLOC_ARENA_MAX" not in os.environ:  # likewise glibc's per-thread arenas
        limit_arenas()

# Nothing here imports polars (``TraceSession`` is read on first use, ``__getattr__``): the
# console script answers a repeat ``tf analyze TRACE --json`` without it (``cli.entry``).

if TYPE_CHECKING:
    from traceforensics.analysis.pipeline import Analysis
    from traceforensics.model import TraceSession
    from traceforensics.model.monitor import MonitorLog
    from traceforensics.recording import capture

from traceforensics._version import __version__


def load(path: str | os.PathLike[str], *, use_cache: bool = False) -> TraceSession:
    """Load a trace file or directory of rank files into a ``TraceSession``."""
    from traceforensics.ingest import load_path

    return load_path(os.fspath(path), use_cache=use_cache)


def load_monitor_log(
    path: str | os.PathLike[str], *, columns: str | None = None, utc_offset: str = "UTC"
) -> MonitorLog:
    """Read an nvidia-smi / dmon / dcgmi / table log; ``utc_offset`` is the zone of its
    timestamps (nvidia-smi prints local time), e.g. ``"+08:00"``; ``columns`` maps columns
    (``"util=GPU Util,time=Timestamp"``)."""
    from traceforensics.ingest.monitor import load_monitor_log_utc

    return load_monitor_log_utc(os.fspath(path), columns=columns, utc_offset=utc_offset)


def analyze(
    source: str | os.PathLike[str] | TraceSession,
    *,
    monitor: str | os.PathLike[str] | MonitorLog | None = None,
    use_cache: bool = False,
    jobs: int | None = None,
    dask: str | None = None,
    **options: Any,
) -> Analysis:
    """Analyse a trace path (file or rank directory) or a loaded session.

    ``options`` take the flat names of ``AnalysisOptions.of`` (``window``, ``step_pattern``,
    ``step_window``, ``data_patterns``, ``top_gaps``, ``short_kernel_us``, ``peak_tflops``,
    ``top``, ``bin_ms``); ``monitor`` is a log path (read as UTC) or a ``load_monitor_log``
    result, aligned with the trace by wall clock.

    ``jobs`` or ``dask`` given with a rank directory: the ranks are loaded and analysed apart
    (``traceforensics.fanout``: ``jobs`` processes, or ``dask="local"``/a scheduler address)
    and only their summaries joined; the result's ``session`` then holds no events (figures
    need the default joint analysis). Worker processes need the script's entry guarded by
    ``if __name__ == "__main__":``."""
    from traceforensics.analysis.options import AnalysisOptions
    from traceforensics.analysis.pipeline import analyze as run
    from traceforensics.model import TraceSession

    opts = AnalysisOptions.of(**options)
    log = load_monitor_log(monitor) if isinstance(monitor, (str, os.PathLike)) else monitor
    asked = jobs is not None or dask is not None
    if asked and not isinstance(source, TraceSession) and os.path.isdir(source):
        from traceforensics.fanout import analyze_apart, needs_joint

        if not needs_joint(opts):
            return analyze_apart(
                os.fspath(source), opts, jobs=jobs, dask=dask, use_cache=use_cache, monitor_log=log
            )
    session = source if isinstance(source, TraceSession) else load(source, use_cache=use_cache)
    return run(session, opts, log)


def _show_analyses_in_notebooks() -> None:
    """Inside IPython (a notebook), an ``Analysis`` displays as HTML, its verdict and findings
    (``report.html.notebook_html``); registered by name, so nothing is imported for it, and
    nothing happens outside IPython."""
    ipython = sys.modules.get("IPython")
    shell = ipython.get_ipython() if ipython is not None else None
    if shell is None:
        return

    def html(analysis: Analysis) -> str:
        from traceforensics.report.html import notebook_html

        return notebook_html(analysis)

    formatter = shell.display_formatter.formatters["text/html"]
    formatter.for_type_by_name("traceforensics.analysis.pipeline", "Analysis", html)


_show_analyses_in_notebooks()


def __getattr__(name: str) -> Any:
    """``TraceSession`` and ``capture`` on first use: importing ``traceforensics`` imports
    neither polars (a cached run may not need it) nor ``torch`` (only those who record need
    the recorder)."""
    if name == "TraceSession":
        from traceforensics.model import TraceSession as _Session

        return _Session
    if name == "capture":
        from traceforensics.recording import capture as _capture

        return _capture
    raise AttributeError(f"module 'traceforensics' has no attribute {name!r}")


def __dir__() -> list[str]:
    return sorted({*globals(), "TraceSession", "capture"})


__all__ = ["TraceSession", "__version__", "analyze", "capture", "load", "load_monitor_log"]
