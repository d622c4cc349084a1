"""``tf diff BEFORE AFTER``: did the change work? Cause by cause, with a CI gate (issue 15).

Each side is a trace, a directory of rank files (any supported format, the two sides may
differ) or a saved ``tf analyze --json`` document, or with ``--baseline`` a run from the
history store. Traces are analysed exactly as ``tf analyze`` does (``analyze.analysis_of``: the
same caches, the same fan-out for directories) with the same options on both sides; the
comparison itself is ``traceforensics.compare`` on the two analysis documents.
"""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

import click
import orjson

from traceforensics.analysis.options import DEFAULTS
from traceforensics.cli.analyze import analysis_of, analyze_command, command_line
from traceforensics.cli.fail_on import FAIL_ON_EXIT_HELP, check_gate, fail_on_option
from traceforensics.cli.options import EXIT_CODES_HELP, check_output
from traceforensics.compare import Diff, Rule, diff_documents
from traceforensics.compare.figures import SCHEMA_ANALYSIS
from traceforensics.model.errors import NAME_BYTES, InputError
from traceforensics.report.format import one_line
from traceforensics.report.json_out import dumps
from traceforensics.report.progress import progress_line

#: ``tf analyze`` options that shape both sides' analyses (reused, not redefined: same names,
#: defaults, checks and help).
SHARED_OPTIONS = (
    "no_cache",
    "top",
    "step_pattern",
    "data_patterns",
    "short_kernel_us",
    "peak_tflops",
    "window",
    "step_window",
    "steps",
    "start_ns",
    "end_ns",
    "jobs",
    "dask",
)
#: How much of a file is read to tell an analysis document from a trace.
_SNIFF_BYTES = 4096


@click.command(
    "diff",
    short_help="Did the change work? Two runs compared, cause by cause.",
    epilog="\b\nExamples:\n"
    "  tf diff before.pt.trace.json.gz after.pt.trace.json.gz\n"
    "  tf diff runs/before/ runs/after/ --json > diff.json\n"
    "  tf diff before.json after.nsys-rep --report diff.html\n"
    "  tf diff old.json new.pt.trace.json.gz --fail-on 'step_time>+5%' --fail-on 'mfu<-3%'\n"
    "  tf diff --baseline branch=main new.pt.trace.json.gz --fail-on 'idle.data_loading>+20%'\n\n"
    + EXIT_CODES_HELP
    + FAIL_ON_EXIT_HELP,
)
@click.argument("paths", nargs=-1, type=click.Path(path_type=str, readable=False))
@click.option(
    "--json", "as_json", is_flag=True, help="Write the traceforensics.diff/1 JSON to stdout."
)
@click.option(
    "--report",
    "report_path",
    type=click.Path(path_type=Path),
    default=None,
    help="Also write the comparison to a file: .md (Markdown) or .html (one self-contained file).",
)
@fail_on_option(relative=True)
@click.option(
    "--baseline",
    default=None,
    metavar="SELECTOR",
    help="Compare AFTER (the only path) against a run from the history store (tf analyze "
    "--store), e.g. label=value; the latest match.",
)
@click.option(
    "--store-url",
    "--store",
    default=None,
    metavar="URL",
    help="The history store --baseline reads (default: the local store).",
)
def diff_command(
    paths: tuple[str, ...],
    as_json: bool,
    report_path: Path | None,
    fail_on: tuple[Rule, ...],
    baseline: str | None,
    store_url: str | None,
    no_cache: bool,
    jobs: int | None,
    dask: str | None,
    **flat: Any,
) -> None:
    """Compare two runs: BEFORE AFTER (traces, rank directories or tf analyze --json files),
    or --baseline SELECTOR AFTER."""
    _check_paths(paths, baseline)
    if report_path is not None:
        check_output(report_path, paths, "--report", (".html", ".htm", ".md"))
    options = DEFAULTS.with_(**flat)
    sides: list[tuple[dict[str, Any], str]] = []
    if baseline is not None:
        sides.append((_baseline(baseline, store_url), f"baseline {baseline}"))
    with progress_line(enabled=not as_json):
        for path in paths:
            doc = saved_document(path)
            if doc is None:
                result = analysis_of(path, options, use_cache=not no_cache, jobs=jobs, dask=dask)
                doc = result.to_json()
            sides.append((doc, path))
    (before, b_label), (after, a_label) = sides
    diff = diff_documents(before, after, b_label, a_label)
    _write(diff, as_json, report_path)
    check_gate(fail_on, lambda: diff.job.figures)


def _check_paths(paths: tuple[str, ...], baseline: str | None) -> None:
    want = 1 if baseline is not None else 2
    if len(paths) != want:
        usage = "--baseline SELECTOR AFTER" if baseline is not None else "BEFORE AFTER"
        raise InputError(
            f"tf diff: {len(paths)} path(s) given, {want} expected; write tf diff {usage}"
        )


def _baseline(selector: str, url: str | None) -> dict[str, Any]:
    """BEFORE from the history store (``traceforensics.history``, imported only when used)."""
    from traceforensics.history import find_baseline

    return find_baseline(selector, url)


def saved_document(path: str) -> dict[str, Any] | None:
    """The analysis document saved at ``path`` (``tf analyze --json > x.json``), or None when
    ``path`` is a trace (or anything else: the trace loader then says what is wrong)."""
    p = Path(path)
    if not p.is_file() or not p.name.endswith(".json"):
        return None
    try:
        with p.open("rb") as fh:
            head = fh.read(_SNIFF_BYTES)
    except OSError:
        return None
    if b'"schema"' not in head:
        return None
    if SCHEMA_ANALYSIS.encode() not in head:
        if b'"traceforensics.' in head:  # our own output, but not an analysis (a diff, ...)
            raise InputError(
                f"{path}: a traceforensics document that is not {SCHEMA_ANALYSIS}; give a "
                "trace or the output of tf analyze --json"
            )
        return None
    try:
        doc = orjson.loads(p.read_bytes())
    except (orjson.JSONDecodeError, OSError) as exc:
        raise InputError(
            f"{path}: unreadable analysis document ({one_line(str(exc))}); re-create it with "
            "tf analyze --json"
        ) from exc
    return doc if isinstance(doc, dict) else None


def _write(diff: Diff, as_json: bool, report_path: Path | None) -> None:
    """The diff on stdout (text or JSON) and the optional report file."""
    if report_path is not None:
        if report_path.suffix.lower() == ".md":
            from traceforensics.report.diff_markdown import render_diff_markdown as render
        else:
            from traceforensics.report.diff_html import render_diff_html as render
        text = render(diff, command=command_line())
        report_path.write_text(text, encoding="utf-8", errors=NAME_BYTES)
    if as_json:
        for w in diff.warnings:  # a script reads the JSON; the person running it sees these
            click.echo(f"tf: warning: {one_line(w)}", err=True)
        sys.stdout.buffer.write(dumps(diff.to_json()))
    else:
        from traceforensics.report.diff_text import render_diff_text

        sys.stdout.write(render_diff_text(diff))


# both sides are analysed with ``tf analyze``'s own options: the same objects, so names,
# defaults, checks and help cannot drift apart
diff_command.params.extend(p for p in analyze_command.params if p.name in SHARED_OPTIONS)
