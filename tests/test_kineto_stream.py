"""The streamed Kineto reader (issue 12) gives the same session as the generic whole-file reader.

The stream cuts the event list into chunks at ``}``, ``{`` boundaries and scans each with the
compiled scanner; every way of cutting must give the same table. Tiny
chunks force hundreds of cuts, including candidates inside strings and nested objects; the
generic path (``orjson`` over the whole file, the reader used before issue 12) is the reference.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import polars as pl
import pytest

from tests.conftest import ROOT, shared_trace
from traceforensics.ingest.kineto import load_kineto
from traceforensics.ingest.kineto import text as kt
from traceforensics.ingest.kineto.decode import Decoded
from traceforensics.model.session import TraceSession

SAMPLE = ROOT / "examples" / "synthetic_training.pt.trace.json.gz"


def _generic(path: Path, monkeypatch: pytest.MonkeyPatch) -> TraceSession:
    """The session read by the generic whole-file path (the stream refuses every file)."""

    def refuse(*_: Any, **__: Any) -> dict[str, Any]:
        raise kt.NotStreamableError("forced by the test")

    with monkeypatch.context() as m:
        m.setattr("traceforensics.ingest.kineto.text.stream_events", refuse)
        return load_kineto([path])


def _same(a: TraceSession, b: TraceSession) -> None:
    assert a.events.equals(b.events)

    # the stream keeps kept-arg values as written, the generic path re-encodes them: compare
    # the decoded values
    def decoded(s: TraceSession) -> list[tuple[int, str, Any]]:
        rows = s.args.with_columns(pl.col("key").cast(pl.String), pl.col("value").cast(pl.String))
        return [(e, k, json.loads(v)) for e, k, v in rows.iter_rows()]

    assert decoded(a) == decoded(b)
    assert a.meta.warnings == b.meta.warnings
    assert a.meta.devices == b.meta.devices


def _tricky_trace(path: Path) -> Path:
    """A trace whose names hold the boundary pattern, nested args objects and lists of objects,
    with the keys after the event list carrying the time base."""
    events: list[dict[str, Any]] = [
        {"ph": "M", "name": "process_labels", "pid": 0, "args": {"labels": "GPU 0"}},
    ]
    for i in range(400):
        t = 1000.0 + 10 * i
        events += [
            {
                "ph": "X",
                "cat": "cpu_op",
                "name": 'op },\n { "ph": "X" ' + str(i % 7),
                "pid": 1,
                "tid": 1,
                "ts": t,
                "dur": 5.5,
                "args": {
                    "External id": i,
                    "Input Dims": [[i, 3], []],
                    "nested": {"a": [{"b": 1}]},
                    "Call stack": "a.py(1): f\n}, {",
                },
            },
            {
                "ph": "X",
                "cat": "cuda_runtime",
                "name": "cudaLaunchKernel",
                "pid": 1,
                "tid": 1,
                "ts": t + 1,
                "dur": 2,
                "args": {"correlation": i, "External id": i},
            },
            {
                "ph": "X",
                "cat": "kernel",
                "name": f"k{i % 5}<{{}}, {{}}>",
                "pid": 0,
                "tid": 7,
                "ts": t + 4,
                "dur": 3.25,
                "args": {
                    "correlation": i,
                    "device": 0,
                    "stream": 7,
                    "grid": [i + 1, 1, 1],
                    "block": [128, 1, 1],
                    "External id": i,
                },
            },
        ]
    doc = {
        "schemaVersion": 1,
        "traceEvents": events,
        "baseTimeNanoseconds": 1_700_000_000_000_000_000,
        "deviceProperties": [{"id": 0, "name": "GPU X"}],
    }
    path.write_text(json.dumps(doc, indent=1))
    return path


@pytest.mark.parametrize("chunk", [256, 4096, 1 << 20])
def test_tiny_chunks_give_the_generic_session(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, chunk: int
) -> None:
    trace = _tricky_trace(tmp_path / "tricky.json")
    want = _generic(trace, monkeypatch)
    monkeypatch.setattr(kt, "CHUNK_BYTES", chunk)
    monkeypatch.setattr(kt, "READ_BYTES", 1000)  # pieces smaller than a chunk
    got = load_kineto([trace])
    _same(got, want)
    assert got.events.height == 1200
    # the base after the event list was applied to every row
    assert got.events.get_column("start_ns").min() == 1_700_000_000_000_000_000 + 1_000_000


def test_kept_values_are_the_text_as_written(tmp_path: Path) -> None:
    trace = _tricky_trace(tmp_path / "tricky.json")
    dims = load_kineto([trace]).args_for("Input Dims").get_column("value").cast(pl.String)
    # json.dumps(indent=1) wrote the lists over several lines: the stream keeps that text
    assert "\n" in dims[5]
    assert json.loads(dims[5]) == [[5, 3], []]


@pytest.mark.parametrize(
    "trace",
    [SAMPLE, "kineto/resnet50_v100_workers0.pt.trace.json.gz", "hta/mi250_rocm62_minitoy.json.gz"],
)
def test_real_traces_stream_as_the_generic_reader_reads_them(
    trace: Path | str, monkeypatch: pytest.MonkeyPatch
) -> None:
    path = trace if isinstance(trace, Path) else shared_trace(trace)
    want = _generic(path, monkeypatch)
    monkeypatch.setattr(kt, "CHUNK_BYTES", 1 << 20)  # many chunks even for small files
    monkeypatch.setattr(kt, "READ_BYTES", 1 << 18)
    _same(load_kineto([path]), want)


def test_files_the_stream_cannot_take_go_to_the_generic_reader(tmp_path: Path) -> None:
    """The Chrome array format and NaN literals: refused by the stream, read as before."""
    arr = tmp_path / "array.json"
    arr.write_text(
        json.dumps(
            [
                {
                    "ph": "X",
                    "cat": "kernel",
                    "name": "k",
                    "pid": 0,
                    "tid": 7,
                    "ts": 1,
                    "dur": 2,
                    "args": {"device": 0, "stream": 7},
                },
            ]
        )
    )
    with pytest.raises(kt.NotStreamableError):
        kt.stream_events(arr, Decoded())
    assert load_kineto([arr]).events.height == 1
    nan = tmp_path / "nan.json"
    nan.write_text(
        '{"traceEvents": [{"ph": "X", "cat": "kernel", "name": "k", "pid": 0, '
        '"tid": 7, "ts": 1, "dur": 2, "args": {"device": 0}}, {"ph": "X", '
        '"cat": "kernel", "name": "k", "pid": 0, "tid": 7, "ts": NaN, "dur": 2}]}'
    )
    session = load_kineto([nan])
    assert session.events.height == 1
    assert any("NaN" in w or "not a number" in w for w in session.meta.warnings)


def test_columns_built_behind_the_scan_keep_file_order_and_report_their_error(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """``_Behind`` decodes each chunk on a thread one chunk behind the scan: the batches
    arrive in file order, and a decode that fails is the error reported even when the stream
    fails later (a damaged tail), with no decoding thread left behind."""
    import threading

    got: list[int] = []
    behind = kt._Behind(got.append)  # type: ignore[arg-type]
    for i in range(50):
        behind(i)  # type: ignore[arg-type]
    behind.wait()
    behind.close()
    assert got == list(range(50))

    monkeypatch.setattr(kt, "CHUNK_BYTES", 1 << 20)
    events = [
        {"ph": "X", "cat": "kernel", "name": f"k{i}", "pid": 0, "tid": 1, "ts": i, "dur": 1}
        for i in range(100_000)  # ~9 MB: the stream reads 4 MB at a time
    ]
    path = tmp_path / "damaged_tail.json"
    path.write_text(json.dumps({"traceEvents": events})[:-1] + ', "x": ')

    class BuildError(Exception):
        pass

    builder = Decoded()
    threads: list[str] = []

    def add(batch: Any) -> None:
        threads.append(threading.current_thread().name)
        raise BuildError("the first chunk's columns")

    monkeypatch.setattr(builder, "add", add)
    with pytest.raises(BuildError):
        kt.stream_events(path, builder)
    assert threads and all(t.startswith("tf-columns") for t in threads)
    assert not [t for t in threading.enumerate() if t.name.startswith("tf-columns")]
