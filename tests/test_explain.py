"""``tf explain`` (issue 13, item 4: a glossary of causes): every cause and finding category has
a meaning, a detection rule and a remedy; unknown ids are refused with the list."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.conftest import run_cli
from traceforensics.analysis.findings.glossary import GLOSSARY
from traceforensics.analysis.findings.results import CATEGORIES


def test_every_category_is_explained() -> None:
    assert tuple(GLOSSARY) == CATEGORIES
    assert all(e.meaning and e.detection for e in GLOSSARY.values())


def test_list_and_one_entry(capsys: pytest.CaptureFixture[str]) -> None:
    code, out, _ = run_cli(["explain"], capsys)
    assert code == 0 and [line.split()[0] for line in out.splitlines()] == list(CATEGORIES)
    code, out, _ = run_cli(["explain", "Host_Sync"], capsys)
    assert code == 0
    assert out.startswith("host_sync: ") and "detected:" in out
    assert "what to do (PyTorch): remove host syncs" in out


def test_unknown_id_is_one_line(capsys: pytest.CaptureFixture[str]) -> None:
    code, out, err = run_cli(["explain", "gpu_bored"], capsys)
    lines = err.strip().splitlines()
    assert code == 2 and out == "" and len(lines) == 1
    assert "not a cause or finding category; pass one of data_loading" in lines[0]


def test_help_shows_examples_and_exit_codes(capsys: pytest.CaptureFixture[str]) -> None:
    code, out, _ = run_cli(["--help"], capsys)
    assert code == 0
    assert "tf explain host_sync" in out
    assert "Exit codes: 0 done; 1 a --fail-on rule broke" in out and "2 bad input" in out
    for line in out.split("Commands:")[1].splitlines():
        assert not line.rstrip().endswith("..."), line  # no description cut mid-sentence


def test_sections_choose_what_follows_the_verdict(capsys: pytest.CaptureFixture[str]) -> None:
    from tests.conftest import ROOT

    example = ROOT / "examples" / "synthetic_training.pt.trace.json.gz"
    code, out, _ = run_cli(["analyze", "--no-cache", str(example), "--sections", "steps"], capsys)
    assert code == 0
    assert [ln for ln in out.splitlines() if ln.startswith("== ")] == [
        "== Verdict ==",
        "== Steps ==",
    ]
    code, out, _ = run_cli(["analyze", "--no-cache", str(example)], capsys)
    lines = out.splitlines()
    # the verdict and the first three findings fit on one 30-line screen; the investigation
    # (issue 47: the method's walk, the evidence one step below) follows them
    heads = [ln for ln in lines if ln.startswith("== ")]
    assert heads[:3] == [
        "== Verdict ==",
        "== Findings (largest time to give back first) ==",
        heads[2],
    ]
    assert heads[2].startswith("== Investigation")
    end = lines.index(heads[2])
    assert end <= 30 and sum(ln.startswith("#") for ln in lines[:end]) == 3
    code, out, err = run_cli(["analyze", "--no-cache", str(example), "--sections", "nope"], capsys)
    assert code == 2 and "unknown section nope" in err


def test_verdict_notes_time_before_the_first_gpu_work(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """--window device starts at the first kernel: a long start-up before it is said, with the
    flag that counts it (issue 13)."""
    events = [{"ph": "X", "cat": "cpu_op", "name": "load_model", "pid": 1, "tid": 1, "ts": 0.0,
               "dur": 50_000.0}]  # fmt: skip
    for i in range(5):
        ts = 60_000.0 + 1_000 * i
        events += [
            {"ph": "X", "cat": "cuda_runtime", "name": "cudaLaunchKernel", "pid": 1, "tid": 1,
             "ts": ts, "dur": 5.0, "args": {"correlation": i}},
            {"ph": "X", "cat": "kernel", "name": "k", "pid": 0, "tid": 7, "ts": ts + 10,
             "dur": 500.0, "args": {"device": 0, "stream": 7, "correlation": i}},
        ]  # fmt: skip
    trace = tmp_path / "t.json"
    trace.write_text(json.dumps({"traceEvents": events}))
    code, out, _ = run_cli(["analyze", "--no-cache", str(trace)], capsys)
    assert code == 0
    assert "note: the 60.01 ms of the trace before this GPU's first work" in out
    code, out, _ = run_cli(["analyze", "--no-cache", "--window", "trace", str(trace)], capsys)
    assert code == 0 and "before this GPU's first work" not in out
