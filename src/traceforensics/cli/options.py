"""Option checks shared by the commands: a bad option is an input error (exit 2, one line).

Numbers must be finite and in range, regexes must compile, and output files must be writable
and must never be one of the inputs (a report written over the trace would destroy it).
"""

from __future__ import annotations

import math
import re
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import TYPE_CHECKING

import click

from traceforensics.analysis.options import DEFAULTS, WORKLOADS, regex_error
from traceforensics.model.errors import InputError
from traceforensics.model.monitor import COLUMN_KEYS, MonitorLog
from traceforensics.report.terminal import SECTIONS

if TYPE_CHECKING:
    import polars as pl

    from traceforensics.analysis.pipeline import Analysis

PLOT_SUFFIXES = (".png", ".svg", ".pdf")
#: Files a directory input would load as rank files (so an output there would become an input).
RANK_SUFFIXES = (".json", ".json.gz")


def positive_float(
    allow_zero: bool = False,
) -> Callable[[click.Context, click.Parameter, float | None], float | None]:
    """A click callback accepting finite numbers > 0 (>= 0 with ``allow_zero``) or None."""

    def check(ctx: click.Context, param: click.Parameter, value: float | None) -> float | None:
        if value is None:
            return None
        ok = math.isfinite(value) and (value >= 0 if allow_zero else value > 0)
        if not ok:
            bound = ">= 0" if allow_zero else "> 0"
            flag = _flag(param)
            raise InputError(
                f"{flag} {value!r}: not a finite number {bound}; pass one, e.g. {flag} 1"
            )
        return value

    return check


_UNITS_NS = {"ns": 1, "us": 1_000, "µs": 1_000, "ms": 1_000_000, "s": 1_000_000_000}
_DURATION_RE = re.compile(r"^\s*(\d+(?:\.\d*)?|\.\d+)\s*(ns|us|µs|ms|s)?\s*$")


def duration_ns(ctx: click.Context, param: click.Parameter, value: str | None) -> int | None:
    """A click callback reading ``1.5s``, ``200ms``, ``300us``, ``5000ns`` (bare numbers are
    ms) as integer ns, or None."""
    return None if value is None else parse_duration(value, _flag(param))


def parse_duration(value: str, flag: str) -> int:
    """``1.5s``, ``200ms``, ``300us``, ``5000ns`` (a bare number: ms) as integer ns; an
    ``InputError`` naming ``flag`` (the option or field that holds it) for anything else."""
    m = _DURATION_RE.match(value)
    if not m:
        raise InputError(
            f"{flag} {value!r}: not a time; pass a number with a unit, e.g. {flag} 1.5s or 200ms"
        )
    return round(float(m.group(1)) * _UNITS_NS[m.group(2) or "ms"])


def sections_list(ctx: click.Context, param: click.Parameter, value: str) -> tuple[str, ...]:
    """``--sections``: comma-separated section ids of the terminal report, or ``all``."""
    if value.strip().lower() == "all":
        return SECTIONS
    chosen = tuple(v.strip().lower() for v in value.split(",") if v.strip())
    unknown = [v for v in chosen if v not in SECTIONS]
    if unknown or not chosen:
        raise InputError(
            f"--sections {value!r}: unknown section {', '.join(unknown) or '(none)'}; pass "
            f"some of {','.join(SECTIONS)} or all"
        )
    return chosen


def non_negative_int(ctx: click.Context, param: click.Parameter, value: int) -> int:
    """A click callback accepting integers >= 0."""
    if value < 0:
        raise InputError(f"{_flag(param)} {value}: negative; pass 0 or more")
    return value


def positive_int(ctx: click.Context, param: click.Parameter, value: int | None) -> int | None:
    """A click callback accepting integers >= 1, or None."""
    if value is not None and value < 1:
        raise InputError(f"{_flag(param)} {value}: must be 1 or more; pass 1 or more")
    return value


def regex(ctx: click.Context, param: click.Parameter, value: str | None) -> str | None:
    """A click callback accepting a regular expression that compiles."""
    if value is None:
        return None
    detail = regex_error(value)
    if detail is not None:
        raise InputError(
            f"{_flag(param)} {value!r}: invalid regular expression ({detail}); fix the pattern "
            "(quote it for the shell)"
        )
    return value


def check_output(
    path: Path, inputs: Iterable[str | Path], what: str, suffixes: tuple[str, ...] = ()
) -> None:
    """Refuse an output path that is an input, is a directory, lies in a missing directory or
    (for plots) has a suffix matplotlib cannot write."""
    target = path.resolve()
    for raw in inputs:
        src = Path(raw).resolve()
        in_dir = src.is_dir() and target.parent == src
        if target == src or (in_dir and (target.exists() or target.name.endswith(RANK_SUFFIXES))):
            raise InputError(f"{path}: {what} would overwrite an input; choose another file")
    if target.is_dir():
        raise InputError(f"{path}: {what} is a directory; give a file name")
    if not target.parent.is_dir():
        raise InputError(
            f"{path}: cannot write {what}: directory {path.parent} does not exist; create it "
            "or choose another path"
        )
    if suffixes and path.suffix.lower() not in suffixes:
        raise InputError(
            f"{path}: {what} has no image suffix; end the name in one of {', '.join(suffixes)}"
        )


#: Flags whose name is not the option's library name with dashes.
_FLAG_NAMES = {
    "top_gaps": "--gaps",
    "start_ns": "--from",
    "end_ns": "--to",
    "data_patterns": "--data-pattern",
    "utc_offset": "--log-utc-offset",
}


def flag_of(option: str) -> str:
    """The ``tf analyze`` flag of a flat analysis option name (``bin_ms`` -> ``--bin-ms``)."""
    return _FLAG_NAMES.get(option, "--" + option.replace("_", "-"))


def _flag(param: click.Parameter) -> str:
    opts = getattr(param, "opts", None) or [param.name or "option"]
    return str(opts[0])


#: ``--columns`` help, shared by ``tf monitor`` and ``tf analyze --monitor``: every key listed.
COLUMNS_HELP = (
    "Name the monitoring log's columns: KEY=COLUMN,... with KEY in "
    + ", ".join(dict.fromkeys(COLUMN_KEYS))
    + " (e.g. util=GPU%,sm_clock=SMclk)."
)

#: Exit codes, as ``tf --help`` states them (one definition for every command's help).
EXIT_CODES_HELP = (
    "Exit codes: 0 done; 2 bad input or option (one line: file, problem, what to do); "
    "3 internal error (a bug: please report it)."
)


#: ``tf analyze --workload`` (``analysis.options.ServingOptions``; docs/serving.md).
workload_option = click.option(
    "--workload",
    type=click.Choice(list(WORKLOADS)),
    default=DEFAULTS.serving.workload,
    show_default=True,
    help="auto: the serving view when the trace shows an inference server (vLLM, SGLang, "
    "TensorRT-LLM, TGI); serving: force it; training: never.",
)

#: ``tf analyze --ncu``.
ncu_option = click.option(
    "--ncu",
    "ncu_path",
    type=click.Path(path_type=str, readable=False),
    default=None,
    metavar="REPORT.csv",
    help="An Nsight Compute CSV report (ncu --csv, details or --page raw) of the same program: "
    "its kernels' measured SM/DRAM throughput and class replace the estimates (never cached).",
)


def monitor_log(path: str | None, columns: str | None, utc_offset: str) -> MonitorLog | None:
    """The ``--monitor`` log at ``path`` (None without one)."""
    if path is None:
        return None
    # (here: a run without --monitor never imports the log readers)
    from traceforensics.ingest.monitor import load_monitor_log_utc

    return load_monitor_log_utc(path, columns=columns, utc_offset=utc_offset)


def read_ncu(report: str) -> pl.DataFrame:
    """The launches of the ncu ``report`` (``ingest.ncu.read_ncu_csv``): a missing,
    unreadable or non-ncu file is an input error naming it (exit 2, one line)."""
    # (imported here: a run without --ncu never loads the report's reader)
    from traceforensics.ingest.ncu import read_ncu_csv

    return read_ncu_csv(report)


def ncu_named(trace: str, report: str, run: Callable[[], Analysis]) -> Analysis:
    """``run()``; a report with no kernel of ``trace`` (``ncu_join.NcuMismatchError``) is an
    input error naming both files. (Launches of the report's other processes or devices, left
    out of the join, are a warning of the analysis itself: ``NcuJoin.warning``.)"""
    from traceforensics.analysis.kernels.ncu_join import NcuMismatchError

    try:
        return run()
    except NcuMismatchError as exc:
        raise InputError(exc.line(report, trace)) from exc
