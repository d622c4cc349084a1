"""Run every pass over one prepared context and gather the typed results.

Like pyinstrument's processors: the session goes in, an ``Analysis`` (plain data) comes out;
renderers in ``report/`` turn it into text, JSON or plots. Nothing here prints.

``prepare`` builds the ``AnalysisContext`` once (launch links, busy unions, windows, steps, host
timeline); then each pass in ``PASSES`` runs on it, with one signature ``(context) -> result``:

============  ===========================================  ===================
pass          what it answers                              result
============  ===========================================  ===================
idle          every idle ns by cause, largest gaps,        ``IdleAnalysis``
              steps, per-stream view
kernels       short kernels, FLOPs, TFLOPS, MFU            ``KernelAnalysis``
utilization   busy-fraction timeline and its pattern       ``list[DevicePattern]``
============  ===========================================  ===================

``device_records`` then folds the context's facts and the pass results into one record per
device, and ``build_findings`` ranks every way each device loses time by the time its change
would give back (``findings[0]`` is the first change), with remedies in the terms of the
program detected in the trace; a monitoring log, when given, is aligned to the trace's
wall-clock window. A pass called
alone on a session (``analyze_idle(session, options)``) prepares the same context and gives the
same result as the same part of ``analyze``.

Every warning is also a coded diagnostic (``analysis.diagnostics``: what the trace is, what it
cannot show); a rank without GPU activity says why (launches without GPU records, or a CPU-only
capture), and a trace without any gets the host time of its steps by phase
(``analysis.host_steps``). A part that raises degrades to an ``analysis_failed`` warning naming
it, and the rest of the analysis stands.
"""

from __future__ import annotations

import os
from collections.abc import Callable
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Final, TypeVar

import polars as pl

from traceforensics._version import __version__
from traceforensics.analysis.context import (
    ANALYSIS_ARG_KEYS,
    AnalysisContext,
    prepare,
    side_by_side,
)
from traceforensics.analysis.devices import DeviceRecord, device_records
from traceforensics.analysis.diagnostics import (
    ANALYSIS_FAILED,
    GPU_ACTIVITY_MISSING,
    MONITOR_UNALIGNED,
    WARNING,
    Diagnostic,
    coded,
    failure_text,
    gpu_presence,
    launch_counts,
    meta_codes,
)
from traceforensics.analysis.export import SCHEMA_ID, device_json
from traceforensics.analysis.findings.build import build_findings
from traceforensics.analysis.findings.results import Finding
from traceforensics.analysis.findings.stragglers import straggler_findings
from traceforensics.analysis.frames import analysis_frames
from traceforensics.analysis.host_steps import HostBreakdown, host_breakdown
from traceforensics.analysis.idle.gaps import IdleAnalysis, analyze_idle
from traceforensics.analysis.kernels.forensics import analyze_kernels
from traceforensics.analysis.kernels.results import KernelAnalysis
from traceforensics.analysis.memory import DeviceMemory, analyze_memory
from traceforensics.analysis.method import investigation
from traceforensics.analysis.options import AnalysisOptions
from traceforensics.analysis.program import Program
from traceforensics.analysis.ranks import RankAnalysis, analyze_ranks
from traceforensics.analysis.ranks.collectives import PG_ARG
from traceforensics.analysis.ranks.throttle import with_monitor
from traceforensics.analysis.serving import ServingAnalysis, analyze_serving
from traceforensics.analysis.transfers import device_transfers
from traceforensics.analysis.utilization.timeline import DevicePattern, analyze_utilization
from traceforensics.analysis.work_size import DeviceWork, step_work, with_flops
from traceforensics.model.errors import InputError
from traceforensics.model.memory import release_free_memory
from traceforensics.model.memory_args import MEMORY_ARG_KEYS
from traceforensics.model.session import TraceSession

if TYPE_CHECKING:
    from traceforensics.analysis.monitoring.monitor import MonitorReport
    from traceforensics.model.monitor import MonitorLog

#: The passes, in order: name -> pass. Each takes the context and returns its typed result.
PASSES: Final[dict[str, Callable[[AnalysisContext], Any]]] = {
    "idle": analyze_idle,
    "kernels": analyze_kernels,
    "utilization": analyze_utilization,
}

#: The event-table columns ``analyze`` (the context, every pass, the rank analysis) and the
#: renderers of its result read; ``TraceSession.only`` keeps these for ``tf analyze``. Not
#: read: ``category`` and the kernels' ``grid``/``block`` lists.
EVENT_COLUMNS_READ: Final = (
    "event_id",
    "kind",
    "start_ns",
    "dur_ns",
    "rank",
    "device",
    "stream",
    "pid",
    "tid",
    "name",
    "correlation",
    "external_id",
    "bytes",
    "copy_kind",
    "src_mem",
    "dst_mem",
    "is_comm",
)
#: The args keys they read: the FLOPs model's shapes, dtypes and sequence numbers, the
#: collectives' process group, and the memory events' bytes and totals.
ARG_KEYS_READ: Final = (*ANALYSIS_ARG_KEYS, PG_ARG, *MEMORY_ARG_KEYS)


@dataclass
class Analysis:
    """Everything an analysis computed for one session (see ``to_json``/``frames``)."""

    session: TraceSession
    options: AnalysisOptions
    devices: list[DeviceRecord]
    idle: IdleAnalysis
    kernels: KernelAnalysis
    patterns: list[DevicePattern]
    program: Program
    findings: list[Finding] = field(default_factory=list)
    monitor: MonitorReport | None = None
    warnings: list[str] = field(default_factory=list)
    ranks: RankAnalysis | None = None
    #: rows of the event table analysed, when ``session`` does not hold them (ranks analysed
    #: apart, ``traceforensics.fanout``, send back summaries, never their events) or may not
    #: have read them (an analysis from the analysis cache: ``cli.result_cache``)
    event_total: int | None = None
    #: every warning with its code, then the facts that are not problems (``cpu_only``):
    #: ``analysis.diagnostics``
    diagnostics: list[Diagnostic] = field(default_factory=list)
    #: the host time of each step by phase, for a trace without GPU activity (None with GPUs)
    host: HostBreakdown | None = None
    #: per device, the work size of each step and whether step time follows it
    #: (``analysis.work_size.step_work``; a ``DeviceWork`` each)
    work_size: list[DeviceWork] = field(default_factory=list)
    #: an inference server's iterations (``analysis.serving``; None: not a server)
    serving: ServingAnalysis | None = None
    #: per device, memory over time (``analysis.memory``; empty without memory events)
    memory: list[DeviceMemory] = field(default_factory=list)

    def findings_of(self, rank: int, device: int) -> list[Finding]:
        """The findings of one device, largest ``recoverable_ns`` first."""
        return [f for f in self.findings if (f.rank, f.device) == (rank, device)]

    @property
    def event_count(self) -> int:
        return self.session.events.height if self.event_total is None else self.event_total

    def device(self, rank: int, device: int) -> DeviceRecord | None:
        return next((d for d in self.devices if (d.rank, d.device) == (rank, device)), None)

    def to_json(self) -> dict[str, Any]:
        """The ``traceforensics.analysis/1`` object (docs/json-output.md): plain JSON types."""
        meta = self.session.meta
        idle = self.idle
        out: dict[str, Any] = {
            "schema": SCHEMA_ID,
            "tool_version": __version__,
            "inputs": [
                {
                    "path": i.path,
                    "format": i.format,
                    "rank": i.rank,
                    "format_version": i.format_version,
                }
                for i in meta.inputs
            ],
            "source_format": meta.source_format,
            "event_count": self.event_count,
            "program": {
                "framework": self.program.framework,
                "vendor": self.program.vendor,
                "evidence": self.program.evidence,
                "facts": self.program.facts.to_json(),
            },
            "findings": [f.to_json() for f in self.findings],
            "method": [m.to_json() for m in investigation(self)],
            "range": {
                "steps": self.options.range.steps,
                "start_ns": self.options.range.start_ns,
                "end_ns": self.options.range.end_ns,
            },
            "devices": [device_json(d) for d in self.devices],
            "steps": [s.to_json() for s in idle.steps],
            "work_size": [w.to_json() for w in self.work_size],
            "serving": self.serving.to_json() if self.serving is not None else None,
            "memory": [m.to_json() for m in self.memory],
            "step_summary": [s.to_json() for s in idle.step_summary],
            "gaps": [g.to_json() for g in idle.gaps],
            "stream_gaps": [s.to_json() for s in idle.stream_gaps],
        }
        out.update(self.kernels.to_json())
        if self.ranks is not None:
            out["ranks"] = self.ranks.to_json()
        out["warnings"] = list(self.warnings)
        out["diagnostics"] = [d.to_json() for d in self.diagnostics]
        out["host"] = self.host.to_json() if self.host is not None else None
        if self.monitor is not None:
            out["monitor"] = self.monitor.to_json()
        return out

    def frames(self) -> dict[str, pl.DataFrame]:
        """Polars tables keyed ``devices``, ``gaps``, ``gap_causes``, ``steps``,
        ``short_kernels``, ``ops`` (``.to_pandas()`` converts each)."""
        return analysis_frames(self.devices, self.idle, self.kernels, self.findings, self.ranks)

    def __repr__(self) -> str:
        src = ", ".join(i.path for i in self.session.meta.inputs[:2])
        more = len(self.session.meta.inputs) - 2
        if more > 0:
            src += f", +{more} more"
        idle = sum(d.idle_ns for d in self.devices)
        window = sum(d.window_ns for d in self.devices)
        tops = {d.top_cause for d in self.devices} - {None}
        top = ", ".join(sorted(str(t) for t in tops)) or "none"
        share = f"{100 * idle / window:.1f}%" if window else "-"
        return (
            f"<Analysis {self.session.meta.source_format} [{src}]: {len(self.devices)} device(s),"
            f" idle {share}, top cause {top}, {len(self.idle.gaps)} gaps kept,"
            f" {len(self.idle.steps)} step windows>"
        )


def analyze(
    session: TraceSession,
    options: AnalysisOptions | None = None,
    monitor_log: MonitorLog | None = None,
    ncu: pl.DataFrame | None = None,
) -> Analysis:
    """Prepare the context once, run every pass in ``PASSES`` over it, fold the results into
    device records and align the optional monitoring log; ``ncu``: an Nsight Compute report
    (``ingest.ncu.read_ncu_csv``) whose measured figures the kernels take
    (``kernels.ncu_join.with_ncu``)."""
    return analyze_context(prepare(session, options), monitor_log, ncu=ncu)


_T = TypeVar("_T")


def _then_release(run: Callable[[AnalysisContext], _T]) -> Callable[[AnalysisContext], _T]:
    """``run``, then the heap pages its temporaries freed given back (one pass after another
    on a big table: the next pass would peak on top of the pages the last one left)."""

    def wrapped(ctx: AnalysisContext) -> _T:
        out = run(ctx)
        release_free_memory()
        return out

    return wrapped


def analyze_context(
    ctx: AnalysisContext,
    monitor_log: MonitorLog | None = None,
    *,
    job: bool = True,
    ncu: pl.DataFrame | None = None,
) -> Analysis:
    """``analyze`` of a prepared context. ``job=False``: the context holds one rank of a job
    analysed apart (``traceforensics.fanout``): the multi-rank view and the straggler findings
    are left to the merge of every rank (``ranks`` None, findings as ``build_findings`` ranks
    them). A part that raises (not an ``InputError``) leaves its result empty and an
    ``analysis_failed`` warning naming it (``RAISE_FAILED`` raises instead)."""
    session = ctx.session  # the part of the trace the options select (``restrict``)
    failed: list[str] = []
    # the passes only read the context: run them side by side (polars and numpy release the
    # GIL), each result exactly what the pass gives alone
    # on a big table the passes' working sets would peak together (``side_by_side``)
    together = side_by_side(session.events.height)
    workers = len(PASSES) + 1 if together else 1
    with ThreadPoolExecutor(max_workers=workers) as pool:
        futures = {
            name: pool.submit(run if together else _then_release(run), ctx)
            for name, run in PASSES.items()
        }
        moved = pool.submit(device_transfers, ctx)  # the device records' copies, meanwhile
        results = {name: _result(name, f, _empty(name, ctx), failed) for name, f in futures.items()}
        transfers = _result("transfers", moved, [], failed)
    idle, kernels, patterns = results["idle"], results["kernels"], results["utilization"]
    kernels, ncu_note = _with_ncu(ctx, kernels, ncu)
    warnings = list(session.meta.warnings)
    born: dict[str, str] = {}
    if ncu_note is not None:  # launches of other processes or devices were not joined
        warnings.append(ncu_note)
        born[ncu_note] = WARNING
    monitor = None
    if monitor_log is not None:
        has_events = session.events.height > 0
        # (imported here: a run without a monitoring log does not import its analysis)
        from traceforensics.analysis.monitoring.align import aligned_monitor

        monitor, note = aligned_monitor(session.meta, ctx.trace_span, has_events, monitor_log)
        if note:
            warnings.append(note)
            born[note] = MONITOR_UNALIGNED
    records = device_records(ctx, idle, kernels, patterns, transfers)
    no_work: list[DeviceWork] = []
    work_size = _guard(
        "work_size",
        lambda: with_flops(step_work(ctx, idle.steps), idle.steps, kernels.mfu_by_step),
        no_work,
        failed,
    )
    program = ctx.program
    ranks = None
    if job:
        ranks = _guard("ranks", lambda: analyze_ranks(ctx, done=(records, idle)), None, failed)
        ranks = with_monitor(ranks, monitor) if ranks is not None else None
    serving = _guard("serving", lambda: analyze_serving(ctx, idle), None, failed)
    no_memory: list[DeviceMemory] = []
    memory = _guard("memory", lambda: analyze_memory(ctx, idle), no_memory, failed)
    none: list[Finding] = []
    findings = _guard(
        "findings",
        lambda: build_findings(ctx, records, idle, kernels, program, serving, memory),
        none,
        failed,
    )
    if ranks is not None:
        findings = straggler_findings(findings, ranks, records, program)
    # every rank the trace holds: a rank without GPU activity says what it is
    ranks_seen = {i.rank for i in session.meta.inputs}
    ranks_seen |= set(session.events.get_column("rank").unique().drop_nulls().to_list())
    presence = gpu_presence(
        launch_counts(session.events), ranks_seen, {d.rank for d in records}, session.meta
    )
    host = None
    if not records:
        host = _guard("host", lambda: host_breakdown(session, ctx.options), None, failed)
    for text in failed:
        warnings.append(text)
        born[text] = ANALYSIS_FAILED
    for fact in presence:
        if fact.code in WARNING_CODES:
            warnings.append(fact.message)
    return Analysis(
        session=session,
        options=ctx.options,
        devices=records,
        idle=idle,
        kernels=kernels,
        patterns=patterns,
        program=program,
        findings=findings,
        monitor=monitor,
        warnings=warnings,
        ranks=ranks,
        diagnostics=coded(warnings, {**meta_codes(session.meta), **born}, presence),
        host=host,
        work_size=work_size,
        serving=serving,
        memory=memory,
    )


#: The codes of ``gpu_presence`` that are warnings too (``cpu_only`` is a fact, not a problem).
WARNING_CODES: Final = frozenset({GPU_ACTIVITY_MISSING, ANALYSIS_FAILED, WARNING})
#: Set (``TF_RAISE_FAILED=1``; the test suite sets it): a part that raises fails the run
#: instead of leaving an ``analysis_failed`` warning, so a test sees the bug.
RAISE_FAILED: Final = os.environ.get("TF_RAISE_FAILED", "") not in ("", "0")


def _with_ncu(
    ctx: AnalysisContext, kernels: KernelAnalysis, ncu: pl.DataFrame | None
) -> tuple[KernelAnalysis, str | None]:
    """The kernels with an Nsight Compute report's measured figures (``ncu`` None: as they
    are), and the warning when part of the report was not joined; a report matching nothing
    raises (exit 2)."""
    if ncu is None:
        return kernels, None
    from traceforensics.analysis.kernels.ncu_join import with_ncu

    joined = with_ncu(ctx, kernels, ncu)
    return joined, joined.ncu.warning("the Nsight Compute report") if joined.ncu else None


def _guard(name: str, run: Callable[[], _T], empty: _T, failed: list[str]) -> _T:
    """``run()``, or ``empty`` with the failure's warning added to ``failed``."""
    try:
        return run()
    except (InputError, MemoryError):
        raise  # the input is wrong, or does not fit: one line and exit 2, as everywhere
    except Exception as exc:
        if RAISE_FAILED:
            raise
        failed.append(failure_text(name, exc))
        return empty


def _result(name: str, future: Future[_T], empty: _T, failed: list[str]) -> _T:
    return _guard(name, future.result, empty, failed)


def _empty(name: str, ctx: AnalysisContext) -> Any:
    """The result of pass ``name`` that says nothing (a pass that failed)."""
    if name == "idle":
        return IdleAnalysis(devices=[], gaps=[])
    if name == "kernels":
        return KernelAnalysis.empty(ctx.options.kernels.short_kernel_us)
    return []
