"""Replay: a repeat ``tf analyze TRACE --json`` answered with the bytes its first run wrote.

The analysis cache (``cli.result_cache``) spares a repeat run the load and the analysis, but
not the imports: polars, numpy and the analysis modules are about 0.3 s, most of such a run.
The command scripts and CI gates repeat most, ``tf analyze TRACE --json`` with no other
option, is answered by the console script (``cli.entry``) before any of them is imported::

    tf analyze TRACE --json    key: the input (path as typed; resolved path, size and mtime
                               of every file, ``cache_keys.input_key``), the source of the
                               whole package, the TF_* / TRACEFORENSICS_* settings
      found    -> results/replay-<key>.json to stdout, its .err to stderr, exit 0
      missing  -> the command runs, and what it wrote is stored (``remember``)

Any other command line, a changed input, source file or setting misses and runs as always;
an entry that cannot be read whole is not served. ``--no-cache`` never reads or writes one.
Only the standard library and ``cache_keys`` are imported here.
"""

from __future__ import annotations

import contextlib
import hashlib
import os
import sys
import tempfile
from pathlib import Path

from traceforensics.cache_keys import PACKAGE, cache_root, input_key

#: Bumped when what an entry holds changes.
REPLAY_FORMAT = "1"
_SETTINGS = ("TF_", "TRACEFORENSICS_")


def servable(argv: list[str]) -> str | None:
    """The trace path when ``argv`` is ``analyze TRACE --json`` (either order), else None."""
    if len(argv) != 3 or argv[0] != "analyze" or argv.count("--json") != 1:
        return None
    path = argv[2] if argv[1] == "--json" else argv[1]
    return None if path.startswith("-") else path


def _package_source() -> str:
    """Hash of every source file of the package (names and bytes): what renders the output
    counts too, not only the readers and the analysis."""
    h = hashlib.sha256()
    for src in sorted(f for ext in ("py", "c") for f in PACKAGE.glob(f"**/*.{ext}")):
        h.update(src.relative_to(PACKAGE).as_posix().encode() + b"\0" + src.read_bytes())
    return h.hexdigest()


def _entry(path: str) -> Path:
    settings = sorted((k, v) for k, v in os.environ.items() if k.startswith(_SETTINGS))
    text = "|".join([REPLAY_FORMAT, path, input_key(Path(path)), _package_source(), repr(settings)])
    key = hashlib.sha256(text.encode(errors="surrogateescape")).hexdigest()[:32]
    return cache_root().parent / "results" / f"replay-{key}"


def serve(argv: list[str]) -> bool:
    """Write the stored output of ``argv`` and return True; False (nothing written) when
    it is not a replayed command line or no whole entry is stored for it."""
    path = servable(argv)
    if path is None:
        return False
    try:
        entry = _entry(path)
        out = entry.with_suffix(".json").read_bytes()
        err = entry.with_suffix(".err").read_bytes()
    except (OSError, ValueError):  # no entry, an unreadable input: the command says why
        return False
    sys.stdout.buffer.write(out)
    sys.stdout.flush()
    if err:
        sys.stderr.buffer.write(err)
        sys.stderr.flush()
    return True


def remember(argv: list[str], out: bytes, err: str) -> None:
    """Store what the run of ``argv`` wrote (stdout bytes, stderr text), when it is a
    replayed command line; a failure to write is ignored (the next run computes again)."""
    path = servable(argv)
    if path is None:
        return
    with contextlib.suppress(OSError, ValueError):
        entry = _entry(path)
        entry.parent.mkdir(parents=True, exist_ok=True)
        # the .err first and the .json last: ``serve`` needs both, so a half-written entry
        # (a crash between the two) is never served
        for suffix, data in ((".err", err.encode(errors="backslashreplace")), (".json", out)):
            fd, tmp = tempfile.mkstemp(dir=entry.parent, prefix=".replay-")
            try:
                with os.fdopen(fd, "wb") as fh:
                    fh.write(data)
                os.replace(tmp, entry.with_suffix(suffix))
            except OSError:
                with contextlib.suppress(OSError):
                    os.unlink(tmp)
                raise
