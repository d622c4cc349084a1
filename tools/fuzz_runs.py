"""Fuzz cases that are whole runs, not one damaged input file (issue 43): a cache on a full
disk, odd history store URLs. Each case is a ``Case``: the arguments, the folders that must not
change, the environment and a file-size limit. ``build_case`` builds a case of any family
(``ALL_FAMILIES``: these and ``fuzz_cases.FAMILIES``); ``applied`` sets its environment and
limit for the run; ``check_after`` says what went wrong besides the exit status.
"""

from __future__ import annotations

import contextlib
import functools
import os
import random
import resource
import signal
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path

from fuzz_cases import EXAMPLE, FAMILIES, kineto_fields, make_case, snapshot


@dataclass
class Case:
    """One run of ``tf``: its arguments, the folders whose contents must not change, the
    environment it runs in (``env``: set for the run, ``None`` values removed) and a limit
    on file sizes (``fsize``: ``RLIMIT_FSIZE`` in bytes, SIGXFSZ ignored, as on a full or
    quota-limited file system). ``cache``: a cache folder that must hold no ``.tmp-*``
    afterwards."""

    argv: list[str]
    watched: list[Path]
    env: dict[str, str | None] = field(default_factory=dict)
    fsize: int | None = None
    cache: Path | None = None


def cache_full(folder: Path, rng: random.Random) -> Case:
    """A good (or field-damaged) trace analysed with the cache on, the cache folder on a
    "full disk" (issue 43: ``No space left``/``File too large`` was exit 3 and left ``.tmp-*``
    folders): file sizes limited to 0 B .. 1 MiB, or the cache root a file or read-only."""
    inputs = folder / "in"
    inputs.mkdir()
    trace = inputs / "trace.json"
    if rng.random() < 0.3:
        kineto_fields(trace, rng)
    else:
        trace = inputs / "trace.json.gz"
        trace.write_bytes(EXAMPLE.read_bytes())
    cache = folder / "cache"
    how = rng.choice(["fsize", "fsize", "fsize", "file", "readonly"])
    fsize = None
    if how == "fsize":
        fsize = rng.choice([0, 1, 512, 4096, 16_384, 65_536, 200_000, 1 << 20])
    elif how == "file":  # the cache folder's place holds a file: every mkdir fails
        cache.write_bytes(b"not a folder")
    else:
        (cache / "traceforensics").mkdir(parents=True)
        (cache / "traceforensics").chmod(0o555)
    argv = ["analyze", str(trace), "--json"]
    if rng.random() < 0.2:  # the store on the same full disk
        (folder / "store").mkdir()
        argv += ["--store", f"sqlite:///{folder / 'store' / 'h.sqlite'}"]
    return Case(argv, [inputs], {"XDG_CACHE_HOME": str(cache)}, fsize, cache)


#: Pieces of store URLs (issue 43: ``foo://bar``, ``http://[::1``, a NUL were exit 3).
URL_SCHEMES = ["sqlite", "sqlite+pysqlite", "sqlite+pysqlcipher", "postgresql", "postgres",
               "postgresql+psycopg2", "foo", "http", "mysql", "", "SQLITE", "sqlite+"]  # fmt: skip
ODD_URLS = ["foo://bar", "http://[::1", "sqlite://", "sqlite:///", ":memory:",
            "sqlite:///:memory:", "://", "sqlite:////", "\x00", "x" * 5000]  # fmt: skip
URL_QUERIES = ["", "?mode=ro", "?mode=rw", "?mode=nope", "?immutable=1", "?foo=1",
               "?timeout=x", "?timeout=1", "?uri=true", "?vfs=nope", "?cache=shared&mode=ro",
               "?mode=ro&mode=rw", "?%00", "?"]  # fmt: skip


def store_urls(folder: Path, rng: random.Random) -> Case:
    """``tf history`` / ``tf analyze --store`` with odd store URLs: unknown schemes, broken
    IPv6 hosts and ports, NULs, SQLite query arguments, a read-only store or folder, a store
    that is not a database. PostgreSQL URLs point at a closed local port (no network)."""
    store_dir = folder / "store"
    store_dir.mkdir()
    odd_name = rng.choice(["h\x00.sqlite", "é.sqlite", "h?x.sqlite", "h#.sqlite", "h%20.sqlite"])
    db = store_dir / (odd_name if rng.random() < 0.25 else "h.sqlite")
    kind = rng.choice(["none", "good", "good", "garbage", "empty"])
    with contextlib.suppress(OSError, ValueError):
        if kind == "good":
            db.write_bytes(_store_bytes())
        elif kind == "garbage":
            db.write_bytes(rng.randbytes(rng.randint(1, 2048)))
        elif kind == "empty":
            db.write_bytes(b"")
    scheme = "sqlite" if rng.random() < 0.5 else rng.choice(URL_SCHEMES)
    if scheme.startswith("postgres"):
        host = rng.choice(
            ["127.0.0.1:1", "[::1", "[::1]:1", "h:abc", "127.0.0.1:99999999", "@", ""]
        )
        url = f"{scheme}://u:p@{host}/db{rng.choice(URL_QUERIES)}"
    elif rng.random() < 0.15:
        url = rng.choice(ODD_URLS)
    else:
        url = f"{scheme}:///{db}{rng.choice(URL_QUERIES)}"
    if rng.random() < 0.15 and db.exists():
        (db if rng.random() < 0.5 else store_dir).chmod(0o555)
    if rng.random() < 0.5:
        argv = ["history", "--store", url] + (["--json"] if rng.random() < 0.5 else [])
        watched = [store_dir]  # reading a store changes nothing beside or in it
    else:
        inputs = folder / "in"
        inputs.mkdir()
        (inputs / "trace.json.gz").write_bytes(EXAMPLE.read_bytes())
        argv = ["analyze", str(inputs / "trace.json.gz"), "--no-cache", "--store", url]
        watched = [inputs]
    return Case(argv, watched, {"TF_HISTORY_URL": None, "XDG_DATA_HOME": str(folder / "data")})


@functools.cache
def _store_bytes() -> bytes:
    """A history store holding one run of the bundled trace (made once per process)."""
    import tempfile

    import traceforensics as tf
    from traceforensics.history import record_run

    with tempfile.TemporaryDirectory(prefix="tf-fuzz-store-") as tmp:
        record_run(tf.analyze(str(EXAMPLE)).to_json(), url=f"sqlite:///{tmp}/h.sqlite")
        return Path(tmp, "h.sqlite").read_bytes()


#: Families whose case is a whole run (arguments, environment, limits), not one input file.
RUNS: dict[str, Callable[[Path, random.Random], Case]] = {
    "cache-full": cache_full,
    "store-urls": store_urls,
}
#: Every family, for the runners.
ALL_FAMILIES = [*FAMILIES, *RUNS]


def build_case(family: str, seed: int, folder: Path) -> Case:
    """Case ``seed`` of any family (``ALL_FAMILIES``) written into ``folder``."""
    if family in RUNS:
        return RUNS[family](folder, random.Random(f"{family}:{seed}"))
    path, command = make_case(family, seed, folder)
    argv = [command, str(path)] + (["--no-cache", "--json"] if command == "analyze" else [])
    return Case(argv, [folder])


@contextlib.contextmanager
def applied(case: Case) -> Iterator[None]:
    """The case's environment and file-size limit, for the run only (restored after)."""
    saved = {k: os.environ.get(k) for k in case.env}
    limit = resource.getrlimit(resource.RLIMIT_FSIZE)
    handler = signal.getsignal(signal.SIGXFSZ)
    for k, v in case.env.items():
        if v is None:
            os.environ.pop(k, None)
        else:
            os.environ[k] = v
    if case.fsize is not None:
        signal.signal(signal.SIGXFSZ, signal.SIG_IGN)
        resource.setrlimit(resource.RLIMIT_FSIZE, (case.fsize, limit[1]))
    try:
        yield
    finally:
        resource.setrlimit(resource.RLIMIT_FSIZE, limit)
        signal.signal(signal.SIGXFSZ, handler)
        for k, old in saved.items():
            if old is None:
                os.environ.pop(k, None)
            else:
                os.environ[k] = old


def check_after(case: Case, before: dict[str, tuple[int, int, bytes]]) -> str | None:
    """What went wrong besides the exit: a watched folder changed, or temporary files left
    in the cache (``None`` when neither)."""
    if watch(case) != before:
        return "input-modified"
    cache = case.cache
    if (
        cache is not None
        and cache.is_dir()
        and any(p.name.startswith(".tmp-") for p in cache.rglob("*"))
    ):
        return "temp-left"
    return None


def watch(case: Case) -> dict[str, tuple[int, int, bytes]]:
    """The snapshot of every watched folder."""
    out: dict[str, tuple[int, int, bytes]] = {}
    for i, folder in enumerate(case.watched):
        out |= {f"{i}/{k}": v for k, v in snapshot(folder).items()}
    return out


def unlock(folder: Path) -> None:
    """Make everything under ``folder`` writable again (a case may lock parts of it), so the
    temporary folder can be removed."""
    for root, dirs, _files in os.walk(folder):
        for name in dirs:
            with contextlib.suppress(OSError):
                (Path(root) / name).chmod(0o755)
    for p in folder.rglob("*"):
        if p.is_file() and not p.is_symlink():
            with contextlib.suppress(OSError):
                p.chmod(0o644)
