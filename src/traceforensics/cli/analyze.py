"""``tf analyze PATH``: load a trace, run the analyses, print or write the report."""

from __future__ import annotations

import functools
import os
import shlex
import sys
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any

import click

from traceforensics.analysis.options import DEFAULTS, AnalysisOptions
from traceforensics.analysis.pipeline import (
    ARG_KEYS_READ,
    EVENT_COLUMNS_READ,
    Analysis,
    analyze,
)
from traceforensics.cache import DEFAULTS as DEFAULTS_KEY
from traceforensics.cache import cached_result, entry_path, replay_entry, store_result
from traceforensics.cli.annotate import annotate_option, check_annotate, write_annotation
from traceforensics.cli.fail_on import FAIL_ON_EXIT_HELP, check_gate, fail_on_option
from traceforensics.cli.figure_links import figure_links
from traceforensics.cli.options import (
    COLUMNS_HELP,
    EXIT_CODES_HELP,
    PLOT_SUFFIXES,
    check_output,
    duration_ns,
    monitor_log,
    ncu_named,
    ncu_option,
    non_negative_int,
    positive_float,
    positive_int,
    read_ncu,
    regex,
    sections_list,
    workload_option,
)
from traceforensics.cli.store import STORE_HELP, label_values, store_run, store_value
from traceforensics.ingest import load_path
from traceforensics.ingest.detect import check_input
from traceforensics.ingest.progress import report
from traceforensics.model.errors import NAME_BYTES, InputError, OptionError
from traceforensics.report.format import one_line
from traceforensics.report.json_out import build_json, dumps
from traceforensics.report.progress import progress_line
from traceforensics.report.terminal import SECTIONS, render_text

if TYPE_CHECKING:
    from traceforensics.compare import Rule
    from traceforensics.compare.deltas import FigureDelta
    from traceforensics.model.monitor import MonitorLog


@click.command(
    "analyze",
    short_help="Where the GPU's time went, ranked by what to change.",
    epilog="\b\nExamples:\n"
    "  tf analyze trace.pt.trace.json.gz\n"
    "  tf analyze report.nsys-rep --json > analysis.json\n"
    "  tf analyze runs/ --steps 3: --report ticket.html\n"
    "  tf analyze runs/ --jobs 8 --json > job.json\n"
    "  tf analyze /shared/runs/ --dask tcp://scheduler:8786\n"
    "  tf analyze trace.json.gz --sections findings,gaps --plot gaps.png\n"
    "  tf analyze trace.json.gz --monitor smi.csv --columns util=GPU%\n"
    "  tf analyze trace.json.gz --fail-on 'idle>30%' --fail-on 'mfu<25%'\n\n"
    + EXIT_CODES_HELP
    + FAIL_ON_EXIT_HELP,
)
@click.argument("path", type=click.Path(path_type=str, readable=False))
@click.option("--json", "as_json", is_flag=True, help="Write the JSON analysis object to stdout.")
@click.option("--no-cache", is_flag=True, help="Do not read or write the session cache.")
@click.option(
    "--top",
    default=DEFAULTS.kernels.top,
    show_default=True,
    callback=non_negative_int,
    help="Top kernels/ops listed per device.",
)
@click.option(
    "--gaps",
    "top_gaps",
    default=DEFAULTS.idle.top_gaps,
    show_default=True,
    callback=non_negative_int,
    help="Largest gaps kept.",
)
@click.option(
    "--step-pattern",
    default=None,
    callback=regex,
    help="Regex naming step ranges (default: ProfilerStep#N, then step/iteration ranges).",
)
@click.option(
    "--data-pattern",
    "data_patterns",
    multiple=True,
    help="Word marking a user data-loading range (repeatable; replaces the defaults "
    f"{', '.join(DEFAULTS.idle.data_patterns)}).",
)
@click.option(
    "--short-kernel-us",
    default=DEFAULTS.kernels.short_kernel_us,
    callback=positive_float(),
    show_default=True,
    help="Kernels shorter than this (µs) count as short.",
)
@click.option(
    "--peak-tflops",
    type=float,
    default=None,
    callback=positive_float(),
    help="Override the chip's peak TFLOPS.",
)
@click.option(
    "--window",
    type=click.Choice(["device", "trace"]),
    default=DEFAULTS.idle.window,
    show_default=True,
    help="Analysis window: first to last GPU work (device) or the whole trace.",
)
@click.option(
    "--step-window",
    type=click.Choice(["tiled", "annotation"]),
    default=DEFAULTS.steps.window,
    show_default=True,
    help="Step window: tiled (idle before a step's first GPU work is charged to it) or the "
    "step annotation's own device-side span.",
)
@click.option(
    "--sections",
    default="all",
    show_default=True,
    metavar="LIST",
    callback=sections_list,
    help="Terminal report sections after the verdict, comma-separated: "
    + ",".join(SECTIONS[1:])
    + " (or all).",
)
@click.option(
    "--steps",
    default=None,
    metavar="RANGE",
    help="Analyse only these steps, by number: 3: (from step 3), :5, 2:5 or 4.",
)
@click.option(
    "--from",
    "start_ns",
    default=None,
    metavar="TIME",
    callback=duration_ns,
    help="Analyse from this time after the trace's first event (1.5s, 200ms, 300us; bare = ms).",
)
@click.option(
    "--to",
    "end_ns",
    default=None,
    metavar="TIME",
    callback=duration_ns,
    help="Analyse up to this time after the trace's first event.",
)
@click.option(
    "--bin-ms",
    default=DEFAULTS.utilization.bin_ms,
    show_default=True,
    callback=positive_float(),
    help=(
        "Utilization bin (ms) from each device's window start; a window shorter than 100 bins "
        "is binned finer (1-2-5 steps, at least 100 bins)."
    ),
)
@click.option(
    "--monitor",
    "monitor_path",
    type=click.Path(path_type=str, readable=False),
    default=None,
    help="A monitoring log (nvidia-smi, dmon, dcgmi, table) to align with the trace.",
)
@click.option("--columns", default=None, metavar="MAP", help=COLUMNS_HELP)
@click.option(
    "--log-utc-offset",
    default="UTC",
    show_default=True,
    help="Time zone of the --monitor log's timestamps (nvidia-smi prints local time), e.g. +08:00.",
)
@click.option(
    "--markdown",
    "markdown_path",
    type=click.Path(path_type=Path),
    default=None,
    help="Also write a Markdown summary (for tickets) to this file.",
)
@click.option(
    "--report",
    "report_path",
    type=click.Path(path_type=Path),
    default=None,
    help="Also write a report file: .html (one self-contained file) or .md (Markdown).",
)
@click.option(
    "--plot",
    "plot_path",
    type=click.Path(path_type=Path),
    default=None,
    help="Also write figures: FILE (.png/.svg/.pdf) gets utilization and idle by cause per "
    "device; FILE's stem + .timeline, .steps, .kernels, .tflops beside it get the gap "
    "timeline, the per-step breakdown, the short-kernel Pareto chart and TFLOPS against peak.",
)
@click.option(
    "--jobs",
    type=int,
    default=None,
    metavar="N",
    callback=positive_int,
    help="Rank files of a directory loaded and analysed side by side in N processes "
    "(default: one per CPU; 1: one rank at a time in this process).",
)
@click.option(
    "--dask",
    default=None,
    metavar="ADDRESS",
    help="Analyse a directory's rank files on a Dask cluster: the scheduler's address, or "
    "'local' for a local cluster of --jobs workers (needs traceforensics[dask]).",
)
@click.option(
    "--store",
    is_flag=False,
    flag_value="",
    default=None,
    metavar="[URL]",
    callback=store_value,
    help="Record the run in the history store (see tf history), at URL if given: " + STORE_HELP,
)
@click.option(
    "--label",
    "labels",
    multiple=True,
    metavar="KEY=VALUE",
    callback=label_values,
    help="Label the stored run, e.g. git=abc123, run=baseline (repeatable; with --store; "
    "$TF_LABELS adds KEY=VALUE words).",
)
@ncu_option
@workload_option
@annotate_option
@fail_on_option(relative=False)
def analyze_command(
    path: str,
    as_json: bool,
    no_cache: bool,
    jobs: int | None,
    dask: str | None,
    monitor_path: str | None,
    ncu_path: str | None,
    columns: str | None,
    log_utc_offset: str,
    markdown_path: Path | None,
    report_path: Path | None,
    plot_path: Path | None,
    annotate_path: Path | None,
    sections: tuple[str, ...],
    fail_on: tuple[Rule, ...],
    store: str | None,
    labels: dict[str, str],
    **flat: Any,
) -> None:
    """Analyze a trace: PyTorch Profiler .json/.json.gz, a directory of rank files,
    an Nsight Systems .sqlite export or a .nsys-rep report."""
    inputs = [path, *(p for p in (monitor_path, ncu_path) if p)]
    if markdown_path is not None:
        check_output(markdown_path, inputs, "--markdown")
    if plot_path is not None:
        check_output(plot_path, inputs, "--plot", PLOT_SUFFIXES)
    if report_path is not None:
        check_output(report_path, inputs, "--report", (".html", ".htm", ".md"))
        if report_path.suffix.lower() == ".md":
            markdown_path = report_path
    check_annotate(annotate_path, inputs)
    # a .md report carries its figures beside it; plain --markdown links only --plot's files
    md_figures = report_path is not None and report_path == markdown_path
    # the analysis options' flat names are the flags' parameter names (``analysis.options``)
    options = DEFAULTS.with_(**flat)
    figures = plot_path is not None or report_path is not None
    # ``tf analyze TRACE --json`` alone is replayed next time (``cache.serve``): keyed by the
    # input as it is now, before the run reads it (a file replaced meanwhile is a miss)
    replay_at = replay_entry(_argv()) if as_json and not (no_cache or ncu_path) else None
    with progress_line(enabled=not as_json):
        result = analysis_of(
            path,
            options,
            use_cache=not no_cache,
            jobs=jobs,
            dask=dask,
            figures=figures or annotate_path is not None,  # (both read the events)
            monitor=lambda: monitor_log(monitor_path, columns, log_utc_offset),
            entry=replay_at,
            ncu_path=ncu_path,
        )
    if as_json:  # a script reads the JSON; the person running it sees the warnings
        for w in result.warnings:
            click.echo(f"tf: warning: {one_line(w)}", err=True)
    if report_path is not None and report_path.suffix.lower() in (".html", ".htm"):
        from traceforensics.report.html import render_html

        report_path.write_text(
            render_html(result, command=command_line()),
            encoding="utf-8",
            errors=NAME_BYTES,
        )
    if annotate_path is not None:
        write_annotation(result, path, annotate_path)
    # the JSON document is built once, and only when --json, --store or --fail-on needs it
    document = functools.cache(lambda: build_json(result))
    out = _write(
        result, document if as_json else None, markdown_path, plot_path, sections, md_figures
    )
    if replay_at is not None:
        warned = "".join(f"tf: warning: {one_line(w)}\n" for w in result.warnings)
        store_result(replay_at, result, answer=(out, warned))
    store_run(document, store, labels, inputs)  # before the gate: a failed run counts
    check_gate(fail_on, lambda: _figures(document(), path))


def analysis_of(
    path: str,
    options: AnalysisOptions,
    *,
    use_cache: bool = True,
    jobs: int | None = None,
    dask: str | None = None,
    figures: bool = False,
    monitor: Callable[[], MonitorLog | None] | None = None,
    entry: Path | None = None,
    ncu_path: str | None = None,
) -> Analysis:
    """The analysis of ``path`` exactly as ``tf analyze`` makes it: the rank files of a
    directory apart (``_apart``), else one session (the session cache with ``use_cache``); a
    repeat run reads the finished analysis from the result cache. ``figures``: the run also
    draws figures (they need every rank's events in one table). ``monitor`` loads the
    monitoring log, after the trace (a trace error is reported first). ``entry``: the
    analysis cache's entry, when taken before the run (``cache.replay_entry``). ``ncu_path``:
    an Nsight Compute report joined to the kernels (one table of events, never cached)."""
    # the report first: a wrong --ncu file fails before the trace loads
    ncu = read_ncu(ncu_path) if ncu_path is not None else None
    load_log = monitor or (lambda: None)
    if _apart(path, options, figures, dask, ncu is not None):
        log = load_log()
        report("analysing the rank files")
        return _analyze_apart(path, options, jobs, dask, use_cache, log)
    # only what the analysis and its renderers read is kept (``TraceSession.only``); the
    # ncu join also checks the launches' grid and block
    read = (*EVENT_COLUMNS_READ, *(("grid", "block") if ncu_path else ()))
    session = load_path(path, use_cache=use_cache).only(read, ARG_KEYS_READ)
    log = load_log()
    report("analysing")
    if ncu_path is not None:  # measured figures: never read from or kept in the result cache
        run = functools.partial(analyze, session, options, log, ncu=ncu)
        return _analyze(path, lambda: ncu_named(path, ncu_path, run))
    if not use_cache or log is not None or options.range != DEFAULTS.range:
        return _analyze(path, lambda: analyze(session, options, log))
    # a repeat run reads the finished analysis (``cache.cached_result``)
    at = entry or _results_entry(path, options)
    return cached_result(at, lambda: _analyze(path, lambda: analyze(session, options)), session)


def _results_entry(path: str, options: AnalysisOptions, how: str = "") -> Path | None:
    """The analysis cache's entry of ``path`` analysed with ``options`` (``how``: apart)."""
    text = DEFAULTS_KEY if options == DEFAULTS else repr(options)
    try:
        return entry_path("results", path, text + how)
    except OSError:  # (the load names what is wrong with the input)
        return None


def _figures(document: dict[str, Any], path: str) -> dict[str, FigureDelta]:
    """The job's figures for ``--fail-on`` (``traceforensics.compare``, imported only when a
    rule is given: a run without one never needs the comparison code)."""
    from traceforensics.compare import analysis_figures

    return analysis_figures(document, path)


def command_line() -> str:
    """The command line of this run, quoted for a shell (report headers)."""
    return shlex.join(["tf", *_argv()])


def _argv() -> list[str]:
    """The arguments of this run, as given (``cli.main``)."""
    argv: list[str] = (click.get_current_context().find_root().obj or {}).get("argv", sys.argv[1:])
    return argv


def _apart(
    path: str, options: AnalysisOptions, figures: bool, dask: str | None, ncu: bool = False
) -> bool:
    """Whether ``path`` is a directory whose rank files are analysed apart
    (``traceforensics.fanout``): always, unless the figures, a ``--from``/``--to`` cut or an
    ``--ncu`` join need every rank's events in one table (the joint path)."""
    if not os.path.isdir(path):  # (False for any error: the joint load names it)
        return False
    # (``fanout`` is imported for directories only: it brings the rank workers' machinery)
    from traceforensics.fanout import needs_joint

    why = [
        *(["figures (--plot, --report)"] if figures else []),
        *(["--from/--to"] if needs_joint(options) else []),
        *(["--ncu"] if ncu else []),
    ]
    if why and dask is not None:
        raise InputError(
            f"--dask: {' and '.join(why)} read every rank's events in one process; drop "
            "--dask or those options"
        )
    return not why


def _analyze_apart(
    path: str,
    options: AnalysisOptions,
    jobs: int | None,
    dask: str | None,
    use_cache: bool,
    log: MonitorLog | None,
) -> Analysis:
    """The rank files of directory ``path`` analysed apart and joined; a repeat run reads
    the joined analysis from the analysis cache (``cache.cached_result``)."""
    from traceforensics.fanout import analyze_apart

    def run() -> Analysis:
        return _analyze(
            path,
            lambda: analyze_apart(
                path, options, jobs=jobs, dask=dask, use_cache=use_cache, monitor_log=log
            ),
        )

    check_input(Path(path))  # before the cache key reads the directory
    if not use_cache or log is not None or options.range != DEFAULTS.range:
        return run()
    return cached_result(_results_entry(path, options, "|apart"), run)


def _analyze(path: str, run: Callable[[], Analysis]) -> Analysis:
    try:
        return run()
    except OptionError as exc:  # still name the file; main() adds the flag
        raise OptionError(f"{path}: {exc}", exc.option) from exc
    except InputError as exc:  # found while analysing: still name the file
        if path in str(exc):
            raise
        raise type(exc)(f"{path}: {exc}") from exc


def _write(
    result: Analysis,
    document: Callable[[], dict[str, Any]] | None,
    markdown_path: Path | None,
    plot_path: Path | None,
    sections: tuple[str, ...] = SECTIONS,
    md_figures: bool = False,
) -> bytes:
    """The report on stdout (the JSON ``document`` when given, else text), and the optional
    Markdown and plot files (figures first, so the Markdown can link them); the JSON bytes
    written (empty for text)."""
    figures: dict[str, Path] = {}
    if plot_path is not None:
        from traceforensics.report.plots import write_figures

        figures = write_figures(result, plot_path)
    if markdown_path is not None:
        from traceforensics.report.markdown import render_markdown

        links = figure_links(result, markdown_path, figures, md_figures)
        # a file name that is not UTF-8 is written escaped, never a crash
        markdown_path.write_text(
            render_markdown(result, command=command_line(), figures=links),
            encoding="utf-8",
            errors=NAME_BYTES,
        )
    if document is not None:
        out = dumps(document())
        sys.stdout.buffer.write(out)
        return out
    sys.stdout.write(render_text(result, sections=sections))
    return b""
