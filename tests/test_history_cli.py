"""``tf analyze --store/--label`` and ``tf history`` (issue 15): what a user sees, the JSON a
script reads, and every bad store or label as one line and exit 2."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest

from tests.conftest import run_cli, shared_trace
from tests.history_support import EXAMPLE, analysis_document, plain_figures, written
from traceforensics.analysis.idle.causes import CAUSES
from traceforensics.compare import analysis_figures
from traceforensics.history import find_baseline, list_runs, record_run


@pytest.fixture(autouse=True)
def _private_store(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    """Never the user's store: the default lives under a temporary XDG_DATA_HOME."""
    monkeypatch.setenv("XDG_DATA_HOME", str(tmp_path / "data"))
    monkeypatch.delenv("TF_HISTORY_URL", raising=False)
    monkeypatch.delenv("TF_LABELS", raising=False)


def _default_url(tmp_path: Path) -> str:
    return f"sqlite:///{tmp_path / 'data' / 'traceforensics' / 'history.sqlite'}"


def test_store_keeps_stdout_pure_and_says_one_line(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    code, out, err = run_cli(
        ["analyze", str(EXAMPLE), "--json", "--store", "--label", "git=abc", "--label", "run=b"],
        capsys,
    )
    url = _default_url(tmp_path)
    assert code == 0, err
    assert err.strip().splitlines() == [f"tf: stored run 1 in {url}"]
    assert json.loads(out) == find_baseline("run=b", url)  # stdout is the document stored


def test_history_lists_and_trends(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    url = f"sqlite:///{tmp_path / 'h.sqlite'}"
    monkeypatch.setenv("TF_HISTORY_URL", url)
    monkeypatch.setenv("TF_LABELS", "ci=yes branch=main run=env")  # --label run=... wins
    for k in range(3):
        code, _, err = run_cli(
            ["analyze", str(EXAMPLE), "--sections", "verdict", "--store", "--label", f"run=r{k}"],
            capsys,
        )
        assert code == 0 and f"stored run {k + 1} in {url}" in err
    code, out, _ = run_cli(["history"], capsys)
    lines = out.splitlines()
    assert code == 0 and lines[0] == f"3 runs in {url} (newest first)"
    assert [ln.split()[0] for ln in lines[2:]] == ["3", "2", "1"]
    assert "branch=main ci=yes run=r2" in lines[2] and "data_loading" in lines[2]
    code, out, _ = run_cli(["history", "--trend", "idle.data_loading", "--label", "run=r1"], capsys)
    assert code == 0 and "over 1 run in" in out and "2  " in out.splitlines()[2]
    code, out, _ = run_cli(["history", "--trend", "idle", "--json"], capsys)
    obj = json.loads(out)
    assert obj["schema"] == "traceforensics.trend/1" and obj["figure"] == "idle"
    assert {(p["unit"], p["basis"]) for p in obj["points"]} == {("ns/step", "per_step")}
    assert [p["run_id"] for p in obj["points"]] == [1, 2, 3]
    assert obj["points"][0]["labels"] == {"branch": "main", "ci": "yes", "run": "r0"}
    code, out, _ = run_cli(["history", "--json", "--limit", "2"], capsys)
    runs = json.loads(out)["runs"]
    assert [r["run_id"] for r in runs] == [3, 2] and runs[0]["inputs"] == [str(EXAMPLE)]


def test_no_store_yet_is_one_line_and_exit_0(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    code, out, err = run_cli(["history"], capsys)
    assert code == 0 and err == ""
    url = _default_url(tmp_path)
    assert out == f"no runs stored yet in {url}; store one with tf analyze TRACE --store\n"
    code, out, _ = run_cli(["history", "--json"], capsys)
    assert code == 0 and json.loads(out)["runs"] == []
    assert not (tmp_path / "data").exists()


def test_real_traces_trend_equals_their_documents(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    url = f"sqlite:///{tmp_path / 'h.sqlite'}"
    docs = []
    for workers in (0, 4):
        trace = shared_trace(f"kineto/resnet50_v100_workers{workers}.pt.trace.json.gz")
        code, out, err = run_cli(
            ["analyze", str(trace), "--json", "--store", url, "--label", f"workers={workers}"],
            capsys,
        )
        assert code == 0, err
        docs.append(json.loads(out))
    for figure in ("idle.data_loading", "step_time", "mfu"):
        code, out, _ = run_cli(["history", "--store", url, "--trend", figure, "--json"], capsys)
        points = json.loads(out)["points"]
        want = [plain_figures(d)[figure] for d in docs]
        for p, (value, share) in zip(points, want, strict=True):
            assert p["value"] == written(value, p["unit"]), (figure, p, value)
            assert p["share"] == written(share, "fraction"), (figure, p, share)
    code, out, _ = run_cli(["history", "--store", url, "--trend", "idle.data_loading"], capsys)
    lines = out.splitlines()
    assert code == 0 and lines[-1].startswith("trend  ")
    # per step in ms with the share of the window beside it; the change in compare's words
    share = plain_figures(docs[0])["idle.data_loading"][1] or -1
    assert f"47.28 ms/step   {100 * share:.1f}%  ████" in lines[2], lines
    assert "−99.0% (47.28 → 0.46 ms/step)" in lines[-1], lines[-1]
    listed = list_runs(url)
    assert listed["trace_sha256"].n_unique() == 2  # two traces, two content hashes


@pytest.mark.parametrize(
    ("argv", "words"),
    [
        (["analyze", "--store", str(EXAMPLE)], "put --store after the trace"),
        (["analyze", str(EXAMPLE), "--store", "mysql://u@h/db"], "mysql is not a supported store"),
        (["analyze", str(EXAMPLE), "--label", "run"], "pass KEY=VALUE"),
        (["analyze", str(EXAMPLE), "--label", "run=a"], "add --store"),
        (["analyze", str(EXAMPLE), "--store", "--label", "a=1", "--label", "a=2"], "given twice"),
        (
            ["analyze", str(EXAMPLE), "--store", "postgresql://nobody@127.0.0.1:9/x"],
            "check that the server runs",
        ),
        (["history", "--store", "history.sqlite"], "write sqlite:///history.sqlite"),
        (["history", "--since", "last week"], "--since 'last week': not a date"),
        (["history", "--trend", "speed"], "figure 'speed': unknown"),
        (["history", "--label", "#x"], "# must be followed by a run id"),
    ],
)
def test_bad_store_and_labels_are_one_line(
    argv: list[str], words: str, capsys: pytest.CaptureFixture[str]
) -> None:
    code, out, err = run_cli(argv, capsys)
    assert code == 2 and out == ""
    assert len(err.strip().splitlines()) == 1 and words in err, err


def test_label_checks_come_before_the_analysis(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("TF_LABELS", "ok=1 broken")
    code, out, err = run_cli(["analyze", str(EXAMPLE), "--store"], capsys)
    assert code == 2 and out == "" and "$TF_LABELS" in err  # no report was printed first
    assert not (tmp_path / "data").exists()


def test_postgres_without_psycopg_names_the_extra(
    capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setitem(sys.modules, "psycopg", None)  # import psycopg now fails
    code, out, err = run_cli(
        ["analyze", str(EXAMPLE), "--store", "postgresql+psycopg://u@h/db"], capsys
    )
    assert code == 2 and out == ""
    assert "pip install 'traceforensics[postgres]'" in err and len(err.strip().splitlines()) == 1


def test_history_help_has_examples_and_exit_codes(capsys: pytest.CaptureFixture[str]) -> None:
    code, out, _ = run_cli(["history", "--help"], capsys)
    text = " ".join(out.split())
    assert code == 0 and "Examples: tf analyze" in text and "tf history --trend" in text
    assert "Exit codes: 0 done; 2 bad input or option" in text
    assert "idle.CAUSE" in text and "busy.KIND" in text and "step_time.iqr" in text


def test_trend_takes_every_fail_on_name_and_refuses_others(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    url = f"sqlite:///{tmp_path / 'h.sqlite'}"
    trace = shared_trace("kineto/resnet50_v100_workers4.pt.trace.json.gz")
    code, out, err = run_cli(["analyze", str(trace), "--json", "--store", url], capsys)
    assert code == 0, err
    figures = analysis_figures(json.loads(out))
    # one per cause (``CAUSES``: the cause table's rows) and 13 others (step, idle, busy, kinds,
    # mfu)
    assert len(figures) == 13 + len(CAUSES)
    for name, want in figures.items():
        code, out, err = run_cli(["history", "--store", url, "--trend", name, "--json"], capsys)
        assert code == 0 and err == "", (name, err)
        (point,) = json.loads(out)["points"]
        assert (point["unit"], point["basis"]) == (want.unit, want.basis), name
        assert point["value"] == written(want.after, want.unit), (name, point)
        assert point["share"] == written(want.share_after, "fraction"), (name, point)
        assert isinstance(point["value"], int) == (want.unit != "fraction"), point  # ns: ints
        code, out, err = run_cli(["history", "--store", url, "--trend", name.upper()], capsys)
        assert code == 0 and out.startswith(f"{name} over 1 run in "), (name, out, err)
    for bad, words in (
        ("idle.nothing", "unknown cause 'nothing'"),
        ("busy.gemm", "unknown busy kind 'gemm'"),
        ("step", "figure 'step': unknown; pass one of step_time, step_time.mean"),
    ):
        code, out, err = run_cli(["history", "--store", url, "--trend", bad], capsys)
        assert code == 2 and out == "", bad
        assert len(err.strip().splitlines()) == 1 and words in err, err


def test_trend_keeps_window_totals_apart(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    url = f"sqlite:///{tmp_path / 'h.sqlite'}"
    doc = analysis_document()
    record_run(doc, url=url, labels={"run": "steps"})
    record_run(doc | {"steps": []}, url=url, labels={"run": "none"})  # window totals
    record_run(doc, url=url, labels={"run": "steps2"})
    code, out, _ = run_cli(["history", "--store", url, "--trend", "idle"], capsys)
    lines = out.splitlines()
    assert code == 0 and "ms/step" in lines[2] and "ms/step" not in lines[3], lines
    assert lines[3].rstrip().endswith("run=none") and "█" not in lines[3]  # no bar
    assert lines[5].startswith("note: run 2: values in another unit (a run without steps")
    assert lines[6].startswith("trend  ▄ ▄  0.0% (")  # run 2 a gap in the sparkline


def test_the_cli_imports_no_database_code_until_a_store_is_used() -> None:
    # every tf command would otherwise pay SQLAlchemy's import (~0.3 s of a 1 s analysis)
    import subprocess
    import sys

    code = (
        "import sys, traceforensics.cli.main, traceforensics.history as h; "
        "print('sqlalchemy' in sys.modules, 'torch' in sys.modules); "
        "h.record_run; print('sqlalchemy' in sys.modules)"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.split() == ["False", "False", "True"]
