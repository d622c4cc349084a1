"""Many ranks fast: every rank file of a job loaded and analysed on its own, side by side, and
only the per-rank summaries joined.

The joint path (``ingest.load_path`` + ``analysis.pipeline.analyze``) holds every rank's
events in one table: its memory grows with the job and it analyses on one core at a time.
Here each rank file is a task::

    parent: rank set (ingest.readers), ranks, shifts    (plan)
       |  RankTask (path, rank, shift, options)
    worker: load one file -> on the job's rank/clock -> cut to --steps -> prepare -> passes
       |  RankPart (metadata, device records, idle, kernels, patterns, findings,
       |            collective-kernel rows, step table, event count): never the event table
    parent: job metadata (plan.settle) + merge (merge.merge_parts) -> one Analysis

Workers are this process (``jobs=1``: one rank at a time, memory of one rank), a pool of
``jobs`` processes, or a Dask cluster (``dask``: ``"local"`` or a scheduler address; the
optional extra ``traceforensics[dask]``) — ``runners``. The merged ``Analysis`` has the JSON
of the joint analysis (tested), except the graph-launch warning (one per rank, prefixed with
it). Its ``session`` holds the job's metadata and no events (``Analysis.event_count``
is the ranks' sum), so what needs the events (figures, the HTML report's timeline, cutting by
``--from``/``--to`` measured from the job's first event) takes the joint path.
"""

from __future__ import annotations

from pathlib import Path

from traceforensics.analysis.options import AnalysisOptions
from traceforensics.analysis.pipeline import Analysis
from traceforensics.fanout.merge import merge_parts
from traceforensics.fanout.parts import RankPart, RankTask
from traceforensics.fanout.plan import RankSet, rank_set, settle, tasks
from traceforensics.fanout.runners import LOCAL, Runner, default_jobs, runner
from traceforensics.fanout.worker import analyse_rank, session_start
from traceforensics.ingest.detect import check_input
from traceforensics.ingest.progress import report
from traceforensics.model.monitor import MonitorLog


def needs_joint(options: AnalysisOptions) -> bool:
    """Whether ``options`` need every rank in one table: a time range (``start_ns``/``end_ns``
    are offsets from the job's first event, known only once every rank is read)."""
    return options.range.start_ns is not None or options.range.end_ns is not None


def analyze_apart(
    directory: str | Path,
    options: AnalysisOptions | None = None,
    *,
    jobs: int | None = None,
    dask: str | None = None,
    use_cache: bool = False,
    monitor_log: MonitorLog | None = None,
) -> Analysis:
    """Analyse the rank files of ``directory`` apart and join them (module docstring).

    ``jobs``: worker processes (None: one per CPU; 1: here, one rank at a time); ``dask``:
    ``"local"`` for a local Dask cluster of ``jobs`` workers, or a scheduler address;
    ``use_cache``: read and write each rank's session cache (``traceforensics.cache``)."""
    opts = options or AnalysisOptions()
    opts.check()
    check_input(Path(directory))
    rs = rank_set(Path(directory))
    with runner(jobs, dask, len(rs.files)) as run:
        if run.remote:  # other machines: the files by absolute path (a shared file system)
            rs.files = [p.resolve() for p in rs.files]
        todo = tasks(rs, opts, use_cache, lambda items: list(run.map(session_start, items)))
        parts = _parts(run, todo)
    traces, meta = settle(rs, parts)
    report("joining the ranks")
    return merge_parts(traces, meta, opts, monitor_log)


def _parts(run: Runner, todo: list[RankTask]) -> list[RankPart]:
    """Every task's part in task order; stops at the first file that fails to load."""
    parts: list[RankPart] = []
    for part in run.map(analyse_rank, todo):
        parts.append(part)
        report(f"analysed {len(parts)} of {len(todo)} rank files")
        if part.failure is not None:
            break
    return parts


__all__ = [
    "LOCAL",
    "RankSet",
    "analyze_apart",
    "default_jobs",
    "needs_joint",
    "rank_set",
]
