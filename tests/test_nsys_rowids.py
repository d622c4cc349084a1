"""Reads are sized by rows, not ids (issue 10): a table whose rowid jumps to 2^63-1 used to make
the reader allocate one range per CHUNK_ROWS ids (MemoryError)."""

from __future__ import annotations

import shutil
import sqlite3
from pathlib import Path

import polars as pl
import pytest

from tests.conftest import FIXTURES
from traceforensics.ingest import load_path

TABLES = ["CUPTI_ACTIVITY_KIND_MEMCPY", "CUPTI_ACTIVITY_KIND_KERNEL", "CUPTI_ACTIVITY_KIND_RUNTIME"]


@pytest.mark.parametrize("table", TABLES)
def test_huge_rowid_gap_reads_the_same_rows(tmp_path: Path, table: str) -> None:
    path = tmp_path / "gap.sqlite"
    shutil.copyfile(FIXTURES / "nsys" / "modern.sqlite", path)
    with sqlite3.connect(path) as conn:
        conn.execute(f"UPDATE {table} SET rowid = 9223372036854775807 WHERE rowid = "
                     f"(SELECT max(rowid) FROM {table})")  # fmt: skip
    plain = load_path(FIXTURES / "nsys" / "modern.sqlite").events
    moved = load_path(path).events
    assert moved.height == plain.height > 0
    cols = ["kind", "start_ns", "dur_ns", "device", "name"]
    key = ["kind", "start_ns", "dur_ns"]
    assert moved.select(cols).sort(key).equals(plain.select(cols).sort(key))
    assert moved.filter(pl.col("kind") == "memcpy").height > 0
