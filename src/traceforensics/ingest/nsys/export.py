"""``.nsys-rep`` input: export to SQLite once with the user's ``nsys``, then reuse the export.

Cache rule: the export is written next to the report as ``<report>.tf.sqlite`` (falling back
to ``$XDG_CACHE_HOME/traceforensics/nsys/`` when that directory is not writable, or always with
``TF_NSYS_EXPORT=cache``: ``tf mcp`` writes nothing beside its inputs) together with a
``.key`` file holding the report's size and mtime; it is reused while both still match. The
export is written under a temporary name and renamed into place, so an interrupted export
never leaves a half-written cache entry behind.
"""

from __future__ import annotations

import hashlib
import json
import os
import shlex
import shutil
import subprocess
import sys
from pathlib import Path

from traceforensics.model.errors import CorruptTraceError, InputError, ToolMissingError

CACHE_SUFFIX = ".tf.sqlite"
#: ``cache``: exports always go to the user cache, never beside the report.
EXPORT_SETTING = "TF_NSYS_EXPORT"


def export_command(report: Path, output: Path) -> list[str]:
    """The ``nsys export`` argv that writes ``output`` from ``report``."""
    return [
        "nsys",
        "export",
        "--type",
        "sqlite",
        "--force-overwrite",
        "true",
        "--output",
        str(output),
        str(report),
    ]


def _key(report: Path) -> dict[str, int]:
    st = report.stat()
    return {"size": st.st_size, "mtime_ns": st.st_mtime_ns}


def _user_cache_dir() -> Path:
    base = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(base) / "traceforensics" / "nsys"


def _writable(folder: Path) -> bool:
    return os.access(folder, os.W_OK)


def cache_path(report: Path) -> Path:
    """Where the SQLite export of ``report`` lives (next to it when that folder is writable and
    ``$TF_NSYS_EXPORT`` is not ``cache``)."""
    folder = report.resolve().parent
    if os.environ.get(EXPORT_SETTING) != "cache" and _writable(folder):
        return folder / (report.name + CACHE_SUFFIX)
    digest = hashlib.sha256(str(report.resolve()).encode()).hexdigest()[:16]
    return _user_cache_dir() / f"{report.stem}-{digest}{CACHE_SUFFIX}"


def ensure_sqlite(report: Path) -> Path:
    """Return an up-to-date SQLite export of ``report``, running ``nsys export`` if needed."""
    target = cache_path(report)
    key_file = target.with_name(target.name + ".key")
    key = _key(report)
    if target.is_file() and key_file.is_file():
        try:
            if json.loads(key_file.read_text(encoding="utf-8")) == key:
                return target
        except (OSError, ValueError):
            pass  # unreadable key: export again
    nsys = shutil.which("nsys")
    if nsys is None:
        manual = report.with_name(report.stem + ".sqlite")
        raise ToolMissingError(
            f"{report}: reading a .nsys-rep needs Nsight Systems' `nsys` on PATH; install it or "
            f"export on a machine that has it: {shlex.join(export_command(report, manual))} "
            f"and pass {manual.name} instead"
        )
    target.parent.mkdir(parents=True, exist_ok=True)
    partial = target.with_name(target.name.removesuffix(".sqlite") + ".partial.sqlite")
    partial.unlink(missing_ok=True)
    argv = [nsys, *export_command(report, partial)[1:]]
    _progress(f"traceforensics: exporting {report.name} with nsys to {target} ...")
    try:
        proc = subprocess.run(argv, capture_output=True, text=True, check=False)
    except OSError as exc:
        raise ToolMissingError(
            f"{report}: could not run nsys ({exc}); install Nsight Systems or export the report "
            "to SQLite where nsys runs (nsys export --type sqlite)"
        ) from exc
    if proc.returncode != 0 or not partial.is_file():
        partial.unlink(missing_ok=True)
        detail = (proc.stderr or proc.stdout).strip().splitlines()
        reason = detail[-1] if detail else f"exit code {proc.returncode}"
        raise CorruptTraceError(
            f"{report}: `nsys export` failed ({reason}); check that the report opens in "
            "Nsight Systems"
        )
    if not _is_sqlite(partial):
        partial.unlink(missing_ok=True)
        raise CorruptTraceError(
            f"{report}: `nsys export` wrote no SQLite database; check that the report opens in "
            "Nsight Systems and that nsys is recent enough to export it"
        )
    os.replace(partial, target)
    try:
        key_file.write_text(json.dumps(key), encoding="utf-8")
    except OSError as exc:  # pragma: no cover - folder writable a moment ago
        raise InputError(
            f"{report}: cannot write the export cache key ({exc}); check the disk"
        ) from exc
    _progress(f"traceforensics: export done ({target.stat().st_size} bytes)")
    return target


def _progress(message: str) -> None:
    """Progress goes to a terminal only: piped or captured stderr keeps one line per error."""
    if sys.stderr.isatty():
        print(message, file=sys.stderr)


def _is_sqlite(path: Path) -> bool:
    try:
        with path.open("rb") as fh:
            return fh.read(16) == b"SQLite format 3\x00"
    except OSError:
        return False
