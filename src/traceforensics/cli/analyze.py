"""``tf analyze PATH``: load a trace, run the analyses, print or write the report."""

from __future__ import annotations

import json
import sys

import click

from traceforensics.analysis.pipeline import AnalysisOptions, analyze
from traceforensics.ingest import load_path
from traceforensics.report.json_out import build_json
from traceforensics.report.terminal import render_text


@click.command("analyze")
@click.argument("path", type=click.Path(path_type=str))
@click.option("--json", "as_json", is_flag=True, help="Write the JSON analysis object to stdout.")
@click.option("--no-cache", is_flag=True, help="Do not read or write the session cache.")
@click.option("--top", default=10, show_default=True, help="Top kernels listed per device.")
@click.option("--gaps", "top_gaps", default=10, show_default=True, help="Largest gaps shown.")
def analyze_command(path: str, as_json: bool, no_cache: bool, top: int, top_gaps: int) -> None:
    """Analyze a trace: PyTorch Profiler .json/.json.gz, a directory of rank files,
    an Nsight Systems .sqlite export or a .nsys-rep report."""
    session = load_path(path, use_cache=not no_cache)
    result = analyze(session, AnalysisOptions(top_kernels=top, top_gaps=top_gaps))
    if as_json:
        sys.stdout.write(json.dumps(build_json(result), indent=1) + "\n")
    else:
        sys.stdout.write(render_text(result))
