"""The work of one rank, run in a worker process (or in the parent with ``jobs=1``).

``analyse_rank(task)``: load the rank file as ``tf analyze FILE`` would (``ingest.load_path``,
the session cache when asked), put it on the job's rank and clock, cut it to the selected
steps, prepare it and run every pass (``analysis.pipeline.analyze_context(job=False)``), then
send back the part (``parts.RankPart``) and let the event table go. The rules of the joint
loader are kept (which rule: the task's registry row, ``ingest.readers``):

- a merged set (e.g. nsys): ``rank`` from the task; times shifted by ``shift_ns`` onto the
  earliest session start of the job (``ingest.ranksets.on_job_clock``, as the joint merge
  places each rank), so gaps, steps and windows carry the same absolute ns; the metadata
  keeps the file's own session start, from which the parent's merge of the metadata
  (``plan``) derives the same shifts;
- a set read by its ``load_set`` (Kineto): the file's own rank (``distributedInfo``, else an
  explicit ``rank3`` file name, else 0) and its ``distributedInfo`` go back; the parent applies
  the rank rules of the whole set (collisions, positions) and relabels (``parts.relabel``). A
  file that is not a trace is sent back as ``skipped`` (a directory leaves it out);
- ``--steps``: cut per rank (``analysis.restrict``): a rank without the selected steps sends
  back no results (``dropped``), as the joint cut drops its events.

``session_start((row, path))``: a file's session start (wall ns, the row's ``clock_start``),
read before fanning out (an nsys ``.nsys-rep`` is exported first, cached beside it).
"""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

from traceforensics.analysis.context import prepare
from traceforensics.analysis.findings.busy_losses import attention_scores
from traceforensics.analysis.options import RangeOptions
from traceforensics.analysis.pipeline import ARG_KEYS_READ, EVENT_COLUMNS_READ, analyze_context
from traceforensics.analysis.ranks.collectives import collective_kernels
from traceforensics.analysis.restrict import restrict
from traceforensics.fanout.parts import Failure, RankPart, RankResults, RankTask
from traceforensics.ingest import load_path
from traceforensics.ingest.ranksets import on_job_clock
from traceforensics.ingest.readers import Reader, register
from traceforensics.ingest.suspects import graph_launch_notes
from traceforensics.model.errors import InputError, OptionError, UnsupportedFormatError
from traceforensics.model.memory import release_free_memory


def analyse_rank(task: RankTask) -> RankPart:
    """One rank's part (module docstring); an ``InputError`` comes back as ``failure``."""
    try:
        return _analyse(task)
    except InputError as exc:
        return RankPart(task.index, task.path, failure=Failure.of(exc))
    finally:
        release_free_memory()  # the event table and the context are garbage now


def _analyse(task: RankTask) -> RankPart:
    own_set = task.reader is not None and task.reader.load_set is not None
    if task.reader is not None:
        register(task.reader)
    try:
        # only what the analysis reads is kept, as ``tf analyze FILE`` does
        session = load_path(Path(task.path), use_cache=task.use_cache).only(
            EVENT_COLUMNS_READ, ARG_KEYS_READ
        )
    except UnsupportedFormatError as exc:
        if not own_set:
            raise
        return RankPart(task.index, task.path, skipped=str(exc))
    # the joint loader says this once for the whole job: it is sent apart, per rank
    graph = graph_launch_notes(session.events)
    session.meta.warnings = [w for w in session.meta.warnings if w not in graph]
    info = None
    if task.rank is not None:
        session = on_job_clock(session, task.rank, task.shift_ns)
    elif own_set:
        info = {k: v for k, v in session.meta.distributed.items() if k != "rank_source"} or None
    rank = session.meta.inputs[0].rank if session.meta.inputs else 0
    part = RankPart(task.index, task.path, rank, session.meta, info, graph)
    opts = task.options
    try:
        session = restrict(session, opts.range.steps, None, None, opts.steps.pattern)
    except OptionError as exc:  # no selected step on this rank: the joint cut drops it
        part.dropped = Failure.of(exc)
        return part
    ctx = prepare(session, replace(opts, range=RangeOptions()))
    del session
    result = analyze_context(ctx, job=False)
    # findings quote the evidence of their device's kept gaps: which gap each item is from
    from_gap = {id(e): j for j, g in enumerate(result.idle.gaps) for e in g.evidence}
    part.results = RankResults(
        event_count=ctx.session.events.height,
        trace_span=ctx.trace_span,
        devices=list(ctx.devices),
        records=result.devices,
        idle=result.idle,
        kernels=result.kernels,
        patterns=result.patterns,
        findings=result.findings,
        collectives=collective_kernels(ctx.work, ctx.session.args, ctx.device_table, ctx.tree),
        steps=ctx.steps,
        names=ctx.name_counts,
        evidence_gaps=[[from_gap.get(id(e)) for e in f.evidence] for f in result.findings],
        attention=attention_scores(ctx).get(rank),
        diagnostics=result.diagnostics,
        host=result.host,
        work_size=result.work_size,
        memory=result.memory,
        serving=result.serving,
    )
    return part


def session_start(item: tuple[Reader, str]) -> int | Failure | None:
    """Wall-clock ns of a file's session start (``row.clock_start``; None when it records
    none), or the failure to read it."""
    row, path = item
    register(row)
    try:
        return row.clock_start(Path(path)) if row.clock_start is not None else None
    except OSError as exc:
        return Failure("InputError", f"{path}: cannot read ({exc.strerror}); check the file")
    except InputError as exc:
        return Failure.of(exc)
