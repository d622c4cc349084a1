"""The cache of ``tf analyze``: one module, one entry format, one integrity rule.

Entries live in the user cache directory (``$XDG_CACHE_HOME/traceforensics``, else
``~/.cache/traceforensics``), never beside the input::

    sessions/<key>   a loaded input (``cached_session``): parts meta (JSON), events, args
                     (Parquet); spares the load of a run with other options
    results/<key>    an analysis (``cached_result``): part analysis (a pickle of ``Analysis``,
                     without its session for a file); after a plain ``tf analyze FILE --json``
                     also parts stdout and stderr, what that run wrote, which the console
                     script replays (``serve``) before polars or the analysis is imported

Key (``entry_path``), the SHA-256 of: the entry kind, the path as typed (the output quotes it),
the input's identity (``input_identity``: resolved path, and name, size, mtime, inode and ctime
of every file), the code (``code_fingerprint``: every file of the package, the Python version,
the libraries that shape the output), the ``TF_*``/``TRACEFORENSICS_*`` settings and, for an
analysis, its options (``"defaults"`` for none). A changed input, option, rule or library
misses; stale entries are never read again.

Entry format: one file, written to a temporary file beside it and renamed into place (a reader
sees a whole entry or none); its first line is JSON naming each part, its length in bytes and
its SHA-256, then the parts' bytes in that order::

    {"format": "3", "parts": [["meta", 812, "9f86d0..."], ["events", 40960, "..."], ...]}\\n...

Integrity rule: a part is used only when its bytes match its SHA-256 (a cut or damaged entry is
a miss and is written again). A cache that cannot be written is skipped with one warning
(``cache_skipped``); the run never fails for it. This module imports only the standard library
at import time, and only what the replay needs (it runs before polars is imported).
"""

from __future__ import annotations

import contextlib
import functools
import io
import json
import os
import sys
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import TYPE_CHECKING, Any, TypeVar

if TYPE_CHECKING:
    from traceforensics.model.session import TraceSession

FORMAT = "3"
#: This package's directory (the code ``code_fingerprint`` hashes).
PACKAGE = Path(__file__).resolve().parent
#: Settings that may change an answer (their names and values are keyed).
_SETTINGS = ("TF_", "TRACEFORENSICS_")
#: Settings that never change an answer: where a .nsys-rep's export is kept (``tf mcp`` sets
#: it; its answers stay those of ``tf analyze``).
_UNKEYED = ("TF_NSYS_EXPORT",)
#: The libraries whose version can change the output (their ``__init__`` files are keyed).
_LIBRARIES = ("polars", "numpy", "orjson", "msgspec", "click")
#: Files of the package that are not what it runs from.
_BUILT = (".pyc", ".so", ".pyd")
#: The start of ``cache_skipped``'s warning: a run warns once however many writes failed.
CACHE_SKIPPED = "the cache could not be written, this run is not cached"
#: The options text of a run with the default analysis options (the replayed command line).
DEFAULTS = "defaults"

Result = TypeVar("Result")


def cache_dir() -> Path:
    """The cache directory (respects ``XDG_CACHE_HOME``)."""
    base = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(base) / "traceforensics"


# -- keys ---------------------------------------------------------------------------------------
def input_identity(path: Path) -> bytes:
    """The input's absolute path and (name, size, mtime_ns, inode, ctime_ns) of every file (of
    a directory: the files in it). A file replaced by another of the same size and mtime
    (``cp -p``, ``touch -r``) still has another inode or ctime."""
    p = path.resolve()
    files = sorted(q for q in p.iterdir() if q.is_file()) if p.is_dir() else [p]
    parts = [os.fsencode(p)]  # names as the OS bytes (a name may hold bytes that are not UTF-8)
    for f in files:
        st = f.stat()
        stamp = f"|{st.st_size}|{st.st_mtime_ns}|{st.st_ino}|{st.st_ctime_ns}"
        parts.append(b"|" + os.fsencode(f.name) + stamp.encode())
    return b"".join(parts)


@functools.cache
def code_fingerprint(package: Path = PACKAGE) -> str:
    """Hash of what makes the output: the Python version, the keyed libraries (path, size and
    mtime of their ``__init__``), and every file of ``package`` (names and bytes, data files
    too) but bytecode and built extensions (their C source counts)."""
    import hashlib  # (here: ``tf`` commands that use no cache start without OpenSSL's library)
    from importlib.util import find_spec

    h = hashlib.sha256(sys.version.encode())
    for name in _LIBRARIES:
        spec = find_spec(name)
        origin = spec.origin if spec is not None else None
        stat = os.stat(origin) if origin else None
        h.update(f"|{name}|{origin}|{stat and (stat.st_size, stat.st_mtime_ns)}".encode())
    files = (
        f
        for f in package.rglob("*")
        if f.is_file() and "__pycache__" not in f.parts and f.suffix not in _BUILT
    )
    for src in sorted(files):
        h.update(src.relative_to(package).as_posix().encode() + b"\0" + src.read_bytes())
    return h.hexdigest()


def entry_path(kind: str, path: str | Path, options: str = "") -> Path:
    """The entry of ``kind`` (``sessions``, ``results``) for ``path`` as typed and ``options``
    (module docstring). ``OSError`` when the input cannot be read."""
    import hashlib

    settings = sorted(
        (k, v) for k, v in os.environ.items() if k.startswith(_SETTINGS) and k not in _UNKEYED
    )
    text = "|".join([FORMAT, kind, str(path), code_fingerprint(), repr(settings), options])
    raw = text.encode(errors="surrogateescape") + b"|" + input_identity(Path(path))
    return cache_dir() / kind / hashlib.sha256(raw).hexdigest()[:32]


# -- the entry format ---------------------------------------------------------------------------
def write_entry(entry: Path, parts: dict[str, bytes]) -> None:
    """Write ``parts`` as one entry (module docstring), by one rename. ``OSError`` when it
    cannot be written (no temporary file is left)."""
    import hashlib
    import tempfile

    listed = [[name, len(body), hashlib.sha256(body).hexdigest()] for name, body in parts.items()]
    head = json.dumps({"format": FORMAT, "parts": listed}).encode() + b"\n"
    entry.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=entry.parent, prefix=".tmp-")
    try:
        with os.fdopen(fd, "wb") as fh:
            fh.write(head)
            for body in parts.values():
                fh.write(body)
        os.replace(tmp, entry)
    except OSError:
        with contextlib.suppress(OSError):
            os.unlink(tmp)
        raise


def read_parts(entry: Path, names: Iterable[str]) -> dict[str, bytes]:
    """The parts ``names`` of an entry, each checked against its SHA-256. ``OSError`` (no
    entry), ``KeyError`` (no such part) or ``ValueError`` (another format, a damaged part)."""
    import hashlib

    with entry.open("rb") as fh:
        head = json.loads(fh.readline())
        if not isinstance(head, dict) or head.get("format") != FORMAT:
            raise ValueError(f"{entry}: not an entry of format {FORMAT}")
        start = fh.tell()
        where: dict[str, tuple[int, int, str]] = {}
        for name, size, digest in head["parts"]:
            where[name] = (start, size, digest)
            start += size
        out = {}
        for name in names:
            offset, size, digest = where[name]
            fh.seek(offset)
            body = fh.read(size)
            if hashlib.sha256(body).hexdigest() != digest:
                raise ValueError(f"{entry}: part {name} is not what was written")
            out[name] = body
    return out


def cache_skipped(folder: Path, exc: BaseException) -> str:
    """The one warning of a cache that could not be written."""
    # polars does not say why its write failed; an OSError does (No space left, File too large)
    reason = exc.strerror if isinstance(exc, OSError) and exc.strerror else "a write failed"
    return (
        f"{CACHE_SKIPPED} ({reason}) at {folder}; free space there or point "
        "XDG_CACHE_HOME at a writable folder (or pass --no-cache)"
    )


def _warn_once(warnings: list[str], folder: Path, exc: BaseException) -> None:
    if not any(w.startswith(CACHE_SKIPPED) for w in warnings):
        warnings.append(cache_skipped(folder, exc))


# -- sessions -----------------------------------------------------------------------------------
def cached_session(path: Path, load: Callable[[Path], TraceSession]) -> TraceSession:
    """``load(path)``, or the session an earlier load of the unchanged input saved."""
    import polars as pl

    from traceforensics.model.session import TraceMeta, TraceSession

    try:
        entry = entry_path("sessions", path)
    except OSError:  # the loader says what is wrong with the input
        return load(path)
    # a missing or damaged entry is a miss (a corrupt Parquet page can panic: no Exception)
    with contextlib.suppress(Exception, pl.exceptions.PanicException):
        parts = read_parts(entry, ("meta", "events", "args"))
        meta = TraceMeta.from_dict(json.loads(parts["meta"]))
        events, args = (pl.read_parquet(io.BytesIO(parts[n])) for n in ("events", "args"))
        return TraceSession(events, meta, args)
    session = load(path)
    try:
        tables = {}
        for name, frame in (("events", session.events), ("args", session.args)):
            buf = io.BytesIO()
            frame.write_parquet(buf)
            tables[name] = buf.getvalue()
        text = json.dumps(session.meta.to_dict()).encode()
        write_entry(entry, {"meta": text, **tables})
    # polars reports a write cut short by ENOSPC/EFBIG as its own error, not as OSError
    except (OSError, pl.exceptions.PolarsError) as exc:
        _warn_once(session.meta.warnings, entry.parent, exc)
    return session


# -- analyses and the replay --------------------------------------------------------------------
def cached_result(
    entry: Path | None, run: Callable[[], Result], session: TraceSession | None = None
) -> Result:
    """``run()``'s analysis, read from ``entry`` when it holds one (None: no cache). With
    ``session`` the stored analysis holds none and gets this one and its warnings; without, it
    is stored whole (the rank files of a directory analysed apart: metadata only)."""
    import dataclasses
    import pickle

    if entry is not None:
        with contextlib.suppress(Exception):
            stored: Any = pickle.loads(read_parts(entry, ("analysis",))["analysis"])
            if session is None:
                return stored  # type: ignore[no-any-return]
            kept = list(session.meta.warnings)
            return dataclasses.replace(stored, session=session, warnings=kept)  # type: ignore[no-any-return]
    result = run()
    if entry is not None:
        store_result(entry, result, keep_session=session is None)
    return result


def store_result(
    entry: Path, result: Any, keep_session: bool = False, answer: tuple[bytes, str] | None = None
) -> None:
    """Write ``result`` (without its session unless ``keep_session``) and, for the replayed
    command line, ``answer`` (stdout bytes, stderr text) to ``entry``; a cache that cannot be
    written adds one warning to ``result.warnings``."""
    import dataclasses
    import pickle

    # (the row count travels: the JSON's ``event_count`` needs no session)
    bare = (
        result
        if keep_session
        else dataclasses.replace(result, session=None, event_total=result.event_count)
    )
    try:
        parts = {"analysis": pickle.dumps(bare, protocol=pickle.HIGHEST_PROTOCOL)}
        if answer is not None:
            parts |= {"stdout": answer[0], "stderr": answer[1].encode(errors="surrogateescape")}
        write_entry(entry, parts)
    except OSError as exc:
        _warn_once(result.warnings, entry.parent, exc)
    except (pickle.PicklingError, TypeError, AttributeError):
        pass


def servable(argv: list[str]) -> str | None:
    """The trace path when ``argv`` is ``analyze TRACE --json`` (either order), else None."""
    if len(argv) != 3 or argv[0] != "analyze" or argv.count("--json") != 1:
        return None
    path = argv[2] if argv[1] == "--json" else argv[1]
    return None if path.startswith("-") else path


def replay_entry(argv: list[str]) -> Path | None:
    """The entry whose stdout answers ``argv``, for a readable trace file (not a directory);
    None otherwise (not the replayed command line, any failure: the command runs)."""
    path = servable(argv)
    try:
        if path is None or not os.path.isfile(path):
            return None
        with open(path, "rb"):  # readable: else the command says why, not a replay
            pass
        return entry_path("results", path, DEFAULTS)
    except Exception:
        return None


def serve(argv: list[str]) -> bool:
    """Write the stored answer of ``argv`` (warnings on stderr, then the JSON on stdout) and
    return True; False, with nothing written, when there is none to serve."""
    entry = replay_entry(argv)
    try:
        parts = read_parts(entry, ("stdout", "stderr")) if entry is not None else None
    except Exception:  # no entry, no answer in it, a damaged one: the command runs
        return False
    if parts is None:
        return False
    try:
        if parts["stderr"]:
            # as ``cli.main`` writes them: a character the terminal cannot show is escaped
            if isinstance(sys.stderr, io.TextIOWrapper):
                from traceforensics.model.errors import NAME_BYTES  # (stdlib only)

                sys.stderr.reconfigure(errors=NAME_BYTES)
            sys.stderr.write(parts["stderr"].decode("utf-8", errors="surrogateescape"))
            sys.stderr.flush()
        sys.stdout.buffer.write(parts["stdout"])
        sys.stdout.flush()
    except BrokenPipeError:  # the reader went away (``| head``): exit 1 and say nothing
        with contextlib.suppress(OSError):
            os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        raise SystemExit(1) from None
    return True
