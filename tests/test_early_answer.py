"""The early-scan child's answer is read as soon as the child says it is whole, while the child
is still ending (``early._Pending.result``); the child is reaped all the same."""

from __future__ import annotations

import os
import pickle
import sys
import time
from collections.abc import Iterator

import numpy as np
import pytest

from tests.conftest import ROOT, fresh_python
from traceforensics.ingest.kineto import answer_file, early

SAMPLE = ROOT / "examples" / "synthetic_training.pt.trace.json.gz"

pytestmark = pytest.mark.skipif(not sys.platform.startswith("linux"), reason="Linux only")


@pytest.fixture(autouse=True)
def _one_scan(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    # (a test worker may hold threads earlier tests left; the child here runs only the scan)
    monkeypatch.setattr(early, "_other_threads", lambda: False)
    yield
    pending = early._STATE.pop("file", None)
    if pending is not None:
        pending.cancel()


def test_the_answer_is_read_while_the_child_ends(monkeypatch: pytest.MonkeyPatch) -> None:
    real_exit = os._exit

    def slow_exit(code: int) -> None:  # in the child: an end that takes a while
        time.sleep(1.5)
        real_exit(code)

    read_at: list[float] = []
    read = early.read_answer

    def reading(fd: int) -> object | None:
        read_at.append(time.monotonic())
        return read(fd)

    monkeypatch.setattr(os, "_exit", slow_exit)
    monkeypatch.setattr(early, "read_answer", reading)
    started = time.monotonic()
    early.start(SAMPLE)
    monkeypatch.setattr(os, "_exit", real_exit)  # (this process's own exit stays as it was)
    child = early._STATE["file"].pid
    answer = early.take(SAMPLE)
    assert answer is not None and answer.decoded is not None
    assert read_at and read_at[0] - started < 1.2  # read before the child's end began to end
    with pytest.raises(ProcessLookupError):
        os.kill(child, 0)  # reaped once ended: not even a zombie is left


def test_a_child_that_ends_without_saying_gives_no_answer(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # it wrote part of an answer, then died: what it wrote is not read as one
    def half(_: object, answer: int, said: int) -> None:
        os.write(answer, b"\x80\x05partial")
        os._exit(0)

    monkeypatch.setattr(early, "_answer", half)
    early.start(SAMPLE)
    child = early._STATE["file"].pid
    assert early.take(SAMPLE) is None
    with pytest.raises(ProcessLookupError):
        os.kill(child, 0)


def test_a_file_read_whole_by_the_child_is_loaded_without_the_decoders() -> None:
    # (the stream, with its threads and the generic reader: imports a small trace does not
    # need once the child decoded it); without the early scan it is used
    code = (
        "import os, sys\n"
        "from pathlib import Path\n"
        "from traceforensics.ingest.kineto import early, load_kineto\n"
        "k = 'traceforensics.ingest.kineto.'\n"
        "decoders = (k + 'text', k + 'generic')\n"
        f"path = Path({str(SAMPLE)!r})\n"
        "early.start(path)\n"
        "session = load_kineto([path])\n"
        "print(session.events.height > 0, [m for m in decoders if m in sys.modules])\n"
        "os.environ[early.OFF] = '0'\n"
        "load_kineto([path])\n"
        "print([m for m in decoders[:1] if m not in sys.modules])\n"
    )
    assert fresh_python(code).stdout.split("\n")[:2] == ["True []", "[]"]


@pytest.mark.parametrize("written", ["empty", "whole", "cut", "not the format"])
def test_the_answer_is_read_from_a_mapping_of_the_memory_file(written: str) -> None:
    # what the child wrote is mapped, not read into a copy: the same answer, its arrays views
    # of the mapping (writable: a private one); none when the file is empty, cut (a child
    # killed while writing) or something else
    columns = np.arange(1000, dtype=np.int64)
    from traceforensics.ingest.kineto.decode import Decoded

    scan = early.EarlyScan({"k": 1}, [3, 4], Decoded(rows={"a": [columns]}))
    fd = os.memfd_create("tf-test")
    try:
        with os.fdopen(os.dup(fd), "wb") as fh:
            assert answer_file.write_answer(fh, scan)
        data = os.pread(fd, os.fstat(fd).st_size, 0)
        if written != "whole":
            os.ftruncate(fd, 0)
            os.pwrite(fd, b"" if written == "empty" else data[: len(data) // 2], 0)
            if written == "not the format":
                os.ftruncate(fd, 0)
                os.pwrite(fd, pickle.dumps(scan), 0)
        got = early._mapped_answer(fd)
    finally:
        os.close(fd)
    if written != "whole":
        assert got is None
        return
    assert got is not None and got.top == scan.top and got.read == scan.read
    array = got.decoded.rows["a"][0]
    assert np.array_equal(array, columns) and array.flags.writeable
    assert not array.flags.owndata and array.ctypes.data % answer_file.ALIGN == 0


def test_an_answer_that_cannot_be_pickled_leaves_the_file_for_the_next_try() -> None:
    # the answer holds something unpicklable: that try fails part-way, and the next answer
    # is all the file holds (not appended to what the failed try wrote)
    from traceforensics.ingest.kineto.decode import Decoded

    scan = early.EarlyScan({"k": 1}, [3, 4], Decoded())
    bad = scan._replace(top={"k": 1, "a": np.arange(5000), "f": lambda: None})
    alone = os.memfd_create("tf-test")
    fd = os.memfd_create("tf-test")
    try:
        with os.fdopen(os.dup(alone), "wb") as fh:
            assert early._sent(fh, scan)
        with os.fdopen(os.dup(fd), "wb") as fh:
            assert not early._sent(fh, bad)
            assert early._sent(fh, scan)
        assert os.fstat(fd).st_size == os.fstat(alone).st_size
        got = early._mapped_answer(fd)
        assert got is not None and got.top == scan.top and got.read == scan.read
    finally:
        os.close(fd)
        os.close(alone)
