"""rocprof Chrome traces (issue 43): built by tools/make_rocprof_fixture.py, read by
``ingest.rocprof``; other producers' Chrome JSON is refused by name. Expectations come from the
generator's capture or from the file itself, read here with the ``json`` module alone."""

from __future__ import annotations

import gzip
import importlib.util
import json
import shutil
from pathlib import Path
from types import ModuleType
from typing import Any

import polars as pl
import pytest

from tests.conftest import FIXTURES, ROOT, kineto_trace_files, nonempty, plain_union, run_cli
from traceforensics.ingest import load_path
from traceforensics.ingest.readers import sniff_file
from traceforensics.model.errors import UnsupportedFormatError

ROCPROF = FIXTURES / "rocprof"
FILES = {"v1": ROCPROF / "v1_results.json", "v2": ROCPROF / "v2_output.json"}


def _generator() -> ModuleType:
    spec = importlib.util.spec_from_file_location(
        "make_rocprof_fixture", ROOT / "tools" / "make_rocprof_fixture.py"
    )
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


GEN = _generator()


def _analyze(path: Path, capsys: pytest.CaptureFixture[str]) -> dict[str, Any]:
    code, out, err = run_cli(["analyze", str(path), "--json", "--no-cache"], capsys)
    assert code == 0, err
    doc: dict[str, Any] = json.loads(out)
    return doc


def _file_ops(path: Path) -> list[tuple[str, int, int]]:
    """``(name, start_ns, end_ns)`` of the GPU ops the file holds, read without the tool: the
    events on the processes labelled GPU*/COPY (v1: exact ``BeginNs``/``EndNs``; else µs)."""
    text = json.loads(path.read_text())
    labels = {e["pid"]: e["args"]["name"] for e in text["traceEvents"] if e.get("ph") == "M"}
    ops = []
    for e in text["traceEvents"]:
        label = labels.get(e.get("pid"), "")
        if e.get("ph") != "X" or not (label.startswith("GPU") or label == "COPY"):
            continue
        if "Barriers" in label:
            continue
        args = e.get("args", {})
        if "BeginNs" in args:
            ops.append((e["name"], int(args["BeginNs"]), int(args["EndNs"])))
        else:
            start = int(e["ts"]) * 1000
            ops.append((e["name"], start, start + int(e["dur"]) * 1000))
    return ops


def test_committed_fixtures_match_the_generator(tmp_path: Path) -> None:
    GEN.main(["make", str(tmp_path)])
    for path in FILES.values():
        assert (tmp_path / path.name).read_bytes() == path.read_bytes(), path.name


@pytest.mark.parametrize("version", sorted(FILES))
def test_a_rocprof_trace_reads_as_one_amd_gpu(
    version: str, capsys: pytest.CaptureFixture[str]
) -> None:
    path = FILES[version]
    assert sniff_file(path) == "rocprof"
    doc = _analyze(path, capsys)
    assert doc["source_format"] == "rocprof"
    assert [(i["format"], i["format_version"]) for i in doc["inputs"]] == [("rocprof", version)]
    assert doc["program"]["vendor"] == "amd" and doc["program"]["framework"] == "hip"
    (device,) = doc["devices"]
    ops = nonempty(_file_ops(path))
    assert (device["kernel_count"], device["memcpy_count"]) == (1, 6)
    assert len(ops) == 7  # the file itself holds what the capture holds
    union = plain_union([(s, e) for _, s, e in ops])
    assert device["busy_ns"] == sum(e - s for s, e in union)
    assert device["window_ns"] == max(e for _, _, e in ops) - min(s for _, s, _ in ops)
    assert sum(device["idle_by_cause"].values()) == device["idle_ns"]
    directions = {t["direction"]: t["count"] for t in device["transfers"]}
    assert directions == {"h2d": 3, "d2h": 2, "d2d": 1}
    # the D2D copy runs beside the kernel on its own stream: the union is less than the sum
    assert device["busy_ns"] < sum(e - s for _, s, e in ops)
    assert device["stream_count"] == 2
    assert not doc["warnings"]


def test_v1_names_its_gpu_from_rocminfo() -> None:
    (v1,) = load_path(FILES["v1"]).meta.devices
    want = ("AMDInstinctMI210", 104, 1_700_000, "amd")
    assert (v1.name, v1.sm_count, v1.clock_khz, v1.vendor) == want
    (v2,) = load_path(FILES["v2"]).meta.devices
    assert (v2.name, v2.vendor) == ("unknown", "amd")


@pytest.mark.parametrize("version", sorted(FILES))
def test_every_gpu_op_links_to_the_call_that_queued_it(version: str) -> None:
    from traceforensics.analysis.context import prepare

    session = load_path(FILES[version])
    ctx = prepare(session)
    events = session.events
    calls = events.filter(pl.col("kind") == "cuda_api").select(
        pl.col("event_id").alias("api_id"), pl.col("name").cast(pl.String).alias("call")
    )
    linked = ctx.work.select("event_id", "api_id", "start_ns").join(calls, on="api_id", how="left")
    ops = events.filter(pl.col("kind").is_in(["kernel", "memcpy"])).select(
        "event_id", pl.col("name").cast(pl.String)
    )
    got = dict(linked.join(ops, on="event_id").select("name", "call").iter_rows())
    # the capture: op i was queued by call i (the generator's own rows, not the file)
    want = {op: call for call, _, _, op, *_ in GEN.CAPTURE if op is not None}
    assert got == want
    assert linked.get_column("api_id").null_count() == 0
    # each call queued one op: no op is linked to another's call
    assert linked.get_column("api_id").n_unique() == linked.height == 7


def test_v1_copies_carry_the_bytes_their_call_names(capsys: pytest.CaptureFixture[str]) -> None:
    want: dict[str, int] = {}
    for index, (_, _, _, op, *_) in enumerate(GEN.CAPTURE):
        if op and op.startswith("Copy"):
            direction = {"HostToDevice": "h2d", "DeviceToHost": "d2h"}.get(op[4:], "d2d")
            want[direction] = want.get(direction, 0) + GEN.SIZES[index]
    (device,) = _analyze(FILES["v1"], capsys)["devices"]
    assert {t["direction"]: t["bytes"] for t in device["transfers"]} == want
    # v2 writes no call arguments: no bytes, rather than invented ones
    assert load_path(FILES["v2"]).events.get_column("bytes").null_count() == 16


def test_the_sync_flow_of_v1_links_nothing() -> None:
    # v1's call-to-hipStreamSynchronize flow ends on lanes without a row there
    events = load_path(FILES["v1"]).events
    sync = events.filter(pl.col("name").cast(pl.String) == "hipStreamSynchronize")
    assert sync.get_column("correlation").to_list() == [None]


def test_the_producer_is_read_from_the_file_not_its_name(tmp_path: Path) -> None:
    named = tmp_path / "host_1.pt.trace.json"
    shutil.copy(FILES["v1"], named)
    assert sniff_file(named) == "rocprof"
    packed = tmp_path / "results.json.gz"
    packed.write_bytes(gzip.compress(FILES["v2"].read_bytes()))
    assert sniff_file(packed) == "rocprof"
    assert load_path(packed).events.height == load_path(FILES["v2"]).events.height


@pytest.mark.parametrize("rel", kineto_trace_files())
def test_kineto_traces_still_sniff_as_kineto(rel: str) -> None:
    from tests.conftest import shared_trace

    assert sniff_file(shared_trace(rel)) == "kineto"


def _write(tmp_path: Path, doc: Any, name: str = "trace.json") -> Path:
    path = tmp_path / name
    path.write_text(json.dumps(doc))
    return path


def _refused(path: Path, capsys: pytest.CaptureFixture[str]) -> str:
    code, out, err = run_cli(["analyze", str(path), "--no-cache"], capsys)
    assert (code, out) == (2, "")
    lines = err.strip().splitlines()
    assert len(lines) == 1 and "Traceback" not in err
    assert str(path) in lines[0]
    return lines[0]


def test_another_tools_chrome_trace_is_refused_naming_it(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    lane = {"pid": 1, "tid": 2}
    browser = {
        "traceEvents": [
            {"name": "thread_name", "ph": "M", "args": {"name": "CrBrowserMain"}} | lane,
            {"name": "RunTask", "cat": "toplevel", "ph": "X", "ts": 10, "dur": 5} | lane,
            {"name": "v8.compile", "cat": "v8", "ph": "X", "ts": 12, "dur": 2} | lane,
        ]
    }
    line = _refused(_write(tmp_path, browser), capsys)
    assert "another tool" in line and "toplevel" in line
    with pytest.raises(UnsupportedFormatError):
        sniff_file(_write(tmp_path, browser["traceEvents"], "array.json"))
    bare = {"traceEvents": [{"name": "work", "ph": "X", "ts": 1, "dur": 2, "pid": 1, "tid": 1}]}
    assert "no event categories" in _refused(_write(tmp_path, bare, "bare.json"), capsys)


def test_rocprofv3_json_is_refused_naming_it(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    doc = {"rocprofiler-sdk-tool": [{"metadata": {"pid": 1}, "agents": [], "buffer_records": {}}]}
    assert "rocprofv3" in _refused(_write(tmp_path, doc), capsys)


def test_a_cut_rocprof_file_is_one_line(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    text = FILES["v1"].read_bytes()
    cut = tmp_path / "results.json"
    cut.write_bytes(text[: len(text) // 2])
    assert sniff_file(cut) == "rocprof"
    assert "rocprof" in _refused(cut, capsys)


def test_copies_that_name_no_gpu_are_placed_and_said(tmp_path: Path) -> None:
    doc = GEN.v2_document()
    one = load_path(_write(tmp_path, doc, "one.json"))
    assert one.events.filter(pl.col("kind") == "memcpy").get_column("device").to_list() == [0] * 6
    assert not one.meta.warnings
    # a second agent's kernel: the copies (COPY lane, no agent) cannot be told apart
    kernel = next(e for e in doc["traceEvents"] if e.get("cat") == "GPU")
    doc["traceEvents"].append(kernel | {"tid": 3, "args": {"cid": 999}})
    two = load_path(_write(tmp_path, doc, "two.json"))
    assert sorted({d.device for d in two.meta.devices}) == [0, 2]
    copies = two.events.filter(pl.col("kind") == "memcpy")
    assert copies.get_column("device").unique().to_list() == [0]
    (warning,) = two.meta.warnings
    assert "6 GPU operations name no GPU" in warning and "2 GPUs" in warning


def test_events_on_unnamed_processes_are_left_out_and_said(tmp_path: Path) -> None:
    doc = GEN.v2_document()
    doc["traceEvents"].append({"name": "x", "ph": "X", "pid": 77, "tid": 1, "ts": "5", "dur": "1"})
    session = load_path(_write(tmp_path, doc))
    assert session.events.height == load_path(FILES["v2"]).events.height
    assert any("1 events on processes rocprof does not name" in w for w in session.meta.warnings)


def test_a_directory_of_rocprof_traces_is_refused_not_misread(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    for path in FILES.values():
        shutil.copy(path, tmp_path / path.name)
    line = _refused(tmp_path, capsys)
    assert "2 rocprof trace(s)" in line and "pass each file alone" in line


def _lane(label: str, pid: int) -> dict[str, Any]:
    return {"args": {"name": label}, "ph": "M", "pid": pid, "name": "process_name"}


@pytest.mark.parametrize(
    ("event", "kernels", "said"),
    [
        ({"ts": "10", "dur": "5"}, 1, None),
        ({"ts": "1e300", "dur": "5"}, 0, "1 events without a readable ts/dur were left out"),
        ({"ts": "99999999999999999999999", "dur": "5"}, 0, "without a readable ts/dur"),
        ({"ts": "abc", "dur": "5"}, 0, "without a readable ts/dur"),
        ({"args": {"BeginNs": "20", "EndNs": "10"}}, 1, "1 events ended before they began"),
    ],
)
def test_damaged_times_cost_their_event_and_are_said(
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
    event: dict[str, Any],
    kernels: int,
    said: str | None,
) -> None:
    row = {"ph": "X", "name": "k", "pid": 6, "tid": 1} | event
    path = _write(tmp_path, {"traceEvents": [{}, _lane("GPU0", 6), row]})
    doc = _analyze(path, capsys)
    assert sum(d["kernel_count"] for d in doc["devices"]) == kernels
    if said is None:
        assert doc["warnings"] == []
    else:
        assert any(said in w for w in doc["warnings"]), doc["warnings"]
    if not kernels:  # nothing on a GPU is said, not shown as an idle or CPU-only trace
        assert any("no kernel or copy" in w for w in doc["warnings"])


def test_a_cached_rocprof_session_is_the_one_read(tmp_path: Path) -> None:
    path = tmp_path / FILES["v1"].name
    shutil.copy(FILES["v1"], path)
    fresh = load_path(path, use_cache=True)  # (the tests' private cache: written here)
    again = load_path(path, use_cache=True)  # read back from the cache
    assert again.meta.source_format == "rocprof"
    assert again.events.equals(fresh.events) and fresh.events.height == 17


def test_a_hand_made_kineto_trace_without_top_keys_is_still_kineto(tmp_path: Path) -> None:
    # one Kineto category is enough: the refusal is for traces with none at all
    rows = [
        {"ph": "X", "cat": "kernel", "name": "k", "pid": 0, "tid": 7, "ts": 1, "dur": 2},
        {"ph": "X", "cat": "my_tool", "name": "x", "pid": 1, "tid": 1, "ts": 1, "dur": 2},
    ]
    assert sniff_file(_write(tmp_path, {"traceEvents": rows})) == "kineto"
    assert sniff_file(_write(tmp_path, {"traceEvents": []}, "empty.json")) == "kineto"
