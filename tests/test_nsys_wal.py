"""WAL-mode SQLite exports (issue 10): opening one read-only used to create ``-wal``/``-shm``
files beside the input (and crash with SIGBUS on pending frames in a read-only directory). The
export is now read from a private copy: nothing appears beside it, its bytes and mtime stay, and
frames still in the WAL are read."""

from __future__ import annotations

import shutil
import sqlite3
from pathlib import Path

import polars as pl

from tests.conftest import FIXTURES
from traceforensics.ingest import load_path
from traceforensics.ingest.nsys.db import is_wal, private_copy


def _state(folder: Path) -> dict[str, tuple[int, int, bytes]]:
    return {
        p.name: (p.stat().st_size, p.stat().st_mtime_ns, p.read_bytes()) for p in folder.iterdir()
    }


def _wal_copy(tmp_path: Path) -> Path:
    path = tmp_path / "wal.sqlite"
    shutil.copyfile(FIXTURES / "nsys" / "modern.sqlite", path)
    with sqlite3.connect(path) as conn:
        conn.execute("PRAGMA journal_mode=WAL")
    assert is_wal(path)
    return path


def test_wal_export_leaves_its_folder_untouched(tmp_path: Path) -> None:
    path = _wal_copy(tmp_path)
    before = _state(tmp_path)
    assert sorted(before) == ["wal.sqlite"], "the fixture must start without -wal/-shm files"
    session = load_path(path)
    assert session.events.height > 0
    assert _state(tmp_path) == before


def test_pending_wal_frames_are_read_without_touching_the_input(tmp_path: Path) -> None:
    """A writer (like nsys still exporting) holds frames in the WAL that the main file lacks."""
    path = _wal_copy(tmp_path)
    plain = load_path(FIXTURES / "nsys" / "modern.sqlite")
    writer = sqlite3.connect(path)
    try:
        writer.execute("PRAGMA wal_autocheckpoint=0")
        # one more kernel, present only in the WAL until a checkpoint
        cols = [r[1] for r in writer.execute("PRAGMA table_info(CUPTI_ACTIVITY_KIND_KERNEL)")]
        row = writer.execute(
            "SELECT * FROM CUPTI_ACTIVITY_KIND_KERNEL ORDER BY start DESC LIMIT 1"
        ).fetchone()
        values = dict(zip(cols, row, strict=True))
        values["start"], values["end"] = values["end"] + 1000, values["end"] + 2000
        values["correlationId"] = 10**6
        marks = ", ".join("?" for _ in cols)
        writer.execute(
            f"INSERT INTO CUPTI_ACTIVITY_KIND_KERNEL VALUES ({marks})", list(values.values())
        )
        writer.commit()
        assert (tmp_path / "wal.sqlite-wal").stat().st_size > 0
        before = _state(tmp_path)
        session = load_path(path)
        assert _state(tmp_path) == before
        kernels = session.events.filter(pl.col("kind") == "kernel").height
        assert kernels == plain.events.filter(pl.col("kind") == "kernel").height + 1
    finally:
        writer.close()


def test_the_private_copy_holds_the_wal_frames_and_is_not_in_wal_mode(tmp_path: Path) -> None:
    """Two SQLite libraries (Python's, the ADBC driver's) read the copy; on one WAL file's
    shared memory they can truncate it under each other (a SIGBUS seen in CI), so the copy is
    checkpointed and switched to rollback-journal mode: no -wal/-shm beside it, same rows."""
    path = _wal_copy(tmp_path)
    with sqlite3.connect(path) as writer:
        writer.execute("PRAGMA wal_autocheckpoint=0")
        writer.execute("CREATE TABLE extra (x INTEGER)")
        writer.execute("INSERT INTO extra VALUES (42)")
    assert (tmp_path / "wal.sqlite-wal").stat().st_size > 0
    copy = private_copy(path)
    try:
        assert not is_wal(copy)
        assert sorted(p.name for p in copy.parent.iterdir()) == [copy.name]
        with sqlite3.connect(f"file:{copy}?mode=ro", uri=True) as conn:
            assert conn.execute("SELECT x FROM extra").fetchall() == [(42,)]
    finally:
        shutil.rmtree(copy.parent)
