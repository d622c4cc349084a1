"""`tf analyze` end to end: every real trace exits 0 and the JSON object keeps its contract."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from tests.conftest import TRACES, kineto_trace_files, nsys_trace_files, run_cli, shared_trace
from tests.json_contract import (
    DEVICE_FIELDS,
    EVIDENCE_FIELDS,
    FINDING_FIELDS,
    GAP_FIELDS,
    OP_FIELDS,
    PROGRAM_FIELDS,
    SHORT_KERNEL_FIELDS,
    STEP_FIELDS,
    TRANSFER_FIELDS,
)
from traceforensics.analysis.findings.results import CATEGORIES
from traceforensics.analysis.idle.causes import CAUSES


def _json(path: Path, capsys: pytest.CaptureFixture[str], *extra: str) -> dict[str, object]:
    code, out, err = run_cli(["analyze", "--json", "--no-cache", *extra, str(path)], capsys)
    assert code == 0, err
    obj = json.loads(out)
    assert isinstance(obj, dict)
    return obj


def _check_contract(obj: dict[str, object]) -> None:
    assert obj["schema"] == "traceforensics.analysis/1"
    inputs = obj["inputs"]
    assert isinstance(inputs, list) and inputs
    assert all({"path", "format", "rank"} <= set(i) for i in inputs)
    devices = obj["devices"]
    assert isinstance(devices, list)
    for d in devices:
        assert set(d) >= DEVICE_FIELDS, DEVICE_FIELDS - set(d)
        assert d["idle_ns"] == d["window_ns"] - d["busy_ns"]
        assert set(d["idle_by_cause"]) == set(CAUSES)
        # the attribution sums exactly to the idle time: no double counting, no remainder
        assert sum(d["idle_by_cause"].values()) == d["idle_ns"]
        most = max(d["idle_by_cause"].values())
        assert (d["top_cause"] is None) == (most == 0)
        if most:
            assert d["idle_by_cause"][d["top_cause"]] == most
        assert 0 <= d["exposed_comm_ns"] <= d["comm_ns"]
        assert {"bin_ms", "start_ns", "values"} <= set(d["utilization"])
    for s in obj["steps"]:  # type: ignore[attr-defined]
        assert set(s) >= STEP_FIELDS
        assert sum(s["idle_by_cause"].values()) == s["idle_ns"]
    for g in obj["gaps"]:  # type: ignore[attr-defined]
        assert set(g) >= GAP_FIELDS
        assert sum(g["causes"].values()) == g["dur_ns"]
    for r in obj["short_kernels"]:  # type: ignore[attr-defined]
        assert set(r) >= SHORT_KERNEL_FIELDS
    for r in obj["ops"]:  # type: ignore[attr-defined]
        assert set(r) >= OP_FIELDS
    assert {"devices", "steps"} <= set(obj["mfu"])  # type: ignore[arg-type]
    _check_findings(obj)


def _check_findings(obj: dict[str, object]) -> None:
    """``findings``: every field, sorted by recoverable time, ids from the one list; each
    device's findings never claim more than its window; transfers add up."""
    assert set(obj["program"]) >= PROGRAM_FIELDS  # type: ignore[arg-type]
    findings: list[dict[str, object]] = obj["findings"]  # type: ignore[assignment]
    # steady findings by recoverable time; one-off work after them while a steady one is
    # not minor (results.ranked)
    major = any(f["category"] != "one_off" and not f["minor"] for f in findings)
    back = [(major and f["category"] == "one_off", -f["recoverable_ns"]) for f in findings]  # type: ignore[operator]
    assert back == sorted(back)
    windows = {(d["rank"], d["device"]): d for d in obj["devices"]}  # type: ignore[attr-defined]
    for f in findings:
        assert set(f) >= FINDING_FIELDS, FINDING_FIELDS - set(f)
        assert f["category"] in CATEGORIES and f["confidence"] in ("high", "medium", "low")
        d = windows[(f["rank"], f["device"])]
        assert 0 < f["recoverable_ns"] <= d["window_ns"]  # type: ignore[operator]
        for e in f["evidence"]:  # type: ignore[attr-defined]
            assert set(e) >= EVIDENCE_FIELDS
        if f["category"] in CAUSES:  # at most the cause's idle time (steady part)
            assert f["recoverable_ns"] <= d["idle_by_cause"][f["category"]]
    for d in obj["devices"]:  # type: ignore[attr-defined]
        # steady idle by cause + the one-off idle = all idle, exactly (issue 44: the one_off
        # finding also holds the one-off copies, so its idle part is its figure)
        mine = [f for f in findings if (f["rank"], f["device"]) == (d["rank"], d["device"])]
        steady = sum(_ns(f["recoverable_ns"]) for f in mine if f["category"] in CAUSES)
        once = sum(_ns(f["figures"], "one_off_idle_ns") for f in mine if f["category"] == "one_off")
        assert steady + once == d["idle_ns"]
    for d in obj["devices"]:  # type: ignore[attr-defined]
        for t in d["transfers"]:
            assert set(t) >= TRANSFER_FIELDS
        assert 0 <= d["exposed_copy_ns"] <= d["copy_ns"] <= d["busy_ns"]


def _ns(value: Any, key: str | None = None) -> int:
    """An integer field of the JSON (``value[key]`` with a key)."""
    return int(value if key is None else value[key])


@pytest.mark.parametrize("rel", kineto_trace_files() + nsys_trace_files())
def test_every_real_trace_analyzes_with_exit_0(
    rel: str, capsys: pytest.CaptureFixture[str]
) -> None:
    obj = _json(shared_trace(rel), capsys)
    _check_contract(obj)
    fmt = {i["format"] for i in obj["inputs"]}  # type: ignore[attr-defined]
    assert fmt == ({"nsys-sqlite"} if rel.endswith(".sqlite") else {"kineto"})


def test_rank_directory_loads_every_rank(capsys: pytest.CaptureFixture[str]) -> None:
    obj = _json(shared_trace("hta/job128_sampled"), capsys)
    assert sorted(i["rank"] for i in obj["inputs"]) == [0, 1]  # type: ignore[attr-defined]
    assert sorted({d["rank"] for d in obj["devices"]}) == [0, 1]  # type: ignore[attr-defined]
    _check_contract(obj)


def test_trace_window_still_sums_exactly(capsys: pytest.CaptureFixture[str]) -> None:
    path = shared_trace("kineto/resnet50_v100_workers0.pt.trace.json.gz")
    dev_obj = _json(path, capsys)
    trace_obj = _json(path, capsys, "--window", "trace")
    (d,) = dev_obj["devices"]  # type: ignore[misc]
    (t,) = trace_obj["devices"]  # type: ignore[misc]
    assert t["busy_ns"] == d["busy_ns"]
    assert t["window_ns"] >= d["window_ns"]
    assert sum(t["idle_by_cause"].values()) == t["idle_ns"] == t["window_ns"] - t["busy_ns"]


def test_text_report_answers_first(capsys: pytest.CaptureFixture[str]) -> None:
    path = shared_trace("kineto/resnet50_v100_workers0.pt.trace.json.gz")
    code, out, _ = run_cli(["analyze", "--no-cache", str(path)], capsys)
    assert code == 0
    sections = [line for line in out.splitlines() if line.startswith("== ")]
    assert sections[0] == "== Verdict =="
    verdict = out.split("== Verdict ==")[1].split("==")[0]
    assert "mostly data_loading" in verdict


def test_markdown_and_plot_outputs(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    example = Path(__file__).resolve().parents[1] / "examples"
    trace = next(example.glob("*.json.gz"))
    md, png = tmp_path / "r.md", tmp_path / "r.png"
    code, _, err = run_cli(
        ["analyze", "--no-cache", "--markdown", str(md), "--plot", str(png), str(trace)], capsys
    )
    assert code == 0, err
    text = md.read_text()
    assert text.startswith("# traceforensics report") and "## Idle time by cause" in text
    assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


def test_cpu_only_trace_says_so(capsys: pytest.CaptureFixture[str]) -> None:
    path = shared_trace("hta/cpu_only_rank34.json.gz")
    code, out, _ = run_cli(["analyze", "--no-cache", str(path)], capsys)
    assert code == 0 and "CPU-only" in out
    assert TRACES.exists()
