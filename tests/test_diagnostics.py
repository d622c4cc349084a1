"""What a trace is (issue 43, item 3): ``diagnostics[]``, the verdict of a trace without GPU
activity, ``analysis_failed``. Every trace is built here (``tools/synth.py``), in both formats
where both can say it: launch calls without GPU rows, an nsys export without CUDA tables, a
CPU-only capture; each answer is checked in the text, Markdown, HTML and JSON reports."""

from __future__ import annotations

import json
import re
import sqlite3
from pathlib import Path
from typing import Any

import pytest

import traceforensics as tf
from synth import SynthTrace
from tests.conftest import nonempty, run_cli
from tests.json_contract import DIAGNOSTIC_FIELDS, HOST_FIELDS
from tests.test_nsys_real import CUDA_TABLES  # a plain list, not the loader's
from traceforensics.analysis import analyze, pipeline
from traceforensics.analysis.diagnostics import CODES, LAUNCH_API_RE
from traceforensics.analysis.findings.glossary import DIAGNOSTIC_GLOSSARY
from traceforensics.ingest import load_path
from traceforensics.ingest.nsys import loader as nsys_loader
from traceforensics.model.errors import InputError
from traceforensics.model.session import TraceSession
from traceforensics.report.json_out import dumps

MS = 1_000_000
DOCS = Path(__file__).resolve().parents[1] / "docs"


def _host_steps(tr: SynthTrace, steps: int = 2) -> SynthTrace:
    """``steps`` ProfilerSteps of 10 ms, each with a 2 ms loader fetch and a 3 ms operator."""
    for i in range(steps):
        t = i * 10 * MS
        tr.cpu_range(f"ProfilerStep#{i}", t, 10 * MS, kind="annotation")
        tr.cpu_range("enumerate(DataLoader)#_SingleProcessDataLoaderIter.__next__", t, 2 * MS)
        tr.cpu_range("aten::linear", t + 3 * MS, 3 * MS)
    return tr


def _lost_gpu(launches: int) -> SynthTrace:
    """Host steps whose ``launches`` launch calls have no GPU row (and one call that is no
    launch)."""
    tr = _host_steps(SynthTrace())
    for i in range(launches):
        tr.api("cudaLaunchKernel", 3 * MS + i * 10_000, 5_000)
    tr.api("cudaMalloc", 9 * MS, 5_000)
    return tr


def _write(tr: SynthTrace, tmp_path: Path, fmt: str, name: str = "t") -> Path:
    if fmt == "kineto":
        return tr.write_kineto(tmp_path / f"{name}.pt.trace.json.gz")
    return tr.write_nsys(tmp_path / f"{name}.sqlite")


def _without_cuda_tables(tr: SynthTrace, tmp_path: Path) -> Path:
    """An nsys export as a capture with CUDA tracing off writes it: no CUDA table at all."""
    path = tr.write_nsys(tmp_path / "no_cuda.sqlite")
    with sqlite3.connect(path) as conn:
        for table in CUDA_TABLES:
            conn.execute(f"DROP TABLE IF EXISTS {table}")
    return path


def _reports(path: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> dict[str, Any]:
    """Text, JSON, Markdown and HTML of ``tf analyze path``."""
    code, text, err = run_cli(["analyze", str(path), "--no-cache"], capsys)
    assert code == 0, err
    code, out, err = run_cli(["analyze", str(path), "--no-cache", "--json"], capsys)
    assert code == 0, err
    md, html = tmp_path / "r.md", tmp_path / "r.html"
    for target in (md, html):
        code, _, err = run_cli(
            ["analyze", str(path), "--no-cache", "--report", str(target)], capsys
        )
        assert code == 0, err
    return {
        "text": text,
        "words": " ".join(text.split()),  # the text's sentences, without its line breaks
        "json": json.loads(out),
        "md": md.read_text(encoding="utf-8"),
        "html": html.read_text(encoding="utf-8"),
    }


def _codes(doc: dict[str, Any]) -> list[str]:
    assert all(set(d) == DIAGNOSTIC_FIELDS for d in doc["diagnostics"])
    return [d["code"] for d in doc["diagnostics"]]


@pytest.mark.parametrize("fmt", ["kineto", "nsys"])
def test_launches_without_gpu_records(
    fmt: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    r = _reports(_write(_lost_gpu(7), tmp_path, fmt), tmp_path, capsys)
    doc = r["json"]
    assert doc["devices"] == [] and _codes(doc) == ["gpu_activity_missing"]
    (warning,) = doc["warnings"]
    assert warning == doc["diagnostics"][0]["message"]
    assert "7 GPU launch calls" in warning and "GPU activity records are missing" in warning
    assert ("-t cuda" in warning) == (fmt == "nsys")
    assert ("ProfilerActivity.CUDA" in warning) == (fmt == "kineto")
    for report in ("words", "md", "html"):
        assert "CPU-only" not in r[report], report
        assert "7 GPU launch calls were recorded but no GPU activity record" in r[report]
        assert "tf explain gpu_activity_missing" in r[report]
    # the host part still says where the steps went
    assert doc["host"]["step_count"] == 2 and doc["host"]["phase_ns"]["data_loading"] == 4 * MS


def test_nsys_export_without_cuda_tables(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    tr = _host_steps(SynthTrace())
    tr.cpu_range("read", 1 * MS, 1 * MS, kind="os_call")
    path = _without_cuda_tables(tr, tmp_path)
    session = load_path(path, use_cache=False)
    assert [d["code"] for d in session.meta.diagnostics] == ["cuda_tables_missing"]
    r = _reports(path, tmp_path, capsys)
    doc = r["json"]
    assert doc["devices"] == [] and _codes(doc) == ["cuda_tables_missing"]
    (warning,) = doc["warnings"]
    assert "no CUDA tables" in warning and "`-t cuda`" in warning and str(path) in warning
    for report in ("words", "md", "html"):
        assert "CPU-only" not in r[report], report
        assert "CUDA tracing was off" in r[report] and "nsys profile -t cuda" in r[report]
    # the same timeline with the (empty) CUDA tables is a CPU-only capture, not this
    doc = analyze(load_path(tr.write_nsys(tmp_path / "cuda_on.sqlite"), use_cache=False)).to_json()
    assert _codes(doc) == ["cpu_only"] and doc["warnings"] == []


@pytest.mark.parametrize("fmt", ["kineto", "nsys"])
def test_cpu_only_capture(fmt: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    r = _reports(_write(_host_steps(SynthTrace(), 3), tmp_path, fmt), tmp_path, capsys)
    doc = r["json"]
    assert doc["devices"] == [] and doc["warnings"] == [] and _codes(doc) == ["cpu_only"]
    host = doc["host"]
    assert set(host) == HOST_FIELDS and host["step_source"] == "profiler_step"
    # per step: 2 ms loading, 3 ms of operator (the forward pass), 5 ms nothing recorded
    assert host["step_count"] == 3 and host["step_ns"] == 30 * MS
    assert host["phase_ns"] == {
        "data_loading": 6 * MS,
        "forward": 9 * MS,
        "backward": 0,
        "optimizer": 0,
        "other": 15 * MS,
    }
    assert "No GPU activity in this trace (CPU-only)" in r["text"]
    assert re.search(r"^  data loading +2\.00 ms +20\.0%$", r["text"], re.M), r["text"]
    assert "- data loading: 2.00 ms per step (20.0%)" in r["md"]
    assert "## Host time per step" in r["md"] and "|" not in r["md"]
    assert "<h2>Host time per step</h2>" in r["html"] and "<td class='n'>20.0%</td>" in r["html"]


def test_gpu_trace_has_no_host_section(tmp_path: Path) -> None:
    tr = _host_steps(SynthTrace())
    tr.launch("gemm_kernel", 3 * MS, 10_000, 3 * MS + 20_000, 1 * MS)
    doc = analyze(load_path(tr.write_kineto(tmp_path / "g.json.gz"), use_cache=False)).to_json()
    assert doc["devices"] and doc["host"] is None and doc["diagnostics"] == []


def test_every_warning_is_a_diagnostic_with_its_text(tmp_path: Path) -> None:
    """Coded or not, each warning string is the message of one diagnostic, in order."""
    tr = _host_steps(SynthTrace())
    tr.launch("gemm_kernel", 3 * MS, 10_000, 3 * MS + 20_000, 1 * MS)
    path = tr.write_nsys(tmp_path / "open.sqlite")
    with sqlite3.connect(path) as conn:  # an NVTX range that never ended
        conn.execute(
            "INSERT INTO NVTX_EVENTS (start, end, eventType, text, globalTid, domainId) "
            "SELECT 1000, NULL, eventType, 'never ended', globalTid, domainId "
            "FROM NVTX_EVENTS LIMIT 1"
        )
    res = analyze(load_path(path, use_cache=False))
    assert [d.message for d in res.diagnostics] == res.warnings
    assert [d.code for d in res.diagnostics] == ["nvtx_ranges_open"]


def test_codes_are_listed_explained_and_documented() -> None:
    # the loader's constants spelled like a code (``NSYS_DATA_LOST = "nsys_data_lost"``)
    born_in_nsys = {
        v
        for k, v in vars(nsys_loader).items()
        if k.isupper() and isinstance(v, str) and re.fullmatch(r"[a-z]+(_[a-z]+)+", v)
    }
    assert len(born_in_nsys) == 6 and born_in_nsys <= set(CODES)
    assert tuple(DIAGNOSTIC_GLOSSARY) == CODES
    doc = (DOCS / "json-output.md").read_text(encoding="utf-8")
    for code in CODES:
        assert f"`{code}`" in doc, code
        assert all(DIAGNOSTIC_GLOSSARY[code]), code


@pytest.mark.parametrize(
    ("name", "is_launch"),
    [
        ("cudaLaunchKernel", True),
        ("cuLaunchKernelEx", True),
        ("cudaLaunchKernel_v7000", True),
        ("cudaGraphLaunch", True),
        ("hipModuleLaunchKernel", True),
        ("hipExtModuleLaunchKernel", True),
        ("cudaMalloc", False),
        ("cudaMemcpyAsync", False),
        ("aten::launch", False),
    ],
)
def test_launch_names(name: str, is_launch: bool) -> None:
    assert bool(re.search(LAUNCH_API_RE, name)) == is_launch


def test_explain_a_code(capsys: pytest.CaptureFixture[str]) -> None:
    code, out, _ = run_cli(["explain", "gpu_activity_missing"], capsys)
    assert code == 0 and out.startswith("gpu_activity_missing: ")
    assert "ProfilerActivity.CUDA" in out and "detected:" in out
    code, out, _ = run_cli(["explain", "cuda_tables_missing"], capsys)
    assert code == 0 and "-t cuda" in out


# ----------------------------------------------------------------------- analysis_failed
def _broken(ctx: Any) -> Any:
    raise RuntimeError("boom\nsecond line")


def _gpu_trace(tmp_path: Path) -> TraceSession:
    tr = _host_steps(SynthTrace())
    tr.launch("gemm_kernel", 3 * MS, 10_000, 3 * MS + 20_000, 1 * MS)
    tr.launch("gemm_kernel", 13 * MS, 10_000, 13 * MS + 20_000, 1 * MS)
    return load_path(tr.write_kineto(tmp_path / "g.json.gz"), use_cache=False)


def test_a_failing_pass_is_a_warning_and_the_rest_stands(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    session = _gpu_trace(tmp_path)
    whole = analyze(session)
    monkeypatch.setattr(pipeline, "RAISE_FAILED", False)
    monkeypatch.setitem(pipeline.PASSES, "kernels", _broken)
    res = analyze(session)
    (warning,) = res.warnings
    assert "the kernels analysis failed" in warning and "RuntimeError: boom second line" in warning
    assert [(d.code, d.message) for d in res.diagnostics] == [("analysis_failed", warning)]
    # the other passes' results are whole: the idle part is what it is without the failure
    assert res.idle == whole.idle and res.kernels.kernel_count == 0
    assert [d.busy_ns for d in res.devices] == [d.busy_ns for d in whole.devices]
    assert nonempty(res.devices)
    doc = res.to_json()
    assert doc["warnings"] == [warning] and doc["diagnostics"][0]["code"] == "analysis_failed"


def test_the_suite_can_make_a_failing_pass_raise(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    session = _gpu_trace(tmp_path)
    monkeypatch.setattr(pipeline, "RAISE_FAILED", True)
    monkeypatch.setitem(pipeline.PASSES, "idle", _broken)
    with pytest.raises(RuntimeError, match="boom"):
        analyze(session)


def test_an_input_error_in_a_pass_is_still_an_input_error(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    def wrong_input(ctx: Any) -> Any:
        raise InputError("x.json: what is wrong; what to do")

    session = _gpu_trace(tmp_path)
    monkeypatch.setattr(pipeline, "RAISE_FAILED", False)
    monkeypatch.setitem(pipeline.PASSES, "utilization", wrong_input)
    with pytest.raises(InputError, match="what to do"):
        analyze(session)


def test_session_cache_keeps_the_diagnostics(tmp_path: Path) -> None:
    session = load_path(_without_cuda_tables(_host_steps(SynthTrace()), tmp_path), use_cache=False)
    session.save(tmp_path / "saved")
    back = TraceSession.load(tmp_path / "saved")
    assert back.meta.diagnostics == session.meta.diagnostics
    assert [d["code"] for d in back.meta.diagnostics] == ["cuda_tables_missing"]


def test_nsys_ranks_without_cuda_tables_together_and_apart(tmp_path: Path) -> None:
    """Each rank's export says it (the joint loader and the merge carry every rank's)."""
    for rank in (0, 1):
        tr = _host_steps(SynthTrace(rank=rank, pid=100 + rank))
        _without_cuda_tables(tr, tmp_path).rename(tmp_path / f"rank{rank}.sqlite")
    joint = json.loads(dumps(tf.analyze(tmp_path).to_json()))
    apart = json.loads(dumps(tf.analyze(tmp_path, jobs=2).to_json()))
    for doc in (joint, apart):
        assert _codes(doc) == ["cuda_tables_missing"] * 2 and doc["devices"] == []
        assert [d["message"] for d in doc["diagnostics"]] == doc["warnings"]
        assert [str(tmp_path / f"rank{r}.sqlite") in w for r, w in enumerate(doc["warnings"])] == [
            True,
            True,
        ]
    assert apart["diagnostics"] == joint["diagnostics"] and apart["host"] == joint["host"]
    assert joint["host"]["step_count"] == 4
