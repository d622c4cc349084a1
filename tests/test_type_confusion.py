"""Type-confused fields (issue 10): one bad field costs that field (unknown FLOPs, a dropped
range, a missing device name, a warning), never the analysis: each case ends with exit 0, or
exit 2 and one line, never an internal error, and the input is left as it was."""

from __future__ import annotations

import json
import shutil
import sqlite3
from pathlib import Path

import pytest

from tests.conftest import FIXTURES, run_cli

NSYS_MUTATIONS = {
    "schema version text": "UPDATE META_DATA_EXPORT SET value='x.y' "
    "WHERE name='EXPORT_SCHEMA_VERSION'",
    "schema version superscript": "UPDATE META_DATA_EXPORT SET value='²' "
    "WHERE name='EXPORT_SCHEMA_VERSION'",
    "session start text": "UPDATE TARGET_INFO_SESSION_START_TIME SET utcEpochNs='soon'",
    "nvtx end text": "UPDATE NVTX_EVENTS SET end='later' "
    "WHERE rowid=(SELECT min(rowid) FROM NVTX_EVENTS)",
    "clock rate blob": "UPDATE TARGET_INFO_GPU SET clockRate=x'DEADBEEF'",
    "sm count text": "UPDATE TARGET_INFO_GPU SET smCount='many'",
    "invalid utf-8 name": "UPDATE StringIds SET value=CAST(x'66ff80' AS TEXT) "
    "WHERE id=(SELECT max(id) FROM StringIds)",
    "kernel start null": "UPDATE CUPTI_ACTIVITY_KIND_KERNEL SET start=NULL "
    "WHERE rowid=(SELECT min(rowid) FROM CUPTI_ACTIVITY_KIND_KERNEL)",
    "gpu id beyond int32": "UPDATE TARGET_INFO_GPU SET id=9223372036854775807",
    "nvtx start null": "UPDATE NVTX_EVENTS SET start=NULL "
    "WHERE rowid IN (SELECT rowid FROM NVTX_EVENTS LIMIT 2)",
    "kernel deviceId dropped": "ALTER TABLE CUPTI_ACTIVITY_KIND_KERNEL DROP COLUMN deviceId",
}


def _snapshot(folder: Path) -> dict[str, tuple[int, int, bytes]]:
    return {
        p.name: (p.stat().st_size, p.stat().st_mtime_ns, p.read_bytes()) for p in folder.iterdir()
    }


def _check(path: Path, capsys: pytest.CaptureFixture[str]) -> tuple[int, str]:
    before = _snapshot(path.parent)
    code, out, err = run_cli(["analyze", str(path), "--json", "--no-cache"], capsys)
    assert "internal error" not in err, err
    assert code in (0, 2), err
    if code == 2:
        assert len(err.strip().splitlines()) == 1 and str(path) in err, err
    assert _snapshot(path.parent) == before
    return code, out


@pytest.mark.parametrize("case", list(NSYS_MUTATIONS))
def test_nsys_field_of_the_wrong_type(
    tmp_path: Path, case: str, capsys: pytest.CaptureFixture[str]
) -> None:
    path = tmp_path / "export.sqlite"
    shutil.copyfile(FIXTURES / "nsys" / "modern.sqlite", path)
    with sqlite3.connect(path) as conn:
        conn.execute(NSYS_MUTATIONS[case])
    code, out = _check(path, capsys)
    assert code == 0, case  # every one of these costs a field, not the export
    doc = json.loads(out)
    assert doc["devices"], case
    for d in doc["devices"]:
        assert sum(d["idle_by_cause"].values()) == d["idle_ns"]


def _op(i: int, dims: object, types: object = None) -> list[dict[str, object]]:
    args: dict[str, object] = {"External id": i, "Input Dims": dims}
    if types is not None:
        args["Input type"] = types
    launch = {"correlation": i, "External id": i}
    return [
        {"ph": "X", "cat": "cpu_op", "name": "aten::mm", "pid": 1, "tid": 1, "ts": i * 100.0,
         "dur": 50.0, "args": args},
        {"ph": "X", "cat": "cuda_runtime", "name": "cudaLaunchKernel", "pid": 1, "tid": 1,
         "ts": i * 100.0 + 1, "dur": 2.0, "args": launch},
        {"ph": "X", "cat": "kernel", "name": "gemm", "pid": 0, "tid": 7, "ts": i * 100.0 + 5,
         "dur": 30.0, "args": {**launch, "device": 0, "stream": 7}},
    ]  # fmt: skip


def test_kineto_fields_of_the_wrong_type(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Null, text and overflowing shapes, a zero conv stride and a ``"²"`` device id."""
    events = [
        *_op(1, None),
        *_op(2, [[2**31, 2**31], [2**31, 2**31]], ["float", "float"]),
        *_op(3, [[2**62, 4], [4, 2**62]], ["c10::BFloat16", "c10::BFloat16"]),
        *_op(4, "garbage"),
        *_op(5, [["a", "b"], [1, 2]]),
        *_op(6, [[-5, 3], [3, 7]], ["float", "float"]),
        *_op(7, [[64, 32], [32, 16]], ["float", "float"]),  # a sound one
        {"ph": "X", "cat": "cpu_op", "name": "aten::conv2d", "pid": 1, "tid": 1, "ts": 900.0,
         "dur": 50.0, "args": {"Input Dims": [[1, 3, 8, 8], [4, 3, 3, 3], [], [], [], [], []],
         "Concrete Inputs": ["", "", "", "[0, 0]", "[0, 0]", "[1, 1]", "1"],
         "Input type": ["float", "float"]}},
    ]  # fmt: skip
    props = [{"id": "²", "name": "NVIDIA H100 80GB HBM3"}]
    path = tmp_path / "typed.json"
    path.write_text(json.dumps({"traceEvents": events, "deviceProperties": props}))
    code, out = _check(path, capsys)
    assert code == 0
    doc = json.loads(out)
    # only the sound GEMM has FLOPs: 2 * 64 * 32 * 16
    assert [(o["op"], o["flops"]) for o in doc["ops"]] == [("aten::mm", 2 * 64 * 32 * 16)]
    assert doc["unknown_flops_kernels"]["count"] == 6


def test_kineto_unhashable_fields_cost_their_event(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """A list or dict where ``ph``, ``cat`` or ``pid`` (a dict key) should be, and a number
    where a metadata event's ``args`` should be: each costs that event; the sound op's kernel is
    still read and linked."""
    events = [
        *_op(1, [[64, 32], [32, 16]], ["float", "float"]),
        {"ph": ["X"], "cat": "kernel", "name": "k1", "pid": 0, "tid": 7, "ts": 300.0, "dur": 1.0},
        {"ph": "X", "cat": {"a": 1}, "name": "k2", "pid": 0, "tid": 7, "ts": 310.0, "dur": 1.0},
        {"ph": "X", "cat": "kernel", "name": "k3", "pid": [0], "tid": 7, "ts": 320.0, "dur": 1.0,
         "args": {"stream": 7}},
        {"ph": "s", "cat": ["ac2g"], "id": 9, "pid": 1, "tid": 1, "ts": 330.0},
        {"ph": "M", "name": "process_name", "pid": [1], "args": {"name": "GPU 0"}},
        {"ph": "M", "name": "process_labels", "pid": 0, "args": 7},
    ]  # fmt: skip
    path = tmp_path / "unhashable.json"
    path.write_text(json.dumps({"traceEvents": events}))
    code, out = _check(path, capsys)
    assert code == 0
    doc = json.loads(out)
    assert [(o["op"], o["flops"]) for o in doc["ops"]] == [("aten::mm", 2 * 64 * 32 * 16)]


def test_a_bad_timestamp_costs_its_event_only(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """A ts/dur that is not a number of µs (text, beyond int64 ns, a list) drops that event
    with one warning naming the count and an example; the other events are analysed as if
    the bad ones had never been written."""
    good = [
        {"ph": "X", "cat": "kernel", "name": f"k{i}", "pid": 0, "tid": 7, "ts": 10.0 * i,
         "dur": 4.0, "args": {"device": 0, "stream": 7}}
        for i in range(1, 6)
    ]  # fmt: skip
    bad = [
        {**good[0], "name": "text ts", "ts": "soon"},
        {**good[1], "name": "huge ts", "ts": 2**70},
        {**good[2], "name": "list dur", "dur": [1]},
        {**good[3], "name": "nan-like", "ts": "NaN"},
    ]
    clean, dirty = tmp_path / "clean.json", tmp_path / "dirty.json"
    clean.write_text(json.dumps({"traceEvents": good}))
    dirty.write_text(json.dumps({"traceEvents": good[:2] + bad + good[2:]}))
    _, want = _check(clean, capsys)
    code, got = _check(dirty, capsys)
    assert code == 0
    doc = json.loads(got)
    notes = [w for w in doc["warnings"] if "ts/dur" in w]
    assert len(notes) == 1 and notes[0].startswith(f"{dirty}: 4 events"), doc["warnings"]
    assert "'soon'" in notes[0]
    assert doc["devices"] == json.loads(want)["devices"]
