"""``tf record``: run a command with the recording injected, then find what it recorded.

The command is not edited: ``inject.py`` is copied as ``OUT/.tf-record/sitecustomize.py``, that
folder leads the command's ``PYTHONPATH`` and ``$TF_CAPTURE`` carries the settings
(``settings.child_env``); every Python process of the command reports in
``OUT/.tf-record/status-<pid>.json``. The folder stays after the run: it shows what was
injected, and ``--nsys`` without ``nsys`` prints a command that uses it.

What is analysed: the output folder (every rank's file), or its last ``cycle-N/`` folder when
several cycles were recorded, or ``OUT/report.nsys-rep`` with ``--nsys``.
"""

from __future__ import annotations

import importlib.util
import json
import os
import shlex
import shutil
import signal
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Final

from traceforensics.ingest.detect import KINETO_SUFFIXES, NSYS_REP_SUFFIXES
from traceforensics.model.errors import InputError
from traceforensics.recording import inject
from traceforensics.recording.settings import (
    CYCLE_DIR,
    ENV_VAR,
    INSTALL_HINT,
    NSYS_FLAGS,
    NSYS_REPORT,
    CaptureSettings,
    child_env,
)
from traceforensics.recording.summary import no_trace_message, partial_note, recorded_steps

#: Folder (inside the output folder) holding the injected start-up file and the status files.
BOOT_DIR: Final = ".tf-record"
#: Files of an earlier recording that ``--overwrite`` removes (what ``tf analyze`` would read).
_TRACE_SUFFIXES: Final = (*KINETO_SUFFIXES, *NSYS_REP_SUFFIXES, ".sqlite")


@dataclass(frozen=True)
class Recorded:
    """What a run left: ``path`` to analyse, the trace files, the recorded step numbers of
    rank 0 (or the lowest rank) and a note when the window was cut short."""

    path: Path
    traces: list[Path]
    steps: tuple[int, int] | None
    note: str


def old_traces(out: Path) -> list[Path]:
    """Trace files and cycle folders of an earlier recording in ``out``."""
    if not out.is_dir():
        return []
    return sorted(
        p
        for p in out.iterdir()
        if (p.is_file() and p.name.endswith(_TRACE_SUFFIXES))
        or (p.is_dir() and p.name.startswith(CYCLE_DIR.format(cycle="")))
    )


def clear_out(out: Path, overwrite: bool) -> None:
    """Refuse an output folder holding an earlier recording (its files would be read as more
    ranks), or remove that recording with ``overwrite``."""
    old = old_traces(out)
    if old and not overwrite:
        names = ", ".join(p.name for p in old[:3]) + (" ..." if len(old) > 3 else "")
        raise InputError(
            f"{out}: already holds traces ({names}) that would be read as ranks of this run; "
            "pass an empty folder, or --overwrite to delete them first"
        )
    for p in old:
        shutil.rmtree(p) if p.is_dir() else p.unlink()


def boot_dir(out: Path) -> Path:
    """``OUT/.tf-record/`` with a fresh ``sitecustomize.py`` and no status files."""
    boot = out / BOOT_DIR
    try:
        boot.mkdir(parents=True, exist_ok=True)
        for old in boot.glob("status-*.json"):
            old.unlink()
        shutil.copyfile(inject.__file__, boot / "sitecustomize.py")
    except OSError as exc:
        raise InputError(f"{out}: cannot write the output folder ({exc.strerror})") from None
    return boot


def environment(settings: CaptureSettings, out: Path, boot: Path, mode: str) -> dict[str, str]:
    """This process's environment plus the injection (module docstring)."""
    env = dict(os.environ)
    rest = env.get("PYTHONPATH")
    env["PYTHONPATH"] = str(boot.resolve()) + (os.pathsep + rest if rest else "")
    env[ENV_VAR] = child_env(settings, out.resolve(), boot.resolve(), mode)
    return env


def nsys_report(out: Path) -> Path:
    """The report ``tf record --nsys`` has ``nsys`` write."""
    return out / (NSYS_REPORT + NSYS_REP_SUFFIXES[0])


def nsys_command(command: list[str], out: Path) -> list[str]:
    """The ``nsys profile`` command line recording ``command`` (``settings.NSYS_FLAGS``)."""
    report = out / NSYS_REPORT  # nsys adds .nsys-rep
    return ["nsys", "profile", *NSYS_FLAGS, "--force-overwrite=true", "-o", str(report), *command]


def nsys_elsewhere(command: list[str], settings: CaptureSettings, out: Path) -> str:
    """The shell line to run where ``nsys`` is installed, from the same folder: the same
    injection spelled out (copy ``OUT/.tf-record/`` along when ``OUT`` is not shared)."""
    boot = out / BOOT_DIR
    env = child_env(settings, out, boot, "nsys")
    return shlex.join(
        ["env", f"PYTHONPATH={boot}", f"{ENV_VAR}={env}", *nsys_command(command, out)]
    )


def run(command: list[str], env: dict[str, str], quiet_stdout: bool) -> int:
    """Run ``command`` to its end; its stdout goes to our stderr with ``quiet_stdout`` (the
    JSON report owns stdout). Returns its exit status (negative: killed by that signal).
    Ctrl-C reaches the command too (same process group): it is waited for, so that what it
    recorded before is still written and reported."""
    try:
        proc = subprocess.Popen(command, env=env, stdout=_stderr_fd() if quiet_stdout else None)
    except FileNotFoundError:
        raise InputError(f"{command[0]}: command not found; check the command after --") from None
    except PermissionError:
        raise InputError(f"{command[0]}: permission denied; check the command after --") from None
    try:
        return proc.wait()
    except KeyboardInterrupt:
        return proc.wait()


def _stderr_fd() -> int:
    """Our stderr's file descriptor (2 when ``sys.stderr`` is not a file, e.g. captured)."""
    try:
        return sys.stderr.fileno()
    except (AttributeError, OSError, ValueError):  # io.UnsupportedOperation is an OSError
        return 2


def exit_text(code: int) -> str:
    """How the command ended, in words (``code`` from ``run``)."""
    if code < 0:
        try:
            return f"was killed by {signal.Signals(-code).name}"
        except ValueError:
            return f"was killed by signal {-code}"
    return f"exited with code {code}"


def statuses(out: Path) -> list[dict[str, Any]]:
    """The status files the command's Python processes wrote, lowest rank first."""
    found = []
    for path in sorted((out / BOOT_DIR).glob("status-*.json")):
        try:
            found.append(json.loads(path.read_text()))
        except (OSError, ValueError):
            continue  # a process killed while writing: the others still tell
    return sorted(found, key=lambda s: (int(s.get("rank", 0)), int(s.get("pid", 0))))


def collect(out: Path, settings: CaptureSettings, mode: str, code: int) -> Recorded:
    """What the run recorded, or an ``InputError`` saying why nothing was."""
    found = statuses(out)
    stepped = [s for s in found if s.get("traces")]
    if not stepped:
        raise InputError(_why_nothing(found, settings, code))
    lead = stepped[0]
    steps = int(lead["optimizer_steps"]) - 1  # profiler steps: after the first optimizer step
    if mode == "nsys":
        report = nsys_report(out)
        if not report.is_file():
            raise InputError(f"{report}: nsys wrote no report; see its output above")
        return Recorded(report, [report], recorded_steps(settings, steps), "")
    traces = sorted({_as_given(Path(t), out) for s in stepped for t in s["traces"]})
    path = _as_given(Path(lead["traces"][-1]), out).parent
    return Recorded(path, traces, recorded_steps(settings, steps), partial_note(settings, steps))


def _as_given(path: Path, out: Path) -> Path:
    """A path the command reported (absolute) spelled from ``out`` as the user gave it."""
    try:
        return out / path.relative_to(out.resolve())
    except ValueError:
        return path


def _why_nothing(found: list[dict[str, Any]], settings: CaptureSettings, code: int) -> str:
    ended = f"the command {exit_text(code)}; " if code else ""
    errors = [s["error"] for s in found if s.get("error")]
    if errors:
        return f"{ended}no trace was recorded: profiling failed ({errors[0]})"
    if not found:
        hint = "" if _torch_here() else f" (torch is not installed here: {INSTALL_HINT})"
        return (
            f"{ended}no trace was recorded: no Python process of the command imported torch "
            f"with PYTHONPATH read (python -E or -I ignore it){hint}"
        )
    most = max(int(s.get("optimizer_steps", 0)) for s in found)
    if most == 0:
        return (
            f"{ended}no trace was recorded: the command ran no torch.optim optimizer step, "
            "which is what tf record counts steps by; use traceforensics.capture() in the script"
        )
    return ended + no_trace_message(settings, most - 1, "optimizer steps after the first")


def _torch_here() -> bool:
    """Whether ``torch`` is installed here (found, not imported: only a hint depends on it)."""
    return importlib.util.find_spec("torch") is not None
