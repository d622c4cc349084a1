"""``tf record [OPTIONS] -- COMMAND``: run a training command with the profiler injected, then
analyse what it recorded (``recording.child`` has the how)."""

from __future__ import annotations

import shutil
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any, TypeVar

import click

from traceforensics.analysis.options import DEFAULTS
from traceforensics.cli.analyze import analysis_of
from traceforensics.cli.options import EXIT_CODES_HELP
from traceforensics.model.errors import InputError, ToolMissingError
from traceforensics.recording import child
from traceforensics.recording.settings import DEFAULT_OUT_DIR, SCHEDULE_MIN, CaptureSettings
from traceforensics.recording.summary import host_loader_lines, recording_line
from traceforensics.report.json_out import build_json, dumps
from traceforensics.report.progress import progress_line
from traceforensics.report.terminal import render_text

F = TypeVar("F", bound=Callable[..., Any])


def _schedule_option(name: str, help_text: str) -> Callable[[F], F]:
    """``--<name>``: a schedule setting, its default and lowest value read from the settings
    (one definition for ``capture()`` and ``tf record``)."""
    return click.option(
        f"--{name}",
        type=click.IntRange(min=SCHEDULE_MIN[name]),
        default=getattr(CaptureSettings(), name),
        show_default=True,
        help=help_text,
    )


@click.command(
    "record",
    short_help="Run a training command under the profiler, then analyse it.",
    context_settings={"ignore_unknown_options": True, "allow_interspersed_args": False},
    epilog="\b\nExamples:\n"
    "  tf record -- python train.py --epochs 1\n"
    "  tf record --out runs/prof --active 3 -- torchrun --nproc-per-node 8 train.py\n"
    "  tf record --json -- python train.py > analysis.json\n"
    "  tf record --nsys -- python train.py\n\n"
    "Steps are the first optimizer's steps (torch.optim), counted after its first one. "
    "The command's own exit code is not passed on: when it fails, the report of what was "
    "recorded is still printed, then one line says how it ended, and tf exits 2.\n\n"
    + EXIT_CODES_HELP,
)
@click.argument("command", nargs=-1, required=True, type=click.UNPROCESSED)
@click.option(
    "--out",
    type=click.Path(path_type=Path, file_okay=False),
    default=DEFAULT_OUT_DIR,
    show_default=True,
    help="Folder for the traces: one rank-N.pt.trace.json.gz per rank.",
)
@_schedule_option("wait", "Steps run unprofiled first (start-up).")
@_schedule_option("warmup", "Steps profiled but not kept (the profiler's own start-up).")
@_schedule_option("active", "Steps recorded.")
@_schedule_option(
    "repeat", "Cycles recorded, each into OUT/cycle-N/ when not 1 (0: every cycle until the end)."
)
@click.option("--no-shapes", is_flag=True, help="Do not record operator shapes (no FLOPs, no MFU).")
@click.option("--with-stack", is_flag=True, help="Record Python stacks (large, slow).")
@click.option("--memory", is_flag=True, help="Record allocator events.")
@click.option("--cpu-only", is_flag=True, help="Record no GPU activity, even with a GPU.")
@click.option("--no-gzip", is_flag=True, help="Write plain .json (about 14x larger).")
@click.option("--nsys", is_flag=True, help="Record with Nsight Systems instead (needs nsys).")
@click.option("--overwrite", is_flag=True, help="Delete the traces already in --out first.")
@click.option("--no-analyze", is_flag=True, help="Only record; analyse later with tf analyze.")
@click.option("--json", "as_json", is_flag=True, help="Write the JSON analysis to stdout.")
@click.option("--no-cache", is_flag=True, help="Do not write the session and analysis caches.")
def record_command(
    command: tuple[str, ...],
    out: Path,
    no_shapes: bool,
    with_stack: bool,
    memory: bool,
    cpu_only: bool,
    no_gzip: bool,
    nsys: bool,
    overwrite: bool,
    no_analyze: bool,
    as_json: bool,
    no_cache: bool,
    **schedule: int,
) -> None:
    """Run COMMAND (after --) with the PyTorch profiler injected, no edit to the script, then
    analyse the traces: the first optimizer's steps are the steps; the DataLoader's batches show
    as data loading. With --nsys, Nsight Systems records the same steps."""
    settings = CaptureSettings.of(
        record_shapes=not no_shapes,
        with_stack=with_stack,
        profile_memory=memory,
        cuda=False if cpu_only else None,
        gzip=not no_gzip,
        **schedule,
    )
    argv = list(command)
    mode = "nsys" if nsys else "kineto"
    if nsys and settings.repeat != 1:
        raise InputError("--nsys records one cycle: drop --repeat")
    child.clear_out(out, overwrite)
    boot = child.boot_dir(out)
    if nsys and shutil.which("nsys") is None:
        click.echo(child.nsys_elsewhere(argv, settings, out))
        raise ToolMissingError(
            "nsys (Nsight Systems) is not on PATH; run the command printed above where it is "
            f"(copy {boot} along), then tf analyze {child.nsys_report(out)}"
        )
    to_run = child.nsys_command(argv, out) if nsys else argv
    code = child.run(to_run, child.environment(settings, out, boot, mode), as_json)
    got = child.collect(out, settings, mode, code)
    click.echo(recording_line("record", got.traces, got.steps, got.note), err=as_json)
    if not no_analyze:
        _report(got.path, as_json, no_cache)
    if code != 0:
        raise InputError(f"the command {child.exit_text(code)}; the report covers what it recorded")


def _report(path: Path, as_json: bool, no_cache: bool) -> None:
    """The analysis of ``path`` exactly as ``tf analyze`` prints it (text or JSON)."""
    with progress_line(enabled=not as_json):
        result = analysis_of(str(path), DEFAULTS, use_cache=not no_cache)
    if as_json:
        sys.stdout.buffer.write(dumps(build_json(result)))
        return
    text = render_text(result)
    if not result.devices:  # no GPU work: the host's loader share still says something
        # (loaded again: the analysis of a folder's rank files keeps no events of its own)
        from traceforensics.ingest import load_path

        extra = host_loader_lines(load_path(str(path), use_cache=not no_cache))
        text += "".join(line + "\n" for line in extra)
    sys.stdout.write(text)
