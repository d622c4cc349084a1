"""The early scan (``ingest.kineto.early``): a file read by a child process while the command
imports polars loads exactly as the stream alone reads it, and is used only when it is the very
file, unchanged, read cleanly; anything else leaves the stream to read the file."""

from __future__ import annotations

import gc
import json
import os
import signal
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any, BinaryIO

import pytest
from polars.testing import assert_frame_equal

from tests.conftest import ROOT, fresh_python, kineto_trace_files, shared_trace
from tests.test_kineto_stream import _same, _tricky_trace
from tests.test_kineto_variants import flow_events, write
from traceforensics.cli import entry
from traceforensics.ingest import load_path
from traceforensics.ingest.detect import json_size_estimate
from traceforensics.ingest.kineto import decode, early, load, load_kineto
from traceforensics.ingest.kineto import text as kt
from traceforensics.ingest.kineto.rules import extract
from traceforensics.model.session import TraceSession

SAMPLE = ROOT / "examples" / "synthetic_training.pt.trace.json.gz"
needs_fork = pytest.mark.skipif(not sys.platform.startswith("linux"), reason="Linux only")


#: ``early``'s own check (the fixture below replaces it).
OTHER_THREADS = early._other_threads


@pytest.fixture(autouse=True)
def _no_scan_left(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    """A scan a failed test left pending would make every later ``start`` a no-op. A test
    worker may hold threads earlier tests left (the console script has none when it forks):
    here the child runs only the scan, which takes none of their locks."""
    monkeypatch.setattr(early, "_other_threads", lambda: False)
    yield
    pending = early._STATE.pop("file", None)
    if pending is not None:
        pending.cancel()


def _load_early(path: Path, monkeypatch: pytest.MonkeyPatch) -> tuple[TraceSession, int]:
    """``path`` loaded after its early scan was started; 1 when the load took the child's
    decoded file instead of reading it, else 0."""
    early.start(path)
    try:
        return _load_counting(path, monkeypatch)
    finally:
        early.take(path)  # a scan the load did not take is let go (and its child waited for)


def _load_counting(path: Path, monkeypatch: pytest.MonkeyPatch) -> tuple[TraceSession, int]:
    """``path`` loaded (its early scan started already, or not); 1 when the load took the
    child's decoded file (the stream not even called), else 0."""
    answers: list[early.EarlyScan | None] = []
    streamed: list[Path] = []
    take, stream_events = early.take, kt.stream_events

    def taking(p: Path) -> early.EarlyScan | None:
        out = take(p)
        answers.append(out)
        return out

    def streaming(p: Path, *rest: Any) -> dict[str, Any]:
        streamed.append(p)
        return stream_events(p, *rest)

    monkeypatch.setattr(early, "take", taking)
    monkeypatch.setattr(kt, "stream_events", streaming)
    session = load_kineto([path])
    return session, int(any(a is not None for a in answers) and not streamed)


@needs_fork
@pytest.mark.parametrize("rel", kineto_trace_files())
def test_every_real_trace_loads_the_same_from_its_early_scan(
    rel: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    path = shared_trace(rel)
    want = load_kineto([path])
    clean = early.scan_file(path) is not None
    got, used = _load_early(path, monkeypatch)
    assert got.events.equals(want.events)
    assert got.args.equals(want.args)
    assert got.meta.warnings == want.meta.warnings
    assert got.meta.devices == want.meta.devices
    assert got.meta.extra == want.meta.extra
    assert used == int(clean)


@needs_fork
def test_the_resnet_trace_is_taken_from_its_early_scan(monkeypatch: pytest.MonkeyPatch) -> None:
    # the case the scan is for (1x ResNet-50, issue 12): not given up on
    path = shared_trace("kineto/resnet50_v100_workers0.pt.trace.json.gz")
    scanned = early.scan_file(path)
    assert scanned is not None and len(scanned.decoded.rows["kind"]) >= 5  # several chunks
    _, used = _load_early(path, monkeypatch)
    assert used == 1


def _answer_mappings() -> int:
    """How many mappings of an early scan's memory file this process holds (Linux)."""
    with open("/proc/self/maps") as maps:
        return sum("memfd:tf-early" in line for line in maps)


@needs_fork
def test_the_loaded_table_does_not_hold_the_answers_mapping(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # the answer's arrays are views of its mapping (answer_file); a column made of one would
    # keep the whole mapping (~6.4 MB here) alive as long as the table: the table holds none
    seen: list[int] = []
    read = early.read_answer

    def reading(fd: int) -> object | None:
        out = read(fd)
        seen.append(_answer_mappings())  # (what the check below can see: one, while read)
        return out

    monkeypatch.setattr(early, "read_answer", reading)
    session, used = _load_early(
        shared_trace("kineto/resnet50_v100_workers0.pt.trace.json.gz"), monkeypatch
    )
    assert used == 1 and seen == [1]
    gc.collect()
    assert _answer_mappings() == 0
    assert session.events.height > 0  # (the table is alive while the mapping is gone)


@needs_fork
def test_a_clean_trace_of_many_chunks_is_taken_and_loads_the_same(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # generated (no ../shared needed): names without the boundary pattern, cut every 4 KB
    doc = json.loads(_tricky_trace(tmp_path / "base.json").read_text())
    for event in doc["traceEvents"]:
        if "name" in event:
            event["name"] = event["name"].replace("}", ")").replace("{", "(")
        event.get("args", {}).pop("Call stack", None)
    path = tmp_path / "clean.json"
    path.write_text(json.dumps(doc, indent=1))
    monkeypatch.setattr(kt, "CHUNK_BYTES", 4096)
    monkeypatch.setattr(kt, "READ_BYTES", 1000)
    scanned = early.scan_file(path)
    assert scanned is not None and len(scanned.decoded.rows["kind"]) > 20
    got, used = _load_early(path, monkeypatch)
    assert used == 1
    _same(got, load_kineto([path]))
    assert got.events.height == 1200


@needs_fork
def test_the_child_decodes_the_file_and_the_load_takes_it(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    path = shared_trace("kineto/resnet50_v100_workers0.pt.trace.json.gz")
    early.start(path)
    answer = early.take(path)
    # the whole file decoded there, the tail's events and keys too
    assert answer is not None and answer.top == kt.stream_events(path, decode.Decoded())
    want = load_kineto([path])
    assert answer.decoded.n_rows == want.events.height  # (none dropped)
    early.start(path)
    # this process decodes nothing and does not read the file again: the child's events it is
    added: list[object] = []
    monkeypatch.setattr(decode.Decoded, "add", lambda _, b: added.append(b))
    monkeypatch.setattr(kt, "stream_events", lambda *_: pytest.fail("streamed the file"))
    monkeypatch.setattr(load, "read_trace", lambda *_: pytest.fail("read the file again"))
    _same(load_kineto([path]), want)
    assert added == []


@needs_fork
def test_a_load_of_the_childs_decoded_file_imports_no_stream() -> None:
    # the decoded answer is taken whole: the stream (and its threads) is not even imported
    code = (
        "import sys\n"
        "from pathlib import Path\n"
        "from traceforensics.ingest.kineto import early, load_kineto\n"
        f"path = Path({str(SAMPLE)!r})\n"
        "early.start(path)\n"
        "session = load_kineto([path])\n"
        "print(session.events.height > 0, early._STATE == {},"
        " 'traceforensics.ingest.kineto.text' in sys.modules)\n"
    )
    assert fresh_python(code).stdout.split() == ["True", "True", "False"]


@pytest.mark.parametrize("which", ["sample", "resnet"])
def test_the_childs_decoded_events_give_the_frames_the_stream_gives(which: str) -> None:
    # (``scan_file`` as the child runs it, in this process: the frames of its decoded events
    # and of the stream's, by the same whole-file rules)
    path = (
        SAMPLE
        if which == "sample"
        else shared_trace("kineto/resnet50_v100_workers0.pt.trace.json.gz")
    )
    answer = _scan(path)
    streamed = decode.Decoded()
    kt.stream_events(path, streamed)
    got, want = (extract(path, d, 0, 0, None) for d in (answer.decoded, streamed))
    assert_frame_equal(got.events, want.events, check_exact=True)
    assert_frame_equal(got.args, want.args, check_exact=True)
    assert got.warnings == want.warnings and got.devices_seen == want.devices_seen


@needs_fork
def test_launch_flows_decoded_in_the_child_fill_correlations_as_the_stream_does(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # every launch and kernel of the sample carries its correlation: no flow fills one
    full = _scan(SAMPLE)
    assert extract(SAMPLE, full.decoded, 0, 0, None).flow_filled == 0
    # kernels without one take the flows' ids, decoded in the child as the stream decodes them
    path = write(tmp_path, "flows.json", flow_events())
    scan = _scan(path)
    assert scan.decoded.flows
    assert extract(path, scan.decoded, 0, 0, None).flow_filled == 3
    got, used = _load_early(path, monkeypatch)
    assert used == 1
    _same(got, load_kineto([path]))
    assert got.events["correlation"].to_list() == [11, 11, 12]


def _scan(path: Path) -> early.EarlyScan:
    scan = early.scan_file(path)
    assert scan is not None
    return scan


@needs_fork
@pytest.mark.parametrize("case", ["decode fails", "answer does not pickle", "tail not read"])
def test_a_child_that_cannot_answer_with_the_whole_file_leaves_it_to_the_stream(
    case: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    path = shared_trace("kineto/resnet50_v100_workers0.pt.trace.json.gz")
    want = load_kineto([path])
    with monkeypatch.context() as child:  # (the patches hold in the child alone)
        if case == "decode fails":
            child.setattr(decode.Decoded, "add", lambda *_: 1 / 0)
        elif case == "answer does not pickle":
            scan = early.scan_file
            unpicklable: Any = lambda: 0  # noqa: E731
            child.setattr(early, "scan_file", lambda p: scan(p)._replace(read=unpicklable))
        else:
            child.setattr(kt, "scanned_tail", lambda _: None)
        early.start(path)
    assert early._STATE["file"].result() is None
    got, used = _load_counting(path, monkeypatch)
    assert used == 0
    _same(got, want)


def test_the_child_decodes_without_polars_or_msgspec() -> None:
    # numpy is imported in the child; polars would make it finish after the parent's imports
    # (msgspec, which the reader no longer uses, stays out too)
    code = (
        "import sys\n"
        "from pathlib import Path\n"
        "from traceforensics.ingest.kineto import early\n"
        f"scan = early.scan_file(Path({str(SAMPLE)!r}))\n"
        "print(scan.decoded.n_rows > 0, 'polars' in sys.modules, 'msgspec' in sys.modules)\n"
    )
    want = ["True", "False", "False"]
    assert fresh_python(code).stdout.split() == want


@needs_fork
def test_an_answer_that_is_not_a_scan_is_not_used(monkeypatch: pytest.MonkeyPatch) -> None:
    write = early.write_answer

    def garbage(fh: BinaryIO, _value: object) -> bool:
        fh.write(b"\x80\x05garbage" * 3)
        return True

    def other(fh: BinaryIO, _value: object) -> bool:
        return write(fh, "not a scan")

    for writes in (garbage, other):  # not an answer at all, then a whole one of something else
        monkeypatch.setattr(early, "write_answer", writes)
        early.start(SAMPLE)  # (the child writes with the patched writer)
        monkeypatch.setattr(early, "write_answer", write)
        assert "file" in early._STATE  # a child was started
        assert early.take(SAMPLE) is None


@needs_fork
def test_a_child_that_does_not_end_is_killed_and_the_file_read(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    def stuck(_: Path) -> None:
        time.sleep(600)  # in the child: a file swapped for a FIFO, say

    other = tmp_path / "other.json.gz"
    other.write_bytes(SAMPLE.read_bytes())
    monkeypatch.setattr(early, "scan_file", stuck)
    monkeypatch.setattr(early, "WAIT_S", 0.2)
    for asked in (other, SAMPLE):  # another file: stopped at once; its own: after WAIT_S
        early.start(SAMPLE)
        child = early._STATE["file"].pid
        assert early.take(asked) is None
        with pytest.raises(ProcessLookupError):
            os.kill(child, 0)  # killed and reaped: not even a zombie is left
    got, used = _load_early(SAMPLE, monkeypatch)
    assert used == 0
    monkeypatch.undo()
    _same(got, load_kineto([SAMPLE]))


@needs_fork
def test_a_caller_that_ignores_sigchld_still_gets_the_scan() -> None:
    # its children are reaped at once (daemons, job runners): the wait must not fail on it
    before = signal.signal(signal.SIGCHLD, signal.SIG_IGN)
    try:
        early.start(SAMPLE)
        assert early.take(SAMPLE) is not None
    finally:
        signal.signal(signal.SIGCHLD, before)


@needs_fork
def test_a_file_changed_after_its_scan_started_is_read_again(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    path = tmp_path / "trace.json"
    doc = json.loads(_tricky_trace(tmp_path / "base.json").read_text())
    path.write_text(json.dumps(doc))
    early.start(path)
    assert early._STATE["file"].result() is not None  # the old text, scanned
    doc["traceEvents"] = doc["traceEvents"][:-30]  # then the job wrote the file again
    path.write_text(json.dumps(doc))
    os.utime(path, ns=(1, 1))  # even with an mtime older than the scan's
    got, used = _load_early(path, monkeypatch)  # (the scan of the old text is taken here)
    assert used == 0
    _same(got, load_kineto([path]))
    assert got.events.height == load_kineto([path]).events.height


@needs_fork
def test_a_chunk_the_scanner_does_not_read_gives_the_scan_up(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # tiny chunks cut inside strings ("}, {" in names): the stream then tries other
    # boundaries, the early scan gives up and leaves the file to the stream
    path = _tricky_trace(tmp_path / "tricky.json")
    monkeypatch.setattr(kt, "CHUNK_BYTES", 4096)
    monkeypatch.setattr(kt, "READ_BYTES", 1000)
    assert early.scan_file(path) is None
    got, used = _load_early(path, monkeypatch)
    assert used == 0
    _same(got, load_kineto([path]))


@needs_fork
def test_a_child_that_dies_costs_nothing_but_time(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    def die(_: Path) -> None:
        os._exit(9)  # in the child: killed before it answered

    monkeypatch.setattr(early, "scan_file", die)
    got, used = _load_early(SAMPLE, monkeypatch)
    assert used == 0
    monkeypatch.undo()
    _same(got, load_kineto([SAMPLE]))


@needs_fork
def test_a_scan_is_taken_once_and_only_for_its_file(tmp_path: Path) -> None:
    other = tmp_path / "other.json.gz"
    other.write_bytes(SAMPLE.read_bytes())  # the same bytes, another file
    early.start(SAMPLE)
    early.start(other)  # one early scan per process: ignored
    assert early.take(other) is None
    assert early.take(SAMPLE) is None  # the scan was let go by the first take
    early.start(SAMPLE)
    assert early.take(SAMPLE) is not None
    assert early.take(SAMPLE) is None


def test_the_json_size_of_a_gzip_is_the_larger_of_its_trailer_and_8x(tmp_path: Path) -> None:
    import gzip

    text = b'{"traceEvents": []}' * 1000  # compresses ~100x: the trailer's size
    noise = os.urandom(10_000)  # does not compress: 8x the file
    for name, data in (("text", text), ("noise", noise)):
        (tmp_path / f"{name}.json.gz").write_bytes(gzip.compress(data))
        (tmp_path / f"{name}.json").write_bytes(data)
    assert json_size_estimate(tmp_path / "text.json.gz") == len(text)
    assert json_size_estimate(tmp_path / "text.json") == len(text)
    gz = tmp_path / "noise.json.gz"
    assert json_size_estimate(gz) == 8 * gz.stat().st_size > len(noise)
    assert json_size_estimate(tmp_path / "missing.json.gz") == 0


@needs_fork
def test_start_imports_numpy_only_when_it_forks() -> None:
    # the child inherits numpy to decode with (imported in the child, it competed with this
    # process's polars import for the other core); off, or for a file it does not scan, nothing
    code = (
        "import os, sys\n"
        "from pathlib import Path\n"
        "from traceforensics.ingest.kineto import early\n"
        "os.environ[early.OFF] = '0'\n"
        f"early.start(Path({str(SAMPLE)!r}))\n"
        "print('numpy' in sys.modules, bool(early._STATE))\n"
        "del os.environ[early.OFF]\n"
        "early.start(Path('/no/such/trace.json.gz'))\n"
        "print('numpy' in sys.modules, bool(early._STATE))\n"
        f"early.start(Path({str(SAMPLE)!r}))\n"
        "print('numpy' in sys.modules, bool(early._STATE))\n"  # (before the answer: its
        "pending = early._STATE.get('file')\n"  # unpickling would import numpy anyway)
        "answer = pending and pending.result()\n"
        "print(answer is not None and answer.decoded is not None)\n"
    )
    got = fresh_python(code).stdout.split()
    assert got == ["False", "False"] * 2 + ["True", "True", "True"]


def test_the_early_scan_imports_no_polars_numpy_or_msgspec() -> None:
    # it runs before them: importing them first would make it wait for the imports it hides
    # (start imports numpy, but only as it forks: test_start_imports_numpy_only_when_it_forks)
    code = (
        "import sys\n"
        "import traceforensics.cli.entry, traceforensics.ingest.kineto.early\n"
        "print(sorted(m for m in ('polars', 'numpy', 'msgspec') if m in sys.modules))\n"
    )
    assert fresh_python(code).stdout.strip() == "[]"


def test_the_console_script_scans_the_trace_it_analyses(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    started: list[Path] = []
    monkeypatch.setattr(early, "start", started.append)
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))
    trace = tmp_path / "run.pt.trace.json.gz"
    trace.write_bytes(SAMPLE.read_bytes())
    cases = [
        (["analyze", "--markdown", "t.md", str(trace), "--json"], [trace]),
        (["diff", str(trace), str(trace)], []),  # not a load the scan is for
        (["analyze", str(tmp_path)], []),  # a directory of rank files
        (["analyze", "report.nsys-rep"], []),
    ]
    for argv, want in cases:
        started.clear()
        entry._scan_early(argv)
        assert started == want, argv
    load_path(trace, use_cache=True)  # now the load reads the cached session instead
    started.clear()
    entry._scan_early(["analyze", str(trace)])
    assert started == []
    entry._scan_early(["analyze", str(trace), "--no-cache"])
    assert started == [trace]


def test_the_console_script_resumes_the_collector_after_its_imports(tmp_path: Path) -> None:
    # the entry pauses the collector while the commands are imported; the command runs with it
    code = (
        "import gc, sys\n"
        f"sys.argv = ['tf', 'analyze', {str(SAMPLE)!r}, '--json', '--no-cache']\n"
        "from traceforensics.cli import entry\n"
        "import traceforensics.cli.analyze as A\n"
        "seen = []\n"
        "run = A.analysis_of\n"
        "A.analysis_of = lambda *a, **k: (seen.append(gc.isenabled()), run(*a, **k))[1]\n"
        "import atexit\n"
        "atexit.register(lambda: sys.stderr.write(repr(seen)))\n"  # (the script ends the process)
        "entry.main()\n"
    )
    assert fresh_python(code, tmp_path / "cache").stderr.strip().endswith("[True]")


@needs_fork
def test_the_early_scan_can_be_turned_off(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("TF_EARLY_SCAN", "0")
    early.start(SAMPLE)
    assert early.take(SAMPLE) is None
    monkeypatch.setenv("TF_EARLY_SCAN", "1")
    early.start(SAMPLE)
    assert early.take(SAMPLE) is not None


@needs_fork
def test_no_child_is_forked_while_other_threads_run(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(early, "_other_threads", OTHER_THREADS)
    stop = threading.Event()
    other = threading.Thread(target=stop.wait)
    other.start()
    try:
        early.start(SAMPLE)
        assert early.take(SAMPLE) is None
    finally:
        stop.set()
        other.join()
    if threading.active_count() == 1:  # (a test worker may hold threads of its own)
        early.start(SAMPLE)
        assert early.take(SAMPLE) is not None


def test_a_path_that_cannot_be_read_starts_nothing(tmp_path: Path) -> None:
    loop = tmp_path / "loop.json"
    loop.symlink_to(loop)
    missing = tmp_path / "missing.json.gz"
    for path in (loop, missing, tmp_path):
        early.start(path)  # no error: the load says what is wrong
        assert early.take(path) is None
    entry._scan_early(["analyze", str(loop)])
    assert early.take(loop) is None


@needs_fork
def test_the_child_does_not_hold_the_commands_output_open(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # ``tf analyze T --bogus | cat`` ends when the command does, not when its child does
    monkeypatch.setattr(early, "scan_file", lambda _: time.sleep(600))
    early.start(SAMPLE)
    child = early._STATE["file"].pid
    deadline = time.monotonic() + 10
    targets: list[str] = []
    while time.monotonic() < deadline:
        targets = [os.readlink(f"/proc/{child}/fd/{fd}") for fd in (0, 1, 2)]
        if targets == [os.devnull] * 3:
            break
        time.sleep(0.01)
    assert targets == [os.devnull] * 3
