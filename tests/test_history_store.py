"""The history store (issue 15) on SQLite and on a real PostgreSQL server: what a run records,
baselines, listings, trends and filters. The stored job figures are checked against
``compare.analysis_figures`` (the one definition) and against plain-Python recomputations."""

from __future__ import annotations

import hashlib
import math
import sqlite3
from datetime import UTC, datetime, timedelta

import pytest

from tests.conftest import nonempty, shared_trace
from tests.history_support import (
    EXAMPLE,
    analysis_document,
    check_stored_figures,
    close,
    counts,
    plain_figures,
    store_url,
    table_rows,
    variant,
)
from tests.pg_server import pg_server, pg_url
from traceforensics.compare import analysis_figures
from traceforensics.history import RunFilter, find_baseline, list_runs, record_run, trend
from traceforensics.model.errors import InputError

__all__ = ["pg_server", "pg_url", "store_url"]  # fixtures used by name


def test_a_run_records_the_documents_figures(store_url: str) -> None:
    doc = analysis_document()
    run_id = record_run(
        doc, url=store_url, labels={"git": "abc123", "run": "baseline"}, inputs=[str(EXAMPLE)]
    )
    assert run_id == 1
    (run,) = table_rows(store_url, "tf_runs")
    assert run["trace_sha256"] == hashlib.sha256(EXAMPLE.read_bytes()).hexdigest()
    assert run["tool_version"] == doc["tool_version"]
    assert run["source_format"] == "kineto"
    check_stored_figures(store_url, run_id, doc)
    recorded = run["recorded_at"]  # SQLite gives back text; both store UTC
    recorded = datetime.fromisoformat(recorded) if isinstance(recorded, str) else recorded
    recorded = recorded.replace(tzinfo=recorded.tzinfo or UTC)
    assert abs(datetime.now(UTC) - recorded) < timedelta(minutes=5)
    labels = {(r["key"], r["value"]) for r in table_rows(store_url, "tf_labels")}
    assert labels == {("git", "abc123"), ("run", "baseline")}
    assert [r["path"] for r in table_rows(store_url, "tf_inputs")] == [str(EXAMPLE)]
    devices = {(r["rank"], r["device"]): r for r in table_rows(store_url, "tf_devices")}
    summary = {(s["rank"], s["device"]): s for s in doc["step_summary"]}
    for d in nonempty(doc["devices"]):
        row = devices.pop((d["rank"], d["device"]))
        for key in ("window_ns", "busy_ns", "idle_ns", "top_cause", "exposed_comm_ns"):
            assert row[key] == d[key], key
        assert math.isclose(row["mfu"], d["mfu"])
        assert row["step_p50_ns"] == summary[(d["rank"], d["device"])]["p50_ns"]
        assert row["step_count"] == summary[(d["rank"], d["device"])]["n_steps"]
    assert not devices
    idle = {
        (r["rank"], r["device"], r["cause"]): r["idle_ns"] for r in table_rows(store_url, "tf_idle")
    }
    expected = {
        (d["rank"], d["device"], c): ns
        for d in doc["devices"]
        for c, ns in d["idle_by_cause"].items()
    }
    assert idle == expected
    findings = sorted(table_rows(store_url, "tf_findings"), key=lambda r: r["position"])
    assert [
        (f["category"], f["rank"], f["device"], f["recoverable_ns"], f["title"]) for f in findings
    ] == [
        (f["category"], f["rank"], f["device"], f["recoverable_ns"], f["title"])
        for f in nonempty(doc["findings"])
    ]
    assert find_baseline("run=baseline", store_url) == doc  # the whole document, exactly
    if store_url.startswith("sqlite"):  # readers never block the writer
        with sqlite3.connect(store_url.removeprefix("sqlite:///")) as conn:
            assert conn.execute("PRAGMA journal_mode").fetchone() == ("wal",)


def test_baseline_selectors_pick_the_newest_match(store_url: str) -> None:
    doc = analysis_document()
    record_run(variant(doc, 1), url=store_url, labels={"run": "baseline"})
    record_run(variant(doc, 2), url=store_url, labels={"run": "baseline", "pr": "7"})
    record_run(variant(doc, 3), url=store_url, labels={"run": "after"})

    def which(selector: str) -> str:
        return str(find_baseline(selector, store_url)["warnings"][-1])

    assert which("run=baseline") == "variant 2"  # newest of two
    assert which("baseline") == "variant 2"  # any label's value
    assert which("#1") == "variant 1"
    assert which("3") == "variant 3"  # a bare integer: the run id first
    assert which("7") == "variant 2"  # no run 7: the label value pr=7
    with pytest.raises(InputError) as err:
        find_baseline("run=nothing", store_url)
    assert "no stored run labelled run=nothing in " in str(err.value)
    assert "tf history" in str(err.value) and "\n" not in str(err.value)
    with pytest.raises(InputError, match="no stored run with id 99"):
        find_baseline("#99", store_url)


def test_missing_store_is_no_runs_and_is_not_created(tmp_path: pytest.TempPathFactory) -> None:
    path = tmp_path / "absent.sqlite"  # type: ignore[operator]
    url = f"sqlite:///{path}"
    assert list_runs(url).is_empty() and trend(url, "idle").is_empty()
    assert trend(url, "idle.data_loading").is_empty()
    with pytest.raises(InputError, match="figure 'speed': unknown"):
        trend(url, "speed")
    with pytest.raises(InputError, match="no runs stored yet"):
        find_baseline("run=baseline", url)
    assert not path.exists()  # reading never creates the file


#: Trended figures: one per unit and basis (a cause, a kind, step time, its spread, MFU).
TRENDED = ["idle", "idle.data_loading", "busy.kernel", "copy.exposed", "step_time"]
TRENDED += ["step_time.iqr", "mfu"]


@pytest.mark.parametrize("figure", TRENDED)
def test_trend_values_equal_the_documents_figures(store_url: str, figure: str) -> None:
    docs = [variant(analysis_document(), k) for k in range(4)]
    for k, doc in enumerate(docs):
        record_run(doc, url=store_url, labels={"run": f"r{k}"})
    points = trend(store_url, figure)
    assert points["run_id"].to_list() == [1, 2, 3, 4]  # oldest first
    for point, doc in zip(points.iter_rows(named=True), docs, strict=True):
        want = analysis_figures(doc)[figure]
        assert (point["unit"], point["basis"]) == (want.unit, want.basis)
        assert close(point["value"], want.after) and close(point["share"], want.share_after)
        value, share = plain_figures(doc)[figure]
        assert close(point["value"], value) and close(point["share"], share), (point, value)
    if figure not in ("busy.kernel", "copy.exposed", "step_time.iqr"):  # the variants move these
        assert points["value"].n_unique() == 4, points


def test_job_figures_join_every_rank(store_url: str) -> None:
    doc = analysis_document(shared_trace("hta/job128_sampled"))
    assert len(doc["devices"]) >= 2
    run_id = record_run(doc, url=store_url, labels={"job": "128"})
    check_stored_figures(store_url, run_id, doc)
    (row,) = list_runs(store_url).to_dicts()
    assert row["devices"] == len(doc["devices"])
    # the listing's columns are the stored figures, recomputed here from the devices
    idle_share = sum(d["idle_ns"] for d in doc["devices"]) / sum(
        d["window_ns"] for d in doc["devices"]
    )
    assert math.isclose(row["idle"], idle_share)
    assert row["step_time_ns"] == round(plain_figures(doc)["step_time"][0] or -1)
    mfu = plain_figures(doc)["mfu"][0]
    assert (row["mfu"] is None and mfu is None) or math.isclose(row["mfu"], mfu or -1)
    by_cause = {
        c: sum(d["idle_by_cause"][c] for d in doc["devices"])
        for c in doc["devices"][0]["idle_by_cause"]
    }
    assert row["top_cause"] == max(by_cause, key=lambda c: by_cause[c])


def test_a_run_without_steps_stores_window_totals(store_url: str) -> None:
    doc = analysis_document()
    doc["steps"] = []
    run_id = record_run(doc, url=store_url, labels={"steps": "none"})
    check_stored_figures(store_url, run_id, doc)
    figures = {r["name"]: r for r in table_rows(store_url, "tf_figures")}
    assert figures["step_time"]["value"] is None and figures["idle"]["basis"] == "total"
    assert figures["idle"]["value"] == sum(d["idle_ns"] for d in doc["devices"])
    (row,) = list_runs(store_url).to_dicts()
    assert row["step_time_ns"] is None and row["idle"] is not None
    (point,) = trend(store_url, "step_time").to_dicts()
    assert point["value"] is None and point["unit"] == "ns"
    with pytest.raises(InputError, match=r"unknown cause 'nothing'; idle\.CAUSE takes one of"):
        trend(store_url, "idle.nothing")  # judged by the causes the store holds


def test_filters(store_url: str) -> None:
    doc = analysis_document()
    for labels in (
        {"branch": "main", "run": "a"},
        {"branch": "main", "run": "b"},
        {"branch": "dev", "run": "a"},
        {"branch": "dev", "run": "c"},
    ):
        record_run(doc, url=store_url, labels=labels)

    def ids(*labels: str, **kw: object) -> list[int]:
        return list_runs(store_url, RunFilter(labels=labels, **kw))["run_id"].to_list()  # type: ignore[arg-type]

    assert ids() == [4, 3, 2, 1]  # newest first
    assert ids("branch=main") == [2, 1]
    assert ids("branch=main", "run=a") == [1]  # all must match
    assert ids("run=a", "run=c") == [4, 3, 1]  # one key twice: either value
    assert ids("dev") == [4, 3]  # a bare value: any label
    assert ids("#2") == [2]
    assert ids(limit=2) == [4, 3]
    assert ids(since=datetime.now(UTC) + timedelta(hours=1)) == []
    assert ids(since=datetime.now(UTC) - timedelta(hours=1)) == [4, 3, 2, 1]
    listed = list_runs(store_url, RunFilter(labels=("run=c",)))
    assert listed["labels"].to_list() == [["branch=dev", "run=c"]]


@pytest.mark.parametrize(
    ("labels", "match"),
    [({"bad key": "x"}, "the key must"), ({"run": ""}, "the value must"), ({"k": "a\nb"}, "value")],
)
def test_bad_labels_are_refused_before_writing(
    store_url: str, labels: dict[str, str], match: str
) -> None:
    with pytest.raises(InputError, match=match):
        record_run(analysis_document(), url=store_url, labels=labels)


def test_not_an_analysis_document_is_refused(store_url: str) -> None:
    with pytest.raises(InputError, match=r"not a traceforensics\.analysis/1 document"):
        record_run({"schema": "traceforensics.monitor/1"}, url=store_url)


def test_a_document_with_undecodable_names_round_trips(store_url: str) -> None:
    doc = analysis_document()
    doc["inputs"][0]["path"] = "/runs/tr\udcffce.json"  # a file name that is not UTF-8
    record_run(doc, url=store_url, labels={"run": "odd"})
    assert find_baseline("run=odd", store_url) == doc
    assert counts(store_url)["tf_runs"] == 1
    (run,) = table_rows(store_url, "tf_runs")
    assert run["trace_sha256"] is None  # the file cannot be read: stored without a hash
