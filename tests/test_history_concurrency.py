"""Concurrent writers and a killed writer (issue 15), on SQLite and on PostgreSQL: processes,
not threads, as parallel CI jobs are."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from collections import Counter
from pathlib import Path

from tests.conftest import ROOT
from tests.history_support import (
    analysis_document,
    check_stored_figures,
    counts,
    orphans,
    store_url,
    table_rows,
)
from tests.pg_server import pg_server, pg_url
from traceforensics.compare import analysis_figures
from traceforensics.history import find_baseline, list_runs, record_run

__all__ = ["pg_server", "pg_url", "store_url"]  # fixtures used by name

WRITERS = 8
RUNS_EACH = 3

#: A writer: imports first, waits for the start file (so all writers race), records its runs.
_WRITER = """
import json, os, sys, time
from traceforensics.history import record_run
url, doc_path, go, writer, n = sys.argv[1:6]
doc = json.load(open(doc_path))
while not os.path.exists(go):
    time.sleep(0.005)
for k in range(int(n)):
    record_run(doc, url=url, labels={"writer": writer, "seq": str(k)})
"""

#: A writer that stops inside its transaction, after its findings rows are inserted and before
#: the document is: it writes the tables it inserted into so far to a file (the signal to the
#: test) and sleeps until killed.
_STUCK = """
import json, os, sys, time
from sqlalchemy import event
from sqlalchemy.engine import Engine
from traceforensics.history import record_run
url, doc_path, marker = sys.argv[1:4]
written = []

@event.listens_for(Engine, "after_cursor_execute")
def pause(conn, cursor, statement, params, context, executemany):
    words = statement.split()
    if words[:2] == ["INSERT", "INTO"]:
        written.append(words[2].strip('"').lower())
    if written and written[-1] == "tf_findings":
        with open(marker + ".tmp", "w") as f:
            f.write(" ".join(written))
        os.replace(marker + ".tmp", marker)
        time.sleep(120)

record_run(json.load(open(doc_path)), url=url, labels={"writer": "killed"})
"""


def _env() -> dict[str, str]:
    return {**os.environ, "PYTHONPATH": str(ROOT / "src")}


def _doc_file(tmp_path: Path) -> Path:
    path = tmp_path / "doc.json"
    path.write_text(json.dumps(analysis_document()))
    return path


def test_eight_concurrent_writers_lose_no_run(store_url: str, tmp_path: Path) -> None:
    doc_path, go = _doc_file(tmp_path), tmp_path / "go"
    procs = [
        subprocess.Popen(
            [
                sys.executable,
                "-c",
                _WRITER,
                store_url,
                str(doc_path),
                str(go),
                str(w),
                str(RUNS_EACH),
            ],
            env=_env(),
            stderr=subprocess.PIPE,
        )
        for w in range(WRITERS)
    ]
    time.sleep(1.0)  # let them import: they then race for a store that does not exist yet
    go.touch()
    for p in procs:
        _, err = p.communicate(timeout=180)
        assert p.returncode == 0, err.decode(errors="replace")
    labels = table_rows(store_url, "tf_labels")
    by_run: dict[int, dict[str, str]] = {}
    for r in labels:
        by_run.setdefault(r["run_id"], {})[r["key"]] = r["value"]
    pairs = Counter((v["writer"], v["seq"]) for v in by_run.values())
    assert pairs == Counter({(str(w), str(k)): 1 for w in range(WRITERS) for k in range(RUNS_EACH)})
    n = WRITERS * RUNS_EACH
    doc = analysis_document()
    assert counts(store_url) == {
        "tf_runs": n,
        "tf_inputs": 0,
        "tf_labels": 2 * n,
        "tf_devices": n * len(doc["devices"]),
        "tf_idle": n * sum(len(d["idle_by_cause"]) for d in doc["devices"]),
        "tf_figures": n * len(analysis_figures(doc)),
        "tf_findings": n * len(doc["findings"]),
        "tf_documents": n,
    }
    assert sorted(list_runs(store_url, None)["run_id"].to_list()) == list(range(1, n + 1))
    for run_id in by_run:  # every run whole: its own figures, compare's
        check_stored_figures(store_url, run_id, doc)
    versions = table_rows(store_url, "tf_schema")
    assert [v["version"] for v in versions] == [1]  # created once, whoever won


def test_a_killed_writer_leaves_no_partial_run(store_url: str, tmp_path: Path) -> None:
    doc = analysis_document()
    record_run(doc, url=store_url, labels={"writer": "before"})
    before = counts(store_url)
    marker = tmp_path / "inside"
    proc = subprocess.Popen(
        [sys.executable, "-c", _STUCK, store_url, str(_doc_file(tmp_path)), str(marker)],
        env=_env(),
        stderr=subprocess.PIPE,
    )
    deadline = time.monotonic() + 120
    while not marker.exists():
        assert proc.poll() is None, proc.communicate()[1].decode(errors="replace")
        assert time.monotonic() < deadline, "the writer never reached its findings"
        time.sleep(0.02)
    os.kill(proc.pid, signal.SIGKILL)  # inside the transaction, rows half written
    proc.wait(timeout=30)
    assert proc.returncode == -signal.SIGKILL
    # it had written its figures (and more) inside the transaction when it was killed
    assert marker.read_text().split() == [
        "tf_runs",
        "tf_labels",
        "tf_devices",
        "tf_idle",
        "tf_figures",
        "tf_findings",
    ]
    assert counts(store_url) == before  # nothing of the killed run, in any table
    assert not any(orphans(store_url).values())
    assert not [r for r in table_rows(store_url, "tf_labels") if r["value"] == "killed"]
    # the store stays usable: the next run gets written (and the old one still reads back)
    run_id = record_run(doc, url=store_url, labels={"writer": "after"})
    assert (
        find_baseline("writer=after", store_url) == doc == find_baseline("writer=before", store_url)
    )
    assert counts(store_url)["tf_runs"] == before["tf_runs"] + 1 and run_id >= 2
    check_stored_figures(store_url, run_id, doc)
    if store_url.startswith("sqlite"):
        import sqlite3

        path = store_url.removeprefix("sqlite:///")
        assert sqlite3.connect(path).execute("PRAGMA integrity_check").fetchone() == ("ok",)
