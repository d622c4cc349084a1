"""``tf diff`` on real traces: the shared ResNet-50 ``num_workers`` 0 -> 4 pair (issue 15's
acceptance), cross-checked against the two analyses' own ``steps[]``; mixed formats; rank
directories; the reports; ``--baseline`` (monkeypatched, then through the history store)."""

from __future__ import annotations

import json
import statistics
from pathlib import Path
from typing import Any

import pytest

from tests.conftest import FIXTURES, run_cli, shared_trace

W0 = "kineto/resnet50_v100_workers0.pt.trace.json.gz"
W4 = "kineto/resnet50_v100_workers4.pt.trace.json.gz"
Docs = dict[str, Any]


def _cli_json(argv: list[str], capsys: pytest.CaptureFixture[str]) -> dict[str, Any]:
    code, out, err = run_cli([*argv, "--json"], capsys)
    assert code == 0, err
    return dict(json.loads(out))


@pytest.fixture(scope="module")
def real(tmp_path_factory: pytest.TempPathFactory) -> Docs:
    """The two analyses (as tf analyze --json writes them) and the diff both ways."""
    from click.testing import CliRunner

    from traceforensics.cli.main import cli

    w0, w4 = str(shared_trace(W0)), str(shared_trace(W4))
    out = tmp_path_factory.mktemp("real")
    docs: Docs = {"w0": w0, "w4": w4, "dir": out}
    runner = CliRunner()
    for key, argv in {
        "a0": ["analyze", w0],
        "a4": ["analyze", w4],
        "fwd": ["diff", w0, w4],
        "rev": ["diff", w4, w0],
    }.items():
        result = runner.invoke(cli, [*argv, "--json"])
        assert result.exit_code == 0, result.output
        (out / f"{key}.json").write_text(result.stdout)
        docs[key] = json.loads(result.stdout)
    return docs


def _per_step(doc: dict[str, Any], cause: str) -> float:
    """Mean per-step idle of a cause, read straight from ``steps[]`` (the reference)."""
    rows = doc["steps"]
    return sum(s["idle_by_cause"][cause] for s in rows) / len(rows)


def test_data_loading_falls_by_more_than_90_percent(real: Docs) -> None:
    fig = real["fwd"]["job"]["figures"]["idle.data_loading"]
    want_b, want_a = _per_step(real["a0"], "data_loading"), _per_step(real["a4"], "data_loading")
    assert fig["before"] == round(want_b) and fig["after"] == round(want_a)
    assert fig["unit"] == "ns/step" and fig["basis"] == "per_step"
    assert fig["delta_pct"] == pytest.approx(100 * (want_a - want_b) / want_b, abs=0.01)
    assert fig["delta_pct"] < -90 and fig["within_noise"] is False
    verdict = real["fwd"]["verdict"]
    assert verdict["outcome"] == "worked" and verdict["targeted_cause"] == "data_loading"
    assert "data_loading idle" in verdict["text"] and "the change worked" in verdict["text"]
    # the largest loss now is AFTER's first finding
    assert verdict["largest_loss_after"]["category"] == real["a4"]["findings"][0]["category"]


def test_step_time_and_mfu_match_the_analyses(real: Docs) -> None:
    figs = real["fwd"]["job"]["figures"]
    for key, doc_key in (("before", "a0"), ("after", "a4")):
        durs = [s["dur_ns"] for s in real[doc_key]["steps"]]
        assert figs["step_time"][key] == round(statistics.median(durs))
        assert figs["step_time.mean"][key] == round(statistics.fmean(durs))
        assert figs["mfu"][key] == pytest.approx(real[doc_key]["devices"][0]["mfu"], abs=1e-6)
        dev = real[doc_key]["devices"][0]
        assert figs["idle"][f"share_{key}"] == pytest.approx(dev["idle_ns"] / dev["window_ns"])
    assert figs["step_time"]["delta_pct"] < -20 and figs["step_time"]["within_noise"] is False


def test_reverse_direction_made_it_worse_and_breaks_the_gate(
    real: Docs, capsys: pytest.CaptureFixture[str]
) -> None:
    assert real["rev"]["verdict"]["outcome"] == "worse"
    code, out, err = run_cli(
        ["diff", real["w4"], real["w0"], "--fail-on", "idle.data_loading>+20%"], capsys
    )
    assert code == 1
    lines = err.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("tf: fail-on: idle.data_loading +")
    assert "ms/step) > +20%" in lines[0]
    assert out.startswith("traceforensics diff")
    code, _, err = run_cli(
        ["diff", real["w0"], real["w4"], "--fail-on", "idle.data_loading>+20%"], capsys
    )
    assert code == 0 and err == ""


def test_text_and_reports(real: Docs, capsys: pytest.CaptureFixture[str]) -> None:
    md, html = real["dir"] / "d.md", real["dir"] / "d.html"
    code, out, _ = run_cli(["diff", real["w0"], real["w4"]], capsys)
    assert code == 0
    sections = [ln for ln in out.splitlines() if ln.startswith("== ")]
    assert sections[0] == "== Verdict ==" and sections[1].startswith("== Idle time by cause")
    verdict = real["fwd"]["verdict"]["text"]
    assert " ".join(out.split()).count(verdict) == 1
    for path in (md, html):
        code, _, err = run_cli(["diff", real["w0"], real["w4"], "--report", str(path)], capsys)
        assert code == 0, err
    text = md.read_text()
    assert text.index("## Verdict") < text.index("## Idle time by cause") and verdict in text
    page = html.read_text()
    assert "<!DOCTYPE html>" in page and "the change worked" in page
    assert "<float" not in page and "&lt;float" in page  # kernel names escaped


def test_a_saved_analysis_compares_like_its_trace(
    real: Docs, capsys: pytest.CaptureFixture[str]
) -> None:
    saved = real["dir"] / "a0.json"  # tf analyze --json of workers0
    obj = _cli_json(["diff", str(saved), real["w4"]], capsys)
    assert obj["job"] == real["fwd"]["job"] and obj["findings"] == real["fwd"]["findings"]
    assert obj["before"]["label"] == str(saved)


def test_mixed_formats_kineto_against_nsys(real: Docs, capsys: pytest.CaptureFixture[str]) -> None:
    nsys = FIXTURES / "nsys" / "modern.sqlite"
    obj = _cli_json(["diff", real["w4"], str(nsys)], capsys)
    assert obj["before"]["source_format"] == "kineto" and obj["after"]["source_format"] == "nsys"
    devices = {(d["rank"], d["device"]) for d in real["a4"]["devices"]}
    for u in obj["unmatched"]:  # whatever the export holds beyond rank 0 GPU 0 is named
        assert (u["rank"], u["device"]) not in devices and u["side"] == "after"
    assert [(d["rank"], d["device"]) for d in obj["devices"]] == [(0, 0)]


@pytest.fixture(scope="module")
def rank_dirs(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path]:
    import synth_ranks

    out = tmp_path_factory.mktemp("ranks")
    for name, cause in (("slow", "data_loading"), ("fixed", None)):
        synth_ranks.generate_job(
            out / name, ranks=2, steps=6, fmt="kineto", straggler_rank=1, cause=cause
        )
    return out / "slow", out / "fixed"


def test_rank_directories(rank_dirs: tuple[Path, Path], capsys: pytest.CaptureFixture[str]) -> None:
    slow, fixed = rank_dirs
    a_slow = _cli_json(["analyze", str(slow), "--jobs", "1"], capsys)
    a_fixed = _cli_json(["analyze", str(fixed), "--jobs", "1"], capsys)
    obj = _cli_json(["diff", str(slow), str(fixed), "--jobs", "1"], capsys)
    keys = [(d["rank"], d["device"]) for d in a_fixed["devices"]]
    assert len(keys) == 2 and [(d["rank"], d["device"]) for d in obj["devices"]] == keys
    assert obj["unmatched"] == []
    # the job's per-step data loading: every device's per-step mean, summed
    for key, doc in (("before", a_slow), ("after", a_fixed)):
        want = 0.0
        for k in keys:
            rows = [s for s in doc["steps"] if (s["rank"], s["device"]) == k]
            want += sum(s["idle_by_cause"]["data_loading"] for s in rows) / len(rows)
        assert obj["job"]["figures"]["idle.data_loading"][key] == pytest.approx(want, abs=1)
    assert obj["verdict"]["outcome"] == "worked"
    assert obj["verdict"]["targeted_cause"] == "data_loading"


def test_baseline_from_a_monkeypatched_store(
    real: Docs, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    seen: list[tuple[str, str | None]] = []

    def fake(selector: str, url: str | None = None) -> dict[str, Any]:
        seen.append((selector, url))
        return dict(real["a0"])

    monkeypatch.setattr("traceforensics.history.find_baseline", fake, raising=False)
    obj = _cli_json(
        ["diff", "--baseline", "run=w0", "--store-url", "sqlite:///x.db", real["w4"]], capsys
    )
    assert seen == [("run=w0", "sqlite:///x.db")]
    assert obj["before"]["label"] == "baseline run=w0"
    assert obj["job"] == real["fwd"]["job"]
    # one path with --baseline; two without
    code, out, err = run_cli(["diff", "--baseline", "run=w0", real["w0"], real["w4"]], capsys)
    assert code == 2 and out == "" and len(err.strip().splitlines()) == 1
    code, _, err = run_cli(["diff", real["w4"]], capsys)
    assert code == 2 and "BEFORE AFTER" in err


def test_baseline_from_the_history_store(
    real: Docs, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    history = pytest.importorskip("traceforensics.history")
    url = f"sqlite:///{tmp_path / 'runs.db'}"
    history.record_run(real["a0"], url=url, labels={"run": "workers0"}, inputs=[real["w0"]])
    obj = _cli_json(["diff", "--baseline", "run=workers0", "--store-url", url, real["w4"]], capsys)
    assert (
        obj["job"]["figures"]["idle.data_loading"]
        == real["fwd"]["job"]["figures"]["idle.data_loading"]
    )
    code, out, err = run_cli(
        ["diff", "--baseline", "run=nothing", "--store-url", url, real["w4"]], capsys
    )
    assert code == 2 and out == "" and len(err.strip().splitlines()) == 1
