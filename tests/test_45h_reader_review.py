"""The Kineto reader after its rewrite (issue 45): what a review of it found.

- A chunk the compiled scanner does not read (one value outside its clean case, e.g. a uint64
  arg) is read by the generic coder *in the stream*: a large file is not sent whole to the
  generic reader (six times the memory per JSON byte) for one odd value.
- Each coded column shares its own values across chunks: a ``cat`` of ``0.0`` does not make a
  later ``pid`` ``0`` the float ``0.0`` (the kernel on GPU 0 was dropped as unplaceable).
- An early scan whose file vanished before the load took it is stopped, not left running.
"""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path
from typing import Any

import pytest

from tests.conftest import ROOT
from traceforensics.ingest.kineto import early, load, load_kineto, scanner
from traceforensics.ingest.kineto import text as kt

SAMPLE = ROOT / "examples" / "synthetic_training.pt.trace.json.gz"


def _kernel_trace(extra_args: dict[str, Any] | None, n: int = 400) -> dict[str, Any]:
    """``n`` launch/kernel pairs on GPU 0; the middle kernel carries ``extra_args``."""
    events: list[dict[str, Any]] = []
    for i in range(n):
        args: dict[str, Any] = {"correlation": i, "device": 0, "stream": 7}
        if i == n // 2 and extra_args:
            args |= extra_args
        events.append(
            {"ph": "X", "cat": "cuda_runtime", "name": "cudaLaunchKernel", "pid": 5, "tid": 5,
             "ts": 10 * i, "dur": 3, "args": {"correlation": i}}
        )  # fmt: skip
        events.append(
            {"ph": "X", "cat": "kernel", "name": f"k{i % 3}", "pid": 0, "tid": 7,
             "ts": 10 * i + 4, "dur": 5, "args": args}
        )  # fmt: skip
    return {"schemaVersion": 1, "traceEvents": events, "traceName": "t"}


@pytest.mark.skipif(not scanner.enabled(), reason="the compiled scanner is off")
def test_one_uint64_arg_does_not_send_the_file_to_the_whole_file_reader(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    odd = tmp_path / "odd.json"
    odd.write_text(json.dumps(_kernel_trace({"addr": 2**64 - 1, "grid": [4, 1, 1]})))
    plain = tmp_path / "plain.json"
    plain.write_text(json.dumps(_kernel_trace({"grid": [4, 1, 1]})))
    monkeypatch.setattr(kt, "CHUNK_BYTES", 8192)  # the odd value in one chunk of many
    monkeypatch.setattr(kt, "READ_BYTES", 2048)
    want = load_kineto([plain])
    monkeypatch.setattr(load, "read_trace", lambda *_: pytest.fail("read whole"))
    got = load_kineto([odd])
    assert got.events.drop("event_id").equals(want.events.drop("event_id"))
    assert got.events["grid"].drop_nulls().to_list() == [[4, 1, 1]]  # (the odd chunk read)


def test_a_float_category_does_not_turn_a_later_pid_into_a_float(tmp_path: Path) -> None:
    path = tmp_path / "t.json"
    events = [
        {"ph": "X", "cat": 0.0, "name": "weird", "pid": 5, "tid": 5, "ts": 1, "dur": 1},
        {"ph": "X", "cat": "kernel", "name": "k1", "pid": 0, "tid": 7, "ts": 20, "dur": 10,
         "args": {"correlation": 1}},
        {"ph": "X", "cat": "cuda_runtime", "name": "cudaLaunchKernel", "pid": 5, "tid": 5,
         "ts": 15, "dur": 3, "args": {"correlation": 1}},
    ]  # fmt: skip
    path.write_text(json.dumps({"traceEvents": events}))
    session = load_kineto([path])
    kernel = session.events.filter(session.events["kind"] == "kernel")
    assert kernel["device"].to_list() == [0] and kernel["stream"].to_list() == [7]


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="Linux only")
def test_an_early_scan_of_a_file_gone_before_the_load_is_stopped(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(early, "_other_threads", lambda: False)
    path = tmp_path / "t.json.gz"
    path.write_bytes(SAMPLE.read_bytes())
    early.start(path)
    pending = early._STATE["file"]
    path.unlink()
    assert early.take(path) is None
    assert pending.answer == -1  # its memory file and pipe closed ...
    with pytest.raises(ProcessLookupError):
        os.kill(pending.pid, 0)  # ... and the child ended and reaped
