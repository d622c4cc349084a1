"""``tf`` / ``traceforensics`` entry point: the command group and error handling.

Bad input never shows a traceback: an ``InputError`` becomes one line on stderr and exit code 2.
An unexpected error prints one line and exits 3; ``TF_DEBUG=1`` shows the traceback. A broken
``--fail-on`` rule exits 1 after the output is written (``cli.fail_on``).
"""

from __future__ import annotations

import io
import os
import sys

import click
import polars as pl

from traceforensics._version import __version__
from traceforensics.cli.lazy_group import LazyGroup
from traceforensics.model.errors import (
    NAME_BYTES,
    InputError,
    OptionError,
    TraceForensicsError,
    not_enough_memory,
)
from traceforensics.model.memory import freeze_for_exit, startup_done
from traceforensics.report.format import one_line

EXIT_INPUT = 2
EXIT_INTERNAL = 3

#: The commands, each imported only when it runs (``cli.lazy_group``): ``tf analyze`` does not
#: import what only ``tf diff``, ``tf record`` or ``tf monitor`` need.
COMMANDS = {
    "analyze": "traceforensics.cli.analyze:analyze_command",
    "diff": "traceforensics.cli.diff:diff_command",
    "monitor": "traceforensics.cli.monitor:monitor_command",
    "explain": "traceforensics.cli.explain:explain_command",
    "history": "traceforensics.cli.history:history_command",
    "mcp": "traceforensics.cli.mcp:mcp_command",
    "record": "traceforensics.cli.record:record_command",
}


@click.group(
    cls=LazyGroup,
    lazy_commands=COMMANDS,
    context_settings={"help_option_names": ["-h", "--help"]},
)
@click.version_option(__version__, prog_name="traceforensics")
@click.pass_context
def cli(ctx: click.Context) -> None:
    """When the GPU was idle, who was it waiting for?

    Reads PyTorch Profiler (Kineto) traces and Nsight Systems exports, attributes every idle
    nanosecond of every GPU to a cause and ranks what to change first.

    \b
    Examples:
      tf analyze trace.pt.trace.json.gz
      tf analyze report.nsys-rep --json > analysis.json
      tf analyze runs/ --steps 3: --markdown ticket.md
      tf diff before.pt.trace.json.gz after.pt.trace.json.gz --fail-on 'step_time>+5%'
      tf history --trend idle.data_loading --label branch=main
      tf monitor nvidia-smi.log
      tf explain host_sync
      tf record -- python train.py
      tf mcp --root ~/traces

    \b
    Exit codes: 0 done; 1 a --fail-on rule broke (one line per rule);
    2 bad input or option (one line: file, problem, what to do);
    3 internal error (a bug: please report it).
    """
    if (ctx.obj or {}).get("console"):
        startup_done()  # the command's modules are imported (click resolves it first)


def _escape_unencodable() -> None:
    """A file name that is not UTF-8 (lone surrogates) prints escaped instead of failing."""
    for stream in (sys.stdout, sys.stderr):
        if isinstance(stream, io.TextIOWrapper):
            stream.reconfigure(errors=NAME_BYTES)


def main(argv: list[str] | None = None) -> None:
    """Console-script entry: run the group, mapping errors to one line and an exit code.
    As the console script (``argv`` None) the process ends with it: the heap is frozen first
    (``model.memory.freeze_for_exit``); an in-process caller (tests, ``main([...])``) keeps
    its collector as it was."""
    try:
        _run(argv)
    finally:
        if argv is None:
            freeze_for_exit()


def _run(argv: list[str] | None) -> None:
    _escape_unencodable()
    try:
        cli.main(
            args=argv,
            prog_name="tf",
            standalone_mode=False,
            obj={
                "argv": list(sys.argv[1:] if argv is None else argv),  # for report headers
                "console": argv is None,  # the console script's process (``startup_done``)
            },
        )
    except click.exceptions.Abort:
        click.echo("tf: aborted", err=True)
        sys.exit(130)
    except (Exception, pl.exceptions.PanicException) as exc:  # (a polars panic is not an
        # ``Exception``: it would print a traceback)
        line, code = error_line(exc)
        if code == EXIT_INTERNAL and os.environ.get("TF_DEBUG") and _unexpected(exc):
            raise
        click.echo(line, err=True)
        sys.exit(code)


def error_line(exc: BaseException) -> tuple[str, int]:
    """The one line (``tf: error: ...``) and the exit code an error gets: every front end
    (the commands, ``tf mcp``'s tools) says the same words for the same failure."""
    code = EXIT_INPUT
    if isinstance(exc, click.ClickException):
        text = exc.format_message()
        if isinstance(exc, click.UsageError):  # (click's own form adds Usage/Try lines)
            text = f"{one_line(text)} (see tf --help)"
        else:
            code = exc.exit_code
    elif isinstance(exc, OptionError):  # the library names the option; the user typed its flag
        # (``cli.options`` brings the analysis package: imported by the commands that use it)
        from traceforensics.cli.options import flag_of

        text = f"{one_line(str(exc))} ({flag_of(exc.option)})"
    elif isinstance(exc, InputError):
        text = str(exc)
    elif isinstance(exc, TraceForensicsError):
        text, code = str(exc), EXIT_INTERNAL
    elif isinstance(exc, MemoryError):  # any reader or pass: the input does not fit
        text = str(not_enough_memory("the input", "the process ran out of memory: MemoryError"))
    else:
        name = type(exc).__name__
        line = f"tf: internal error: {name}: {one_line(str(exc))} (set TF_DEBUG=1 for a traceback)"
        return line, EXIT_INTERNAL
    return f"tf: error: {one_line(text)}", code


def _unexpected(exc: BaseException) -> bool:
    """An error that is a bug (``TF_DEBUG=1`` shows its traceback), not a known failure."""
    return not isinstance(exc, click.ClickException | TraceForensicsError | MemoryError)
