"""``tf analyze TRACE --annotate OUT.json.gz``: the trace with tf's tracks, for trace viewers.

Checked on every shared trace (Kineto files, nsys exports, a rank directory) and on drawn
trace shapes in both formats, single files and rank directories:

- the output parses as JSON (exact decimals: ``parse_float=Decimal``);
- a Kineto file's every original event is in it unchanged (as a multiset of JSON values); a
  rank directory's every original event is in it with only its place changed: ``pid`` the
  rank's process, ``ts`` moved by exactly the rank's clock offset, flow ids made unique;
- per device, the ``idle: CAUSE`` slices sum exactly to the analysis' ``idle_ns`` and per
  cause to ``idle_by_cause`` (from ``Analysis.to_json``, an independent path), and tile no
  more than the device's gaps (no two overlap on the track);
- every flow end lies inside a slice of its own track (the viewer binds it there), and each
  flow id has one start and one end;
- tf's slices never overlap on one track (viewers drop slices that cross).
"""

from __future__ import annotations

import dataclasses
import gzip
import json
import subprocess
import sys
import tempfile
from collections import Counter, defaultdict
from decimal import Decimal
from pathlib import Path
from typing import Any

import polars as pl
import pytest
from hypothesis import given

import shapes
import synth
from tests.conftest import drawn_shapes_settings, kineto_trace_files, nsys_trace_files, shared_trace
from traceforensics.analysis.options import DEFAULTS
from traceforensics.analysis.pipeline import Analysis
from traceforensics.cli.analyze import analysis_of
from traceforensics.cli.annotate import write_annotation
from traceforensics.report.annotate.layout import GPU_PID_BASE, RANK_PID_BASE

SHARED = [
    *[k for k in kineto_trace_files() if "job128_sampled/" not in k],
    *nsys_trace_files(),
    "hta/job128_sampled",
]
Event = dict[str, Any]


def _read(path: Path) -> Any:
    data = path.read_bytes()
    if data[:2] == b"\x1f\x8b":
        data = gzip.decompress(data)
    return json.loads(data, parse_float=Decimal)


def _events(doc: Any) -> list[Event]:
    return list(doc["traceEvents"] if isinstance(doc, dict) else doc)


def _key(e: Event, drop: tuple[str, ...] = ()) -> str:
    return json.dumps(
        {k: v for k, v in e.items() if k not in drop}, sort_keys=True, default=_number
    )


def _number(value: Decimal) -> str:
    """One text per decimal value (``1.50`` and ``1.5`` are the same JSON number)."""
    return str(value.normalize())


def annotate(path: Path, out: Path) -> tuple[Analysis, list[Event]]:
    """Analyse ``path`` as ``tf analyze --annotate`` does, write ``out``, read it back."""
    result = analysis_of(str(path), DEFAULTS, use_cache=False, figures=True)
    write_annotation(result, str(path), out)
    return result, _events(_read(out))


def check(path: Path, out: Path) -> tuple[Analysis, list[Event]]:
    """Every contract of the module docstring on ``path``."""
    result, events = annotate(path, out)
    ours = [e for e in events if str(e.get("cat", "")).startswith("tf.")]
    job = len(result.session.ranks) > 1
    theirs = [
        e for e in events if not str(e.get("cat", "")).startswith("tf.") and not _named(e, job)
    ]
    # idle slices: exact per device and cause
    sums: Counter[tuple[int, int, str]] = Counter()
    for e in ours:
        if e["cat"] == "tf.idle":
            a = e["args"]
            assert e["name"] == f"idle: {a['cause']}" and a["dur_ns"] > 0
            sums[(a["rank"], a["device"], a["cause"])] += a["dur_ns"]
    for d in result.to_json()["devices"]:
        for cause, ns in d["idle_by_cause"].items():
            assert sums.pop((d["rank"], d["device"], cause), 0) == ns, (d["rank"], d["device"])
    assert not sums, f"idle slices on no device: {sums}"
    _check_findings(result, ours)
    # tf's slices never cross on one track; flows end inside a slice of their track
    # tracks keyed by pid/tid as written: Perfetto keeps "25738" and 25738 apart
    slices: dict[tuple[str, str], list[tuple[Decimal, Decimal]]] = defaultdict(list)
    for e in events:
        if e.get("ph") == "X":
            start = Decimal(e["ts"])
            slices[(repr(e["pid"]), repr(e["tid"]))].append(
                (start, start + Decimal(e.get("dur", 0)))
            )
    converted = result.session.meta.source_format != "kineto"  # every track is ours then
    for at in {(repr(e["pid"]), repr(e["tid"])) for e in (events if converted else ours)
               if e.get("ph") == "X"}:  # fmt: skip
        assert not _crossing(slices[at]), at
    flows = [e for e in ours if e["ph"] in ("s", "f")]
    assert Counter(e["id"] for e in flows) == Counter({e["id"]: 2 for e in flows})
    begun = {e["id"]: Decimal(e["ts"]) for e in flows if e["ph"] == "s"}
    assert all(Decimal(e["ts"]) >= begun[e["id"]] for e in flows if e["ph"] == "f")
    for e in flows:
        track = slices[(repr(e["pid"]), repr(e["tid"]))]
        assert any(a <= Decimal(e["ts"]) <= b for a, b in track), e
    top = _read(out)
    moved = top.get("traceforensics", {}).get("moved_ns", {}) if isinstance(top, dict) else {}
    _check_originals(path, result, theirs, {int(r): int(ns) for r, ns in moved.items()})
    return result, events


def _crossing(track: list[tuple[Decimal, Decimal]]) -> list[tuple[Decimal, Decimal]]:
    """Slices of one track that cross an enclosing one (start inside it, end beyond it):
    viewers drop those; nested and disjoint slices are fine."""
    bad: list[tuple[Decimal, Decimal]] = []
    stack: list[Decimal] = []
    for a, b in sorted(track, key=lambda ab: (ab[0], -ab[1])):
        while stack and stack[-1] <= a:
            stack.pop()
        if stack and b > stack[-1]:
            bad.append((a, b))
            continue
        stack.append(b)
    return bad


def _check_findings(result: Analysis, ours: list[Event]) -> None:
    """A finding's slices cover what its figures count, by an independent path: an idle
    cause's time (all of it without one-off windows), exposed communication, exposed copies."""
    total: Counter[tuple[int, int, str]] = Counter()
    for e in ours:
        if e["cat"] == "tf.finding":
            a = e["args"]
            total[(a["rank"], a["device"], a["category"])] += a["dur_ns"]
    one_off = {(f.rank, f.device) for f in result.findings if f.category == "one_off"}
    devices = {(d["rank"], d["device"]): d for d in result.to_json()["devices"]}
    for f in result.findings:
        key = (f.rank, f.device)
        got, d = total[(*key, f.category)], devices[key]
        if f.category in d["idle_by_cause"]:
            want = d["idle_by_cause"][f.category]
            assert got == want if key not in one_off else got <= want, f.category
        elif f.category == "exposed_communication":
            assert got == d["exposed_comm_ns"]
        elif f.category == "transfer_bound":
            assert got == d["exposed_copy_ns"]


def _named(e: Event, job: bool) -> bool:
    """Whether ``e`` is one of tf's track names (a job's are all tf's: the files' own names
    become thread names)."""
    if e.get("ph") != "M":
        return False
    pid = e.get("pid")
    return job or (isinstance(pid, int) and pid >= GPU_PID_BASE)


def _check_originals(
    path: Path, result: Analysis, theirs: list[Event], moved: dict[int, int]
) -> None:
    """The input's own events, unchanged (Kineto; module docstring)."""
    if result.session.meta.source_format != "kineto":
        # the event table converted: a Chrome event per row
        assert sum(e.get("ph") != "M" for e in theirs) == result.session.events.height
        return
    inputs = result.session.meta.inputs
    if len(inputs) == 1:  # a file, or a directory of one rank file: copied as it is
        orig = _events(_read(Path(inputs[0].path)))
        assert Counter(_key(e) for e in orig) == Counter(_key(e) for e in theirs)
        return
    assert len(result.session.ranks) > 1 and moved.keys() == set(result.session.ranks)
    _check_job_clock(result, theirs)
    got = Counter(_key(e, ("pid", "tid", "id")) for e in theirs if e.get("ph") != "M")
    want: Counter[str] = Counter()
    for info in result.session.meta.inputs:
        shift = Decimal(moved[info.rank]) / 1000
        for e in _events(_read(Path(info.path))):
            if e.get("ph") == "M":
                continue
            placed = dict(e)
            if "ts" in placed:
                placed["ts"] = Decimal(placed["ts"]) - shift
            want[_key(placed, ("pid", "tid", "id"))] += 1
    assert got == want


def _check_job_clock(result: Analysis, theirs: list[Event]) -> int:
    """A job's ranks on one clock, checked against the analysis, not the file's own numbers:
    each rank's GPU kernels (matched by correlation id to the event table, tf's clock, the
    files' bases added) are written at tf time − the rank's clock offset (its first device's,
    ``ranks``) − one origin, the same for every rank, a whole second; no time is negative."""
    offsets: dict[int, int] = {}
    assert result.ranks is not None
    for row in sorted(result.ranks.per_rank, key=lambda r: (r.rank, r.device)):
        offsets.setdefault(row.rank, row.clock_offset_ns)
    table = result.session.events.filter(pl.col("kind") == "kernel")
    origins: Counter[int] = Counter()
    matched = 0
    for rank in result.session.ranks:
        mine = table.filter(pl.col("rank") == rank)
        once = mine.filter(pl.col("correlation").is_not_null() & pl.col("correlation").is_unique())
        tf_ns = dict(once.select("correlation", "start_ns").rows())  # (ids a trace repeats: out)
        for e in theirs:
            corr = (e.get("args") or {}).get("correlation")
            kernel = e.get("ph") == "X" and str(e.get("cat", "")).lower() == "kernel"
            if e.get("pid") == RANK_PID_BASE + rank and corr in tf_ns and kernel:
                written = int(Decimal(e["ts"]) * 1000)
                origins[tf_ns[corr] - offsets.get(rank, 0) - written] += 1
                matched += 1
    # one origin, a whole second (the table may move a start by a few ns: ingest's repairs)
    if origins:
        second = round(origins.most_common(1)[0][0] / 1e9) * 1_000_000_000
        assert all(abs(o - second) < 1000 for o in origins), origins
    assert all(Decimal(e["ts"]) >= 0 for e in theirs if "ts" in e)
    return matched


@pytest.mark.parametrize("rel", SHARED)
def test_shared_traces(rel: str, tmp_path: Path) -> None:
    result, events = check(shared_trace(rel), tmp_path / "out.json.gz")
    names = {
        e["args"]["name"] for e in events if e.get("ph") == "M" and "name" in e.get("args", {})
    }
    if result.devices and any(d.idle_ns for d in result.devices):
        assert any("idle by cause" in n for n in names)
    if rel.endswith("job128_sampled"):  # a process per rank, kernels on the job clock
        procs = {e["pid"] for e in events if e.get("ph") != "M"}
        assert procs == {RANK_PID_BASE + r for r in result.session.ranks}
        theirs = [e for e in events if not str(e.get("cat", "")).startswith("tf.")]
        assert _check_job_clock(result, theirs) > 1000


@drawn_shapes_settings(25)
@given(shape=shapes.shapes())
def test_drawn_shapes(shape: shapes.Shape) -> None:
    for fmt in shapes.FORMATS:  # the same drawn timeline in both formats
        one = dataclasses.replace(shape, fmt=fmt, options={})
        with tempfile.TemporaryDirectory(prefix="tf-annotate-") as tmp:
            check(one.write(Path(tmp)), Path(tmp) / "out.json")


def test_array_format_and_a_cut_file(tmp_path: Path) -> None:
    """The Chrome array format gets tf's events after its ``[``; a cut file (salvaged by the
    reader) is re-encoded, every event it still holds unchanged."""
    tr = synth.training_loop(steps=3)
    src = tr.write_kineto(tmp_path / "t.pt.trace.json")
    doc = json.loads(src.read_text())
    arr = tmp_path / "arr.json"
    arr.write_text(json.dumps(doc["traceEvents"]))
    check(arr, tmp_path / "arr.out.json")
    text = src.read_text()
    cut = tmp_path / "cut.pt.trace.json"
    cut.write_text(text[: int(len(text) * 0.8)])
    result, events = annotate(cut, tmp_path / "cut.out.json.gz")
    assert any("cut" in w for w in result.warnings)
    kept = Counter(_key(e) for e in events if not str(e.get("cat", "")).startswith("tf."))
    orig = [_key(e) for e in json.loads(text, parse_float=Decimal)["traceEvents"]]
    assert sum(1 for k in orig if kept[k]) >= len(orig) // 2  # what the reader kept


def test_files_the_copy_cannot_take(tmp_path: Path) -> None:
    """A file whose text is not plain JSON (NaN literals, an array without its ``]``) has its
    events re-encoded: the output is strict JSON; an annotated file is refused (exit 2)."""
    tr = synth.training_loop(steps=2)
    doc = json.loads(tr.write_kineto(tmp_path / "t.pt.trace.json").read_text())
    events = doc["traceEvents"]
    nan = tmp_path / "nan.json"
    odd = '{"ph": "i", "name": "n", "pid": 1, "tid": 1, "ts": 0, "args": {"x": NaN}}, '
    nan.write_text(json.dumps(doc).replace('"traceEvents": [', '"traceEvents": [' + odd, 1))
    unclosed = tmp_path / "open.json"
    unclosed.write_text(json.dumps(events)[:-1])
    for src in (nan, unclosed):
        out = tmp_path / f"{src.stem}.out.json"
        _result, got = annotate(src, out)
        assert any(e.get("cat") == "tf.idle" for e in got)
        constants: list[str] = []
        json.loads(out.read_text(), parse_constant=constants.append)
        assert constants == [], f"{src}: {constants} written"
    again = tmp_path / "again.json.gz"
    tf = [str(Path(sys.executable).parent / "tf"), "analyze", "--no-cache"]
    src = tr.write_kineto(tmp_path / "t2.pt.trace.json.gz")
    first = tmp_path / "first.json.gz"
    subprocess.run([*tf, str(src), "--annotate", str(first)], check=True, capture_output=True)
    done = subprocess.run(
        [*tf, str(first), "--annotate", str(again)], check=False, capture_output=True, text=True
    )
    assert done.returncode == 2 and "already annotated" in done.stderr, done.stderr
    assert not again.exists()


def test_cli(tmp_path: Path) -> None:
    src = synth.training_loop(steps=2).write_kineto(tmp_path / "t.pt.trace.json.gz")
    out = tmp_path / "ann.json.gz"
    tf = [str(Path(sys.executable).parent / "tf"), "analyze", str(src), "--no-cache"]
    done = subprocess.run(
        [*tf, "--annotate", str(out)], check=False, capture_output=True, text=True
    )
    assert done.returncode == 0, done.stderr
    assert any(e.get("cat") == "tf.idle" for e in _events(_read(out)))
    for bad in (tmp_path / "ann.png", src, tmp_path / "missing" / "a.json.gz"):
        done = subprocess.run(
            [*tf, "--annotate", str(bad)], check=False, capture_output=True, text=True
        )
        assert done.returncode == 2 and "Traceback" not in done.stderr, done.stderr
        assert done.stderr.count("\n") == 1
