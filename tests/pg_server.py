"""A throwaway PostgreSQL server for the history tests (issue 15).

``pg_server`` (session scope: one server per pytest process, so each xdist worker has its own)
runs ``initdb`` and ``pg_ctl start`` on a temporary directory: no TCP at all, the server
listens on a unix socket in that directory only (``listen_addresses=''``), so workers never
race for a port; ``trust`` authentication; durability off (``fsync``, ``full_page_writes``)
since the data is thrown away. It is stopped with ``pg_ctl stop -m immediate`` and its
directory removed at the end of the session. ``pg_url`` gives each test a new empty database.

PostgreSQL refuses to run as root: when the tests run as root, ``initdb`` and ``postgres``
run as ``nobody`` (through ``runuser``, else ``setpriv``), owning the directory. The tests skip,
with the reason, only when the PostgreSQL binaries or the psycopg driver are absent.

Import both fixtures into a test module: ``from tests.pg_server import pg_server, pg_url``.
"""

from __future__ import annotations

import itertools
import os
import pwd
import shutil
import subprocess
import tempfile
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

#: Where the binaries are looked for: $TF_TEST_PG_BIN, then PATH, then Debian's layout.
_SEARCH = ("/usr/local/bin", "/usr/lib/postgresql/*/bin", "/usr/pgsql-*/bin")
_UNPRIVILEGED = "nobody"
_PORT = 5432  # only names the socket file in the private directory
_names = itertools.count()


def find_bin() -> Path | None:
    """The directory holding ``initdb``, ``pg_ctl`` and ``postgres``, or None."""
    candidates: list[Path] = []
    if os.environ.get("TF_TEST_PG_BIN"):
        candidates.append(Path(os.environ["TF_TEST_PG_BIN"]))
    found = shutil.which("initdb")
    if found:
        candidates.append(Path(found).parent)
    for pattern in _SEARCH:
        candidates += sorted(Path("/").glob(pattern.lstrip("/")), reverse=True)
    for folder in candidates:
        if all((folder / tool).exists() for tool in ("initdb", "pg_ctl", "postgres")):
            return folder
    return None


def _as_user_prefix() -> list[str] | None:
    """The command prefix that runs a program as an unprivileged user when we are root;
    [] when we are not root; None when root cannot drop its privileges here."""
    if os.geteuid() != 0:
        return []
    if shutil.which("runuser"):
        return ["runuser", "-u", _UNPRIVILEGED, "--"]
    if shutil.which("setpriv"):
        entry = pwd.getpwnam(_UNPRIVILEGED)
        return ["setpriv", f"--reuid={entry.pw_uid}", f"--regid={entry.pw_gid}", "--clear-groups"]
    return None


@dataclass
class PgServer:
    """A running server: its directory (data in ``data/``, socket beside it) and binaries."""

    root: Path
    bin: Path
    prefix: list[str]

    def url(self, database: str = "postgres") -> str:
        return f"postgresql+psycopg://postgres@/{database}?host={self.root}&port={_PORT}"

    def execute(self, sql: str) -> None:
        """Run one statement as the superuser, outside a transaction (CREATE DATABASE)."""
        import psycopg

        with psycopg.connect(
            host=str(self.root), port=_PORT, user="postgres", dbname="postgres", autocommit=True
        ) as conn:
            conn.execute(sql)  # type: ignore[arg-type]

    def new_database(self) -> str:
        """A new empty database (unique in this process); its URL."""
        name = f"t{os.getpid()}_{next(_names)}"
        self.execute(f"CREATE DATABASE {name}")
        return self.url(name)

    def _run(self, *args: str, check: bool = True) -> None:
        """Run one of the server's programs (as the unprivileged user when we are root)."""
        subprocess.run([*self.prefix, *args], check=check, capture_output=True, timeout=60)

    def start(self) -> None:
        data = self.root / "data"
        self._run(
            str(self.bin / "initdb"),
            "-D",
            str(data),
            "-A",
            "trust",
            "-U",
            "postgres",
            "-E",
            "UTF8",
            "--locale=C",
            "--no-sync",
        )
        options = (
            f"-c listen_addresses='' -c unix_socket_directories='{self.root}' -p {_PORT} "
            "-c fsync=off -c full_page_writes=off -c synchronous_commit=off "
            "-c max_connections=60"
        )
        self._run(
            str(self.bin / "pg_ctl"),
            "-D",
            str(data),
            "-l",
            str(self.root / "server.log"),
            "-o",
            options,
            "-w",
            "-t",
            "60",
            "start",
        )

    def stop(self) -> None:
        data = str(self.root / "data")
        self._run(
            str(self.bin / "pg_ctl"), "-D", data, "-m", "immediate", "-w", "stop", check=False
        )
        shutil.rmtree(self.root, ignore_errors=True)


def start_server() -> PgServer:
    """Start a server, or skip the test with the reason it cannot be."""
    pytest.importorskip("psycopg", reason="psycopg is not installed (pip install -e '.[dev]')")
    folder = find_bin()
    if folder is None:
        pytest.skip("PostgreSQL binaries (initdb, pg_ctl, postgres) not found; set TF_TEST_PG_BIN")
    prefix = _as_user_prefix()
    if prefix is None:
        pytest.skip("running as root without runuser or setpriv: PostgreSQL refuses root")
    # in /tmp (world-traversable) so that the unprivileged user can reach it
    root = Path(tempfile.mkdtemp(prefix="tf-pg-", dir="/tmp" if prefix else None))
    if prefix:
        entry = pwd.getpwnam(_UNPRIVILEGED)
        os.chown(root, entry.pw_uid, entry.pw_gid)
    server = PgServer(root, folder, prefix)
    try:
        server.start()
    except subprocess.CalledProcessError as exc:
        log = (
            (root / "server.log").read_text(errors="replace")
            if (root / "server.log").exists()
            else ""
        )
        server.stop()
        raise RuntimeError(
            f"PostgreSQL did not start: {exc.stderr.decode(errors='replace')} {log}"
        ) from exc
    return server


@pytest.fixture(scope="session")
def pg_server() -> Iterator[PgServer]:
    server = start_server()
    try:
        yield server
    finally:
        server.stop()


@pytest.fixture
def pg_url(pg_server: PgServer) -> str:
    """The URL of a new empty database on the session's server."""
    return pg_server.new_database()
