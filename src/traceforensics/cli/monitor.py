"""``tf monitor LOG``: diagnose a GPU monitoring log (nvidia-smi, dcgmi, plain tables)."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import click

from traceforensics.analysis.monitoring.monitor import analyze_monitor
from traceforensics.cli.options import (
    COLUMNS_HELP,
    EXIT_CODES_HELP,
    PLOT_SUFFIXES,
    check_output,
    positive_float,
)
from traceforensics.ingest.monitor import load_monitor_log
from traceforensics.report.monitor_text import render_monitor_text


@click.command(
    "monitor",
    short_help="Utilization pattern and throttling from a monitoring log.",
    epilog="\b\nExamples:\n"
    "  tf monitor nvidia-smi.csv\n"
    "  tf monitor dmon.log --json > pattern.json\n"
    "  tf monitor smi.csv --columns util=GPU%,sm_clock=SMclk --plot util.png\n\n" + EXIT_CODES_HELP,
)
@click.argument("log", type=click.Path(path_type=str, readable=False))
@click.option("--json", "as_json", is_flag=True, help="Write the traceforensics.monitor/1 JSON.")
@click.option(
    "--columns",
    "columns",
    default=None,
    metavar="MAP",
    help=COLUMNS_HELP,
)
@click.option("--plot", "plot_path", default=None, metavar="PNG", help="Save a plot here.")
@click.option(
    "--interval-s",
    "interval_s",
    type=float,
    default=None,
    callback=positive_float(),
    help="Sample interval when the log has no timestamps (default 1 s).",
)
def monitor_command(
    log: str, as_json: bool, columns: str | None, plot_path: str | None, interval_s: float | None
) -> None:
    """Classify each GPU's utilization curve, and tell clock throttling under load from idle
    down-clocking, in an nvidia-smi / dcgmi / plain-table monitoring log."""
    if plot_path:
        check_output(Path(plot_path), [log], "--plot", PLOT_SUFFIXES)
    parsed = load_monitor_log(log, columns=columns, interval_s=interval_s)
    report = analyze_monitor(parsed)
    if plot_path:
        from traceforensics.report.monitor_plot import plot_monitor

        plot_monitor(parsed, report, plot_path)
    if as_json:
        sys.stdout.write(json.dumps(report.to_json(), indent=1, ensure_ascii=False) + "\n")
    else:
        sys.stdout.write(render_monitor_text(report))
        if plot_path:
            sys.stdout.write(f"plot: {plot_path}\n")
