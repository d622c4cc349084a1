"""Replay: a repeat ``tf analyze TRACE --json`` answered with what its first run wrote.

The analysis cache (``cli.result_cache``) spares a repeat run the load and the analysis, but
not the imports: polars, numpy and the analysis modules are about 0.3 s, most of such a run.
The command scripts and CI gates repeat most, ``tf analyze TRACE --json`` with no other
option on a trace file, is answered by the console script (``cli.entry``) before any of them
is imported::

    tf analyze TRACE --json    key, taken before the run reads anything: the path as typed,
                               the file (resolved path, size, mtime, inode, ctime:
                               ``cache_keys.input_identity``), every file of the package, the
                               versions of Python and of the libraries that shape the
                               output, the TF_* / TRACEFORENSICS_* settings
      found    -> its warnings to stderr, then its JSON to stdout, exit 0
      missing  -> the command runs, and what it wrote is stored under that key (``remember``)

Any other command line, a directory, a changed input, file of the package, library or setting
misses and runs as always, and so does an input that cannot be read (the command then says
why). One entry is one file (lengths and a hash in its first line, written by one rename:
``sealed``): a damaged or partial entry is never served. ``--no-cache`` never reads or writes
one. Only the standard library, ``cache_keys`` and ``sealed`` are imported here, and the
hashes and ``sealed`` only for a command line that is replayed (another one, ``tf analyze
TRACE --no-cache`` say, starts without OpenSSL's library or ``json``).
"""

from __future__ import annotations

import contextlib
import io
import os
import sys
from pathlib import Path

from traceforensics.cache_keys import PACKAGE, cache_root, input_identity, package_fingerprint

#: Bumped when what an entry holds changes.
REPLAY_FORMAT = "2"
_SETTINGS = ("TF_", "TRACEFORENSICS_")
#: The libraries whose version can change the JSON (their ``__init__`` files are keyed).
_LIBRARIES = ("polars", "numpy", "orjson", "msgspec", "click")


def servable(argv: list[str]) -> str | None:
    """The trace path when ``argv`` is ``analyze TRACE --json`` (either order), else None."""
    if len(argv) != 3 or argv[0] != "analyze" or argv.count("--json") != 1:
        return None
    path = argv[2] if argv[1] == "--json" else argv[1]
    return None if path.startswith("-") else path


def entry_for(argv: list[str]) -> Path | None:
    """Where the answer of ``argv`` is kept, for a readable trace file; None otherwise (not a
    replayed command line, a directory, an input that cannot be read, any failure)."""
    path = servable(argv)
    if path is None:
        return None
    import hashlib  # (here: a command line that is not replayed starts without them)

    try:
        if not os.path.isfile(path):
            return None
        with open(path, "rb"):  # readable: else the command says why, not a replay
            pass
        settings = sorted((k, v) for k, v in os.environ.items() if k.startswith(_SETTINGS))
        # (the input's identity, not ``input_key``: the package's hash covers the readers)
        parts = [REPLAY_FORMAT, path, _package(), repr(settings)]
        text = "|".join(parts).encode(errors="surrogateescape")
        key = hashlib.sha256(text + b"|" + input_identity(Path(path))).hexdigest()
        return cache_root().parent / "results" / f"replay-{key[:32]}"
    except Exception:  # any doubt: no replay, the command runs as always
        return None


def _package() -> str:
    """Hash of every file of the package and of what runs it: what renders the output counts
    too, not only the readers and the analysis."""
    import hashlib
    from importlib.util import find_spec

    h = hashlib.sha256(sys.version.encode())
    for name in _LIBRARIES:
        spec = find_spec(name)
        origin = spec.origin if spec is not None else None
        stat = os.stat(origin) if origin else None
        h.update(f"|{name}|{origin}|{stat and (stat.st_size, stat.st_mtime_ns)}".encode())
    h.update(package_fingerprint(PACKAGE).encode())
    return h.hexdigest()


def serve(argv: list[str]) -> bool:
    """Write the stored answer of ``argv`` (warnings on stderr, then the JSON on stdout) and
    return True; False, with nothing written, when there is none to serve."""
    entry = entry_for(argv)
    if entry is None:
        return False
    try:
        out, err = _read(entry)
    except Exception:  # no entry, or a damaged one: the command runs
        return False
    try:
        if err:
            # as ``cli.main`` writes them: a character the terminal cannot show is escaped
            if isinstance(sys.stderr, io.TextIOWrapper):
                from traceforensics.model.errors import NAME_BYTES  # (stdlib only)

                sys.stderr.reconfigure(errors=NAME_BYTES)
            sys.stderr.write(err)
            sys.stderr.flush()
        sys.stdout.buffer.write(out)
        sys.stdout.flush()
    except BrokenPipeError:  # the reader went away (``| head``): exit 1 and say nothing
        with contextlib.suppress(OSError):
            os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        raise SystemExit(1) from None
    return True


def _read(entry: Path) -> tuple[bytes, str]:
    """``(stdout bytes, stderr text)`` of an entry, checked against its head line."""
    from traceforensics.cli.sealed import read_entry

    head, body = read_entry(entry)
    if head.get("format") != REPLAY_FORMAT:
        raise ValueError(f"{entry}: an entry of format {head.get('format')!r}")
    cut = int(head["out"])
    return bytes(body[:cut]), bytes(body[cut:]).decode("utf-8", errors="surrogateescape")


def remember(entry: Path | None, out: bytes, err: str) -> None:
    """Store what the run wrote (stdout bytes, stderr text) at ``entry`` (``entry_for``,
    taken before the run read its input); a failure to write is ignored (the next run
    computes again)."""
    if entry is None:
        return
    from traceforensics.cli.sealed import write_entry

    body = out + err.encode("utf-8", errors="surrogateescape")
    with contextlib.suppress(OSError):
        write_entry(entry, body, format=REPLAY_FORMAT, out=len(out))
