"""The schema version (issue 15): an older store is upgraded in place keeping its runs, a
failed upgrade leaves it as it was, a newer one is refused, another program's database is
never written to. On SQLite and PostgreSQL."""

from __future__ import annotations

import json
import sqlite3
import zlib
from datetime import UTC, datetime
from pathlib import Path

import pytest
import sqlalchemy as sa

from tests.conftest import run_cli
from tests.history_support import (
    analysis_document,
    check_stored_figures,
    counts,
    plain_figures,
    store_url,
    table_rows,
    variant,
)
from tests.pg_server import pg_server, pg_url
from traceforensics.history import SCHEMA_VERSION, find_baseline, list_runs, record_run
from traceforensics.history.migrate import V0_METADATA, V0_RUNS
from traceforensics.model.errors import InputError

__all__ = ["pg_server", "pg_url", "store_url"]  # fixtures used by name


def _v0_store(url: str, documents: list[dict[str, object]], body: bytes | None = None) -> None:
    """A version 0 store written by hand: runs 1..n, then run 2 deleted (ids keep a gap)."""
    engine = sa.create_engine(url)
    with engine.begin() as conn:
        V0_METADATA.create_all(conn)
        for k, doc in enumerate(documents):
            conn.execute(
                V0_RUNS.insert().values(
                    recorded_at=datetime(2026, 1, 1 + k, tzinfo=UTC),
                    tool_version="0.0.9",
                    labels=f"run=v0-{k};git=g{k}",
                    document=body if body is not None else zlib.compress(json.dumps(doc).encode()),
                )
            )
        conn.execute(V0_RUNS.delete().where(V0_RUNS.c.id == 2))
    engine.dispose()


def _columns(url: str, table: str) -> set[str]:
    engine = sa.create_engine(url)
    try:
        with engine.connect() as conn:
            return {c["name"] for c in sa.inspect(conn).get_columns(table)}
    finally:
        engine.dispose()


def test_a_version_0_store_is_upgraded_in_place_keeping_its_runs(store_url: str) -> None:
    docs = [variant(analysis_document(), k) for k in range(3)]
    _v0_store(store_url, docs)
    runs = list_runs(store_url)  # reading upgrades it
    assert runs["run_id"].to_list() == [3, 1]
    assert runs["labels"].to_list() == [["git=g2", "run=v0-2"], ["git=g0", "run=v0-0"]]
    assert [r["version"] for r in table_rows(store_url, "tf_schema")] == [SCHEMA_VERSION]
    assert "labels" not in _columns(store_url, "tf_runs")
    assert find_baseline("run=v0-2", store_url) == docs[2]
    assert find_baseline("#1", store_url) == docs[0]
    devices = {
        (r["run_id"], r["device"]): r["idle_ns"] for r in table_rows(store_url, "tf_devices")
    }
    assert devices == {
        (rid, d["device"]): d["idle_ns"] for rid, k in ((1, 0), (3, 2)) for d in docs[k]["devices"]
    }
    assert counts(store_url)["tf_findings"] == len(docs[0]["findings"]) + len(docs[2]["findings"])
    # the job's figures filled by compare, as record_run fills them, and listed from there
    for run_id, doc in ((1, docs[0]), (3, docs[2])):
        check_stored_figures(store_url, run_id, doc)
    assert runs["step_time_ns"].to_list() == [
        round(plain_figures(d)["step_time"][0] or -1) for d in (docs[2], docs[0])
    ]
    assert "step_time_ns" not in _columns(store_url, "tf_runs")  # a figure: tf_figures only
    # a new run after the upgrade takes a new id: never one a deleted run had
    assert record_run(docs[1], url=store_url, labels={"run": "new"}) == 4


@pytest.mark.parametrize(
    ("body", "words"),
    [
        (b"not zlib", "upgrading run 1: stored document unreadable"),
        (
            zlib.compress(b'{"schema": "traceforensics.monitor/1"}'),
            r"upgrading run 1: not a traceforensics\.analysis/1 document",
        ),
    ],
    ids=["not-zlib", "not-an-analysis"],
)
def test_a_failed_upgrade_leaves_the_old_store(store_url: str, body: bytes, words: str) -> None:
    _v0_store(store_url, [analysis_document()], body=body)
    before = table_rows(store_url, "tf_runs")
    with pytest.raises(InputError, match=words):
        list_runs(store_url)
    assert table_rows(store_url, "tf_runs") == before  # still the version 0 layout
    assert "labels" in _columns(store_url, "tf_runs")
    engine = sa.create_engine(store_url)
    with engine.connect() as conn:
        assert set(sa.inspect(conn).get_table_names()) == {"tf_runs"}
    engine.dispose()


def test_a_newer_store_is_refused_in_one_line(
    store_url: str, capsys: pytest.CaptureFixture[str]
) -> None:
    record_run(analysis_document(), url=store_url)
    engine = sa.create_engine(store_url)
    with engine.begin() as conn:
        conn.execute(
            sa.text("INSERT INTO tf_schema VALUES (:v, :t, 'future')"),
            {"v": SCHEMA_VERSION + 1, "t": datetime.now(UTC)},
        )
    engine.dispose()
    with pytest.raises(InputError, match=f"schema version {SCHEMA_VERSION + 1} is newer"):
        record_run(analysis_document(), url=store_url)
    code, out, err = run_cli(["history", "--store", store_url], capsys)
    assert code == 2 and out == "" and len(err.strip().splitlines()) == 1
    assert "upgrade traceforensics" in err
    assert counts(store_url)["tf_runs"] == 1


def test_another_programs_sqlite_file_is_never_written(tmp_path: Path) -> None:
    path = tmp_path / "report.sqlite"  # e.g. an Nsight Systems export
    with sqlite3.connect(path) as conn:
        conn.execute("CREATE TABLE TARGET_INFO_GPU (id INTEGER)")
    raw = path.read_bytes()
    with pytest.raises(InputError, match="holds other tables"):
        record_run(analysis_document(), url=f"sqlite:///{path}")
    with pytest.raises(InputError, match="not a traceforensics history"):
        list_runs(f"sqlite:///{path}")
    assert path.read_bytes() == raw
    assert sorted(p.name for p in tmp_path.iterdir()) == ["report.sqlite"]  # no -wal, no -shm
