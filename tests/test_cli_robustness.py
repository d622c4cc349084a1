"""Break `tf analyze` / `tf monitor` as a user would.

Contract under test: bad input or a bad option ends with exit code 2 and exactly one line on stderr
naming the file (or option), the problem and what to do; never a traceback, never a silently
empty or misleading result; input files are never modified; the session cache never writes
beside the input. Every case builds its own inputs under ``tmp_path``.
"""

from __future__ import annotations

import gzip
import hashlib
import json
import math
import os
import re
import shutil
import sqlite3
import stat
from pathlib import Path
from typing import Any

import pytest

from tests.conftest import FIXTURES, nonempty, plain_union, run_cli, shared_trace

MODERN_SQLITE = FIXTURES / "nsys" / "modern.sqlite"
MONITOR_LOG = FIXTURES / "monitor" / "runbook_zh_1hz.txt"


# --------------------------------------------------------------------------- helpers


@pytest.fixture(autouse=True)
def _isolated_env(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Every test gets its own cache directory and no debug tracebacks."""
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "xdg-cache"))
    monkeypatch.delenv("TF_DEBUG", raising=False)


def _assert_one_line_error(code: int, err: str, must_name: str, expected_code: int = 2) -> str:
    lines = err.strip().splitlines()
    assert code == expected_code, f"exit {code}, stderr: {err!r}"
    assert "Traceback" not in err, err
    assert len(lines) == 1, f"expected one stderr line, got {len(lines)}: {err!r}"
    assert must_name in lines[0], f"{must_name!r} not named in {lines[0]!r}"
    return lines[0]


def _kernel(name: str, ts: float, dur: float, **args: Any) -> dict[str, Any]:
    return {
        "ph": "X",
        "cat": "kernel",
        "name": name,
        "pid": 0,
        "tid": 7,
        "ts": ts,
        "dur": dur,
        "args": {"device": 0, "stream": 7, **args},
    }


def _cpu(name: str, ts: float, dur: float) -> dict[str, Any]:
    return {"ph": "X", "cat": "cpu_op", "name": name, "pid": 1, "tid": 1, "ts": ts, "dur": dur}


def _good_events() -> list[dict[str, Any]]:
    # kernels [10,110) [200,300) [400,405) us: busy 205 us, window 395 us, idle 190 us
    return [
        _cpu("aten::mm", 0, 50),
        _kernel("gemm", 10, 100),
        _kernel("gemm", 200, 100),
        _kernel("relu", 400, 5),
    ]


def _write_json(path: Path, obj: Any) -> Path:
    path.write_text(json.dumps(obj))
    return path


def _good_trace(tmp: Path, name: str = "good.json") -> Path:
    return _write_json(tmp / name, {"traceEvents": _good_events()})


def _json_out(out: str) -> dict[str, Any]:
    def _no_constants(c: str) -> Any:
        raise AssertionError(f"non-standard JSON constant {c}")

    obj = json.loads(out, parse_constant=_no_constants)
    assert isinstance(obj, dict)
    return obj


def _union_ns(intervals: list[tuple[int, int]]) -> int:
    """Independent union length (plain Python) of half-open [s, e) intervals."""
    return sum(e - s for s, e in plain_union(list(intervals)))


def _assert_device_invariants(doc: dict[str, Any]) -> None:
    for dev in doc["devices"]:
        assert dev["window_ns"] == dev["busy_ns"] + dev["idle_ns"], dev
        assert dev["idle_ns"] >= 0 and dev["busy_ns"] >= 0, dev
        assert sum(dev["idle_by_cause"].values()) == dev["idle_ns"], (
            f"idle_by_cause sums to {sum(dev['idle_by_cause'].values())}, idle_ns={dev['idle_ns']}"
        )


def _snapshot(root: Path) -> dict[str, str]:
    """Relative path -> sha256 of every file under root (or root itself)."""
    files = [root] if root.is_file() else sorted(p for p in root.rglob("*") if p.is_file())
    return {
        str(p.relative_to(root.parent)): hashlib.sha256(p.read_bytes()).hexdigest() for p in files
    }


# --------------------------------------------------------------------------- trace inputs


def test_missing_file(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    code, out, err = run_cli(["analyze", str(tmp_path / "nope.json")], capsys)
    _assert_one_line_error(code, err, "nope.json")
    assert out == ""


def test_directory_without_traces(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    d = tmp_path / "runs"
    d.mkdir()
    (d / "notes.txt").write_text("no traces here")
    code, out, err = run_cli(["analyze", str(d)], capsys)
    _assert_one_line_error(code, err, "runs")
    assert out == ""


def test_directory_with_junk_and_a_trace(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Junk beside a good rank file: either a one-line error naming the junk file, or an
    analysis that names the skipped junk file in a warning — never a silent partial result."""
    d = tmp_path / "mixed"
    d.mkdir()
    (d / "README.txt").write_text("hello")
    (d / "junk.json").write_text("{broken")
    _good_trace(d, "rank0.pt.trace.json")
    before = _snapshot(d)
    code, out, err = run_cli(["analyze", "--json", str(d)], capsys)
    if code == 0:
        assert "junk.json" in " ".join(_json_out(out)["warnings"])
    else:
        _assert_one_line_error(code, err, "junk.json")
    assert _snapshot(d) == before


def test_old_chrome_list_format_is_read(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    events = _good_events()
    path = _write_json(tmp_path / "list.json", events)
    code, out, err = run_cli(["analyze", "--json", "--no-cache", str(path)], capsys)
    assert code == 0, err
    doc = _json_out(out)
    (dev,) = doc["devices"]
    kernels = [e for e in events if e["cat"] == "kernel"]
    expected_busy = _union_ns([(e["ts"] * 1000, (e["ts"] + e["dur"]) * 1000) for e in kernels])
    assert dev["kernel_count"] == len(kernels)
    assert dev["busy_ns"] == expected_busy
    first = min(e["ts"] for e in kernels)
    last = max(e["ts"] + e["dur"] for e in kernels)
    assert dev["window_ns"] == (last - first) * 1000
    _assert_device_invariants(doc)


def test_events_without_ts_or_dur(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    ev = {"ph": "X", "cat": "kernel", "name": "k", "pid": 0, "tid": 7, "args": {"device": 0}}
    path = _write_json(tmp_path / "nots.json", {"traceEvents": [ev] * 5})
    code, out, err = run_cli(["analyze", "--no-cache", str(path)], capsys)
    _assert_one_line_error(code, err, "nots.json")
    assert out == ""


@pytest.mark.parametrize("ts", [10**30, 2**62, 1e300])
def test_huge_timestamps(ts: float, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """A timestamp beyond int64 ns costs its event (issue 10: one bad field costs that field):
    the rest is analysed exactly as without it, with a warning; alone, it is refused."""
    events = [*_good_events(), _kernel("gemm", ts, 100)]
    path = _write_json(tmp_path / "huge.json", {"traceEvents": events})
    code, out, err = run_cli(["analyze", "--no-cache", "--json", str(path)], capsys)
    assert code == 0, err
    doc = json.loads(out)
    assert any("1 events with a ts/dur" in w for w in doc["warnings"]), doc["warnings"]
    code, want, _ = run_cli(["analyze", "--no-cache", "--json", str(_good_trace(tmp_path))], capsys)
    assert doc["devices"] == json.loads(want)["devices"]
    alone = _write_json(tmp_path / "alone.json", {"traceEvents": [_kernel("gemm", ts, 100)]})
    code, _out, err = run_cli(["analyze", "--no-cache", str(alone)], capsys)
    assert "int64" in _assert_one_line_error(code, err, "alone.json")


def test_nan_and_infinity_literals(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    body = json.dumps({"traceEvents": _good_events()})
    body = body.replace('"ts": 200', '"ts": NaN').replace('"dur": 5', '"dur": Infinity')
    assert "NaN" in body and "Infinity" in body
    path = tmp_path / "nan.json"
    path.write_text(body)
    code, _out, err = run_cli(["analyze", "--no-cache", str(path)], capsys)
    _assert_one_line_error(code, err, "nan.json")


def test_zero_duration_kernel_keeps_invariants(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """A zero-length kernel must not open a window the gap pass does not see
    (currently: devices[].window_ns counts it, idle_by_cause does not, so they disagree)."""
    events = [_kernel("gemm", 10, 0), _kernel("gemm", 200, 100), _kernel("gemm", 400, 100)]
    path = _write_json(tmp_path / "zerodur.json", {"traceEvents": events})
    code, out, err = run_cli(["analyze", "--json", "--no-cache", str(path)], capsys)
    assert code == 0, err
    _assert_device_invariants(_json_out(out))


def test_negative_duration(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """Either refused (one line) or analyzed with a warning AND consistent numbers."""
    events = [_cpu("a", 0, 50), _kernel("gemm", 10, -100), _kernel("gemm", 200, 100)]
    path = _write_json(tmp_path / "negdur.json", {"traceEvents": events})
    code, out, err = run_cli(["analyze", "--json", "--no-cache", str(path)], capsys)
    if code == 0:
        doc = _json_out(out)
        assert any("negative" in w for w in doc["warnings"]), doc["warnings"]
        _assert_device_invariants(doc)
    else:
        _assert_one_line_error(code, err, "negdur.json")


def test_cpu_only_trace(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path = _write_json(
        tmp_path / "cpu.json", {"traceEvents": [_cpu("aten::add", 0, 50), _cpu("b", 100, 5)]}
    )
    code, out, err = run_cli(["analyze", "--no-cache", str(path)], capsys)
    assert code == 0, err
    assert "no gpu activity" in out.lower()
    code, out, err = run_cli(["analyze", "--json", "--no-cache", str(path)], capsys)
    assert code == 0, err
    doc = _json_out(out)
    assert doc["devices"] == []
    assert doc["event_count"] == 2


def test_kernels_with_string_pid_gpu_n(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """No args.device, pid "GPU 0": the device index comes from the pid."""
    kernels = [
        {"ph": "X", "cat": "kernel", "name": "gemm", "pid": "GPU 0", "tid": "stream 7"}
        | {"ts": 10 + i * 200, "dur": 100, "args": {}}
        for i in range(3)
    ]
    path = _write_json(tmp_path / "strpid.json", {"traceEvents": [_cpu("a", 0, 5), *kernels]})
    code, out, err = run_cli(["analyze", "--json", "--no-cache", str(path)], capsys)
    assert code == 0, err
    (dev,) = _json_out(out)["devices"]
    assert dev["device"] == 0 and dev["kernel_count"] == 3
    assert dev["busy_ns"] == 300_000


def test_kernels_without_any_device_are_not_reported_as_cpu_only(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """All kernels lack args.device and have non-numeric pids: today they are dropped and the
    report says 'No GPU activity (CPU-only)', exit 0 — misleading. Expect exit 2 naming the
    file, or the kernels placed on a device."""
    kernels = [
        {"ph": "X", "cat": "kernel", "name": "gemm", "pid": "host-abc", "tid": "stream x"}
        | {"ts": 10 + i * 200, "dur": 100, "args": {}}
        for i in range(3)
    ]
    path = _write_json(tmp_path / "nodevice.json", {"traceEvents": kernels})
    code, out, err = run_cli(["analyze", "--json", "--no-cache", str(path)], capsys)
    if code == 0:
        assert _json_out(out)["devices"], "3 kernels silently dropped; reported as CPU-only"
    else:
        _assert_one_line_error(code, err, "nodevice.json")


def test_no_usable_events_is_an_error(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """Every event lacks ph/cat: today '0 events ... CPU-only', exit 0 (silently empty)."""
    events = [dict(e, ph=None, cat=5) for e in _good_events()]
    path = _write_json(tmp_path / "unusable.json", {"traceEvents": events})
    code, _out, err = run_cli(["analyze", "--no-cache", str(path)], capsys)
    _assert_one_line_error(code, err, "unusable.json")


def test_gzip_of_non_json(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path = tmp_path / "t.json.gz"
    path.write_bytes(gzip.compress(b"hello world, definitely not json"))
    code, _out, err = run_cli(["analyze", "--no-cache", str(path)], capsys)
    _assert_one_line_error(code, err, "t.json.gz")


def test_zero_byte_gz(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path = tmp_path / "zero.json.gz"
    path.write_bytes(b"")
    code, _out, err = run_cli(["analyze", "--no-cache", str(path)], capsys)
    _assert_one_line_error(code, err, "zero.json.gz")


def test_truncated_sqlite(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    data = MODERN_SQLITE.read_bytes()
    path = tmp_path / "half.sqlite"
    path.write_bytes(data[: len(data) // 2])
    before = _snapshot(path)
    code, _out, err = run_cli(["analyze", str(path)], capsys)
    _assert_one_line_error(code, err, "half.sqlite")
    assert _snapshot(path) == before


def test_sqlite_missing_stringids(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """Without StringIds every kernel/API name is lost. Today: exit 0, '<unnamed kernel>' and no
    warning. Expect exit 2 naming the file, or a warning that names the missing table."""
    path = tmp_path / "nostrings.sqlite"
    shutil.copy(MODERN_SQLITE, path)
    con = sqlite3.connect(path)
    con.execute("DROP TABLE StringIds")
    con.commit()
    con.close()
    code, out, err = run_cli(["analyze", "--json", "--no-cache", str(path)], capsys)
    if code == 0:
        warnings = " ".join(_json_out(out)["warnings"])
        assert "StringIds" in warnings, f"names silently lost; warnings: {warnings!r}"
    else:
        _assert_one_line_error(code, err, "nostrings.sqlite")


def _fake_nsys(bin_dir: Path, body: str) -> None:
    bin_dir.mkdir(exist_ok=True)
    script = bin_dir / "nsys"
    script.write_text("#!/bin/sh\n" + body)
    script.chmod(script.stat().st_mode | stat.S_IXUSR | stat.S_IXGRP | stat.S_IXOTH)


def test_nsys_rep_without_nsys(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    empty_bin = tmp_path / "bin"
    empty_bin.mkdir()
    monkeypatch.setenv("PATH", str(empty_bin))
    path = tmp_path / "report.nsys-rep"
    path.write_bytes(b"\x00" * 1000)
    code, _out, err = run_cli(["analyze", str(path)], capsys)
    line = _assert_one_line_error(code, err, "report.nsys-rep")
    assert "nsys" in line
    beside = {p.name for p in tmp_path.iterdir()} - {"xdg-cache"}
    assert beside == {"bin", "report.nsys-rep"}, "nothing may be written beside the input"


def test_nsys_rep_failing_export_is_one_line(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """`nsys export` fails: exit 2 and ONE line (today a progress line precedes the error)."""
    _fake_nsys(tmp_path / "bin", 'echo "nsys: fatal: boom" >&2\nexit 1\n')
    monkeypatch.setenv("PATH", f"{tmp_path / 'bin'}{os.pathsep}/usr/bin{os.pathsep}/bin")
    path = tmp_path / "report.nsys-rep"
    path.write_bytes(b"\x00" * 1000)
    code, _out, err = run_cli(["analyze", str(path)], capsys)
    _assert_one_line_error(code, err, "report.nsys-rep")


def test_nsys_rep_broken_export_is_not_reused(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """nsys 'succeeds' but writes garbage: the broken export must not be kept and reused on the
    next run (today it is, and the error blames the derived .tf.sqlite file)."""
    counter = tmp_path / "calls"
    _fake_nsys(
        tmp_path / "bin",
        f'echo x >> "{counter}"\n'
        'while [ $# -gt 0 ]; do case "$1" in --output|-o) out="$2";; esac; shift; done\n'
        'case "$out" in *.sqlite) f="$out";; *) f="$out.sqlite";; esac\n'
        'echo garbage > "$f"\nexit 0\n',
    )
    monkeypatch.setenv("PATH", f"{tmp_path / 'bin'}{os.pathsep}/usr/bin{os.pathsep}/bin")
    path = tmp_path / "report.nsys-rep"
    path.write_bytes(b"\x00" * 1000)
    for _ in range(2):
        code, _out, err = run_cli(["analyze", str(path)], capsys)
        assert code == 2, err
        assert "Traceback" not in err
    assert counter.read_text().count("x") == 2, "second run reused the broken export"


def test_cache_never_writes_beside_input(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    d = tmp_path / "inputs"
    d.mkdir()
    _good_trace(d, "rank0.pt.trace.json")
    before = _snapshot(d)
    mode = d.stat().st_mode
    d.chmod(0o555)  # read-only (root ignores it; the snapshot check below still holds)
    try:
        first = run_cli(["analyze", str(d)], capsys)
        second = run_cli(["analyze", str(d)], capsys)
    finally:
        d.chmod(mode)
    assert first[0] == 0 and second[0] == 0, (first[2], second[2])
    assert first[1] == second[1], "cached re-run differs from the first run"
    assert _snapshot(d) == before
    assert sorted(p.name for p in d.iterdir()) == ["rank0.pt.trace.json"]
    sessions = tmp_path / "xdg-cache" / "traceforensics" / "sessions"
    assert sessions.is_dir() and any(sessions.iterdir())


def test_unwritable_cache_dir_still_analyzes(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    path = _good_trace(tmp_path)
    blocker = tmp_path / "not-a-dir"
    blocker.write_text("a file where the cache directory should be")
    monkeypatch.setenv("XDG_CACHE_HOME", str(blocker))  # mkdir fails even for root
    code, out, err = run_cli(["analyze", "--json", str(path)], capsys)
    assert code == 0, err
    assert _json_out(out)["devices"][0]["busy_ns"] == 205_000
    assert blocker.read_text().startswith("a file")


def test_corrupt_cache_entry_is_rebuilt(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """A truncated cache entry: it once killed every later run with exit 3 (polars'
    ComputeError was not caught); now a miss, rebuilt."""
    path = _good_trace(tmp_path)
    code, reference, err = run_cli(["analyze", str(path)], capsys)
    assert code == 0, err
    entries = [p for p in (tmp_path / "xdg-cache" / "traceforensics").rglob("*") if p.is_file()]
    assert entries
    for p in entries:
        p.write_bytes(p.read_bytes()[:50])
    code, out, err = run_cli(["analyze", str(path)], capsys)
    assert code == 0, err
    assert out == reference


# --------------------------------------------------------------------------- output paths


@pytest.mark.parametrize("flag", ["--markdown", "--plot"])
def test_output_into_missing_directory(
    flag: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = _good_trace(tmp_path)
    target = tmp_path / "no" / "such" / "dir" / "out.png"
    code, _out, err = run_cli(["analyze", str(path), flag, str(target)], capsys)
    _assert_one_line_error(code, err, "out.png")


def test_markdown_onto_a_directory(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path = _good_trace(tmp_path)
    target = tmp_path / "somedir"
    target.mkdir()
    code, _out, err = run_cli(["analyze", str(path), "--markdown", str(target)], capsys)
    _assert_one_line_error(code, err, "somedir")


@pytest.mark.parametrize("flag", ["--markdown", "--plot"])
def test_output_never_overwrites_the_input(
    flag: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """`--markdown trace.json` today replaces the user's trace with the Markdown report."""
    path = _good_trace(tmp_path, "trace.json")
    before = _snapshot(path)
    code, _out, err = run_cli(["analyze", str(path), flag, str(path)], capsys)
    assert _snapshot(path) == before, f"{flag} overwrote the input trace"
    _assert_one_line_error(code, err, "trace.json")


def test_markdown_never_overwrites_the_monitor_log(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = _good_trace(tmp_path)
    log = tmp_path / "smi.txt"
    shutil.copy(MONITOR_LOG, log)
    before = _snapshot(log)
    code, _out, err = run_cli(
        ["analyze", str(path), "--monitor", str(log), "--markdown", str(log)], capsys
    )
    assert _snapshot(log) == before, "--markdown overwrote the monitoring log"
    assert code == 2, err


def test_plot_with_unsupported_extension(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = _good_trace(tmp_path)
    code, _out, err = run_cli(["analyze", str(path), "--plot", str(tmp_path / "plot.txt")], capsys)
    _assert_one_line_error(code, err, "plot.txt")


def test_monitor_plot_into_missing_directory(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    target = tmp_path / "no" / "dir" / "m.png"
    code, _out, err = run_cli(["monitor", str(MONITOR_LOG), "--plot", str(target)], capsys)
    _assert_one_line_error(code, err, "m.png")


# --------------------------------------------------------------------------- options


@pytest.mark.parametrize("pattern", ["(", "[a-", "*step"])
def test_invalid_step_pattern(
    pattern: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = _good_trace(tmp_path)
    code, _out, err = run_cli(["analyze", str(path), "--step-pattern", pattern], capsys)
    _assert_one_line_error(code, err, "--step-pattern")


@pytest.mark.parametrize(
    ("option", "value"),
    [
        ("--bin-ms", "0"),
        ("--bin-ms", "-5"),
        ("--bin-ms", "nan"),
        ("--bin-ms", "inf"),
        ("--top", "-1"),
        ("--gaps", "-1"),
        ("--peak-tflops", "0"),
        ("--peak-tflops", "-1"),
        ("--peak-tflops", "nan"),
        ("--short-kernel-us", "-1"),
        ("--short-kernel-us", "nan"),
    ],
)
def test_out_of_range_numeric_option(
    option: str, value: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Today: 0/negative values run and print nonsense (MFU inf%, -40000%, `--top -1` drops
    the last kernel, `--bin-ms -5` makes 1 ns bins: 15.7 M utilization values), nan/inf exit 3."""
    path = _good_trace(tmp_path)
    code, out, err = run_cli(["analyze", str(path), option, value], capsys)
    _assert_one_line_error(code, err, option)
    assert out == ""


def test_gaps_zero_lists_no_gaps(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path = _good_trace(tmp_path)
    code, out, err = run_cli(["analyze", "--json", str(path), "--gaps", "0"], capsys)
    assert code == 0, err
    doc = _json_out(out)
    assert doc["gaps"] == []
    _assert_device_invariants(doc)  # the idle total does not depend on how many gaps are listed
    assert doc["devices"][0]["idle_ns"] == 190_000


def test_top_zero_lists_no_kernels(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path = _good_trace(tmp_path)
    code, out, err = run_cli(["analyze", "--json", str(path), "--top", "0"], capsys)
    assert code == 0, err
    assert _json_out(out)["devices"][0]["top_kernels"] == []


def test_click_usage_error_is_one_line(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """`--top abc`: today click prints Usage + blank line + Error (4 lines)."""
    path = _good_trace(tmp_path)
    code, _out, err = run_cli(["analyze", str(path), "--top", "abc"], capsys)
    _assert_one_line_error(code, err, "--top")


# --------------------------------------------------------------------------- monitoring logs


def _bad_logs(tmp: Path) -> dict[str, Path]:
    logs = {
        "empty.log": b"",
        "garbage.log": b"lorem ipsum\ndolor sit amet\n",
        "binary.log": bytes(range(256)) * 10,
        "header_only.csv": b"timestamp, name, utilization.gpu [%], utilization.memory [%]\n",
    }
    out = {}
    for name, data in logs.items():
        (tmp / name).write_bytes(data)
        out[name] = tmp / name
    out["missing.log"] = tmp / "missing.log"
    return out


@pytest.mark.parametrize(
    "name", ["empty.log", "garbage.log", "binary.log", "header_only.csv", "missing.log"]
)
@pytest.mark.parametrize("command", ["monitor", "analyze"])
def test_bad_monitor_log(
    command: str, name: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    log = _bad_logs(tmp_path)[name]
    before = _snapshot(log) if log.exists() else None
    if command == "monitor":
        argv = ["monitor", str(log)]
    else:
        argv = ["analyze", str(_good_trace(tmp_path)), "--monitor", str(log)]
    code, out, err = run_cli(argv, capsys)
    _assert_one_line_error(code, err, name)
    assert out == ""
    if before is not None:
        assert _snapshot(log) == before


def test_monitor_log_that_is_a_directory(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    d = tmp_path / "logs"
    d.mkdir()
    code, _out, err = run_cli(["monitor", str(d)], capsys)
    _assert_one_line_error(code, err, "logs")


@pytest.mark.parametrize("columns", ["garbage", "util", "util=", "=x", "foo=bar", "util=Nope"])
def test_malformed_columns(columns: str, capsys: pytest.CaptureFixture[str]) -> None:
    code, _out, err = run_cli(["monitor", str(MONITOR_LOG), "--columns", columns], capsys)
    line = _assert_one_line_error(code, err, MONITOR_LOG.name)
    assert "--columns" in line


@pytest.mark.parametrize("value", ["0", "-1", "nan"])
def test_bad_interval(value: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    log = tmp_path / "idx.txt"
    log.write_text("a b\n" + "".join(f"{i} {i * 37 % 100}\n" for i in range(30)))
    code, _out, err = run_cli(
        ["monitor", str(log), "--columns", "util=b", "--interval-s", value], capsys
    )
    _assert_one_line_error(code, err, "--interval-s")


def test_monitor_good_log_still_works(capsys: pytest.CaptureFixture[str]) -> None:
    code, out, err = run_cli(["monitor", "--json", str(MONITOR_LOG)], capsys)
    assert code == 0, err
    doc = _json_out(out)
    assert doc["gpus"] and doc["gpus"][0]["samples"] > 0


# --------------------------------------------------------------------------- real traces

REAL = [
    "kineto/resnet50_v100_workers0.pt.trace.json.gz",
    "nsys/Athrun0109__CS336_assignment2__result.sqlite",
    "tracelens/vllm_decode_cudagraph_rocm.json.gz",
]
_BAD_NUMBER = re.compile(r"\b(nan|inf)\b|nan%|inf%", re.IGNORECASE)
# a negative quantity printed as a duration (offsets are printed as "@-1.2 ms" and are fine)
_NEG_DURATION = re.compile(r"(?<![@\w])-\d[\d.]*\s?(ns|us|µs|ms|s)\b")


def _walk_numbers(obj: Any, path: str = "") -> list[tuple[str, float]]:
    if isinstance(obj, dict):
        return [x for k, v in obj.items() for x in _walk_numbers(v, f"{path}.{k}")]
    if isinstance(obj, list):
        return [x for v in obj for x in _walk_numbers(v, f"{path}[]")]
    if isinstance(obj, (int, float)) and not isinstance(obj, bool):
        return [(path, float(obj))]
    return []


@pytest.mark.parametrize("rel", REAL)
def test_real_trace_json_and_text_are_clean(rel: str, capsys: pytest.CaptureFixture[str]) -> None:
    path = shared_trace(rel)
    code, out, err = run_cli(["analyze", "--json", "--no-cache", str(path)], capsys)
    assert code == 0, err
    doc = _json_out(out)
    assert doc["schema"] == "traceforensics.analysis/1"
    assert doc["devices"]
    _assert_device_invariants(doc)
    for step in doc["steps"]:
        assert sum(step["idle_by_cause"].values()) == step["idle_ns"], step["name"]
    for where, value in nonempty(_walk_numbers(doc)):
        assert math.isfinite(value), where
        if where.endswith(("_ns", "count")) and not where.endswith("start_ns"):
            assert value >= 0, f"{where} = {value}"
    code, text, err = run_cli(["analyze", "--no-cache", str(path)], capsys)
    assert code == 0, err
    assert not _BAD_NUMBER.search(text), _BAD_NUMBER.search(text)
    assert not _NEG_DURATION.search(text), _NEG_DURATION.search(text)
