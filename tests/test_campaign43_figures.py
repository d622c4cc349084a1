"""What the issue-43 fuzzing campaign found, part 2 (part 1: ``test_campaign43``): memory
limits and the words of a refusal, impossible figures (findings within their window, suspect
rows flagged), and wording (a gzip cut in its first bytes, a Latin-1 file name)."""

from __future__ import annotations

import gzip
import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from tests.conftest import run_cli
from tests.test_campaign43 import EXAMPLE, _one_line_refusal


@pytest.fixture(autouse=True)
def _private_dirs(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))


# --- memory: the process's limits, and the words of a refusal -------------------------------


def _fake_proc(root: Path, cgroup: str, meminfo_kib: int, status_vm_kib: int = 0) -> None:
    (root / "proc/self").mkdir(parents=True)
    (root / "proc/meminfo").write_text(
        f"MemTotal:       99999999 kB\nMemAvailable:   {meminfo_kib} kB\n"
    )
    (root / "proc/self/cgroup").write_text(cgroup)
    (root / "proc/self/status").write_text(f"Name:\tpython\nVmSize:\t{status_vm_kib} kB\n")


def _write(path: Path, text: str) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text)


GIB = 1 << 30


def test_available_memory_takes_the_cgroup_v2_limit(tmp_path: Path) -> None:
    from traceforensics.model.memory import available_memory

    _fake_proc(tmp_path, "0::/job/step\n", meminfo_kib=64 * (GIB >> 10))
    step = tmp_path / "sys/fs/cgroup/job/step"
    _write(step / "memory.max", f"{4 * GIB}\n")
    _write(step / "memory.current", f"{3 * GIB}\n")
    _write(step / "memory.stat", f"anon 1\ninactive_file {GIB // 2}\n")
    # the machine has 64 GiB free; the cgroup allows 4 GiB of which 2.5 GiB are in use
    assert available_memory(tmp_path) == 4 * GIB - (3 * GIB - GIB // 2)
    # a parent's tighter limit wins; "max" means none
    _write(tmp_path / "sys/fs/cgroup/job/memory.max", f"{2 * GIB}\n")
    _write(tmp_path / "sys/fs/cgroup/job/memory.current", f"{GIB + 5}\n")
    assert available_memory(tmp_path) == GIB - 5
    _write(tmp_path / "sys/fs/cgroup/job/memory.max", "max\n")
    assert available_memory(tmp_path) == 4 * GIB - (3 * GIB - GIB // 2)


def test_available_memory_takes_the_cgroup_v1_limit_and_meminfo(tmp_path: Path) -> None:
    from traceforensics.model.memory import available_memory

    _fake_proc(tmp_path, "4:memory:/batch/7\n1:cpu:/\n0::/\n", meminfo_kib=(3 * GIB) >> 10)
    leaf = tmp_path / "sys/fs/cgroup/memory/batch/7"
    _write(leaf / "memory.limit_in_bytes", f"{8 * GIB}\n")
    _write(leaf / "memory.usage_in_bytes", f"{GIB}\n")
    _write(leaf / "memory.stat", "total_inactive_file 0\n")
    _write(tmp_path / "sys/fs/cgroup/memory/memory.limit_in_bytes", "9223372036854771712\n")
    _write(tmp_path / "sys/fs/cgroup/memory/memory.usage_in_bytes", "5\n")
    # the cgroup leaves 7 GiB, the machine only 3: the least
    assert available_memory(tmp_path) == 3 * GIB
    _write(leaf / "memory.limit_in_bytes", f"{2 * GIB}\n")
    assert available_memory(tmp_path) == GIB


def test_available_memory_takes_rlimit_as(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    import resource

    from traceforensics.model import memory

    _fake_proc(tmp_path, "0::/\n", meminfo_kib=64 * (GIB >> 10), status_vm_kib=(GIB >> 10))
    monkeypatch.setattr(resource, "getrlimit", lambda _which: (3 * GIB, resource.RLIM_INFINITY))
    assert memory.available_memory(tmp_path) == 2 * GIB
    monkeypatch.setattr(
        resource, "getrlimit", lambda _which: (resource.RLIM_INFINITY, resource.RLIM_INFINITY)
    )
    assert memory.available_memory(tmp_path) == 64 * GIB
    assert memory.available_memory(tmp_path / "nothing") is None  # no /proc: nothing known


def test_a_trace_beyond_the_address_space_limit_is_not_enough_memory(tmp_path: Path) -> None:
    """The machine has the memory, the process may not use it (RLIMIT_AS): the pre-check
    refuses with "not enough memory" and what to do, before reading."""
    path = tmp_path / "big.json"
    with path.open("wb") as fh:  # sparse: costs no disk
        fh.write(b'{"traceEvents": [')
        fh.truncate(2 * GIB)
    script = (
        "import resource, sys\n"
        "from traceforensics.cli.main import main\n"
        "from traceforensics.model.memory import _fields\n"
        "from pathlib import Path\n"
        "vm = _fields(Path('/proc/self/status'))['VmSize'] * 1024\n"
        "resource.setrlimit(resource.RLIMIT_AS, (vm + (512 << 20), resource.RLIM_INFINITY))\n"
        "main(['analyze', sys.argv[1], '--no-cache'])\n"
    )
    proc = subprocess.run(
        [sys.executable, "-c", script, str(path)],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    line = _one_line_refusal(proc.returncode, proc.stderr)
    assert "not enough memory" in line and "--steps" in line and "malformed" not in line


def test_a_load_that_runs_out_of_memory_says_so(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    from traceforensics.ingest.kineto import load

    def exhausted(path: Path) -> None:
        raise MemoryError

    monkeypatch.setattr(load, "read_decoded", exhausted)
    path = tmp_path / "t.json.gz"
    path.write_bytes(EXAMPLE.read_bytes())
    code, _out, err = run_cli(["analyze", str(path), "--no-cache"], capsys)
    line = _one_line_refusal(code, err)
    assert "not enough memory" in line and "malformed" not in line


# --- impossible figures: findings within their window, suspect rows flagged -----------------


def _example_doc() -> Any:
    return json.loads(gzip.decompress(EXAMPLE.read_bytes()))


def _gpu_events(doc: Any) -> list[Any]:
    return [e for e in doc["traceEvents"] if e.get("cat") in ("kernel", "gpu_memcpy", "gpu_memset")]


def _analysed(path: Path, capsys: pytest.CaptureFixture[str]) -> Any:
    code, out, err = run_cli(["analyze", str(path), "--no-cache", "--json"], capsys)
    assert code == 0, err
    return json.loads(out)


def _within_windows(result: Any) -> None:
    windows = {(d["rank"], d["device"]): d["window_ns"] for d in result["devices"]}
    for f in result["findings"]:
        assert f["recoverable_ns"] <= windows[(f["rank"], f["device"])], f["title"]
        assert 0 <= f["share_of_window"] <= 1, f["title"]


def test_a_kernel_of_292_years_is_flagged_and_no_finding_passes_its_window(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    doc = _example_doc()
    kernels = [e for e in _gpu_events(doc) if e.get("cat") == "kernel"]
    kernels[len(kernels) // 2]["dur"] = 292 * 365 * 86_400 * 1e6  # µs
    path = tmp_path / "long.json"
    path.write_text(json.dumps(doc))
    result = _analysed(path, capsys)
    _within_windows(result)
    eff = [f for f in result["findings"] if f["category"] == "kernel_efficiency"]
    assert eff and "capped at the window" in eff[0]["title"]
    flagged = [w for w in result["warnings"] if "longer than the rest of the trace" in w]
    assert len(flagged) == 1 and flagged[0].startswith("1 GPU row(s)")


def test_duplicated_events_are_counted_and_flagged(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    doc = _example_doc()
    events = doc["traceEvents"]
    assert isinstance(events, list)
    doc["traceEvents"] = events + [dict(e) for e in events]
    path = tmp_path / "twice.json"
    path.write_text(json.dumps(doc))
    result = _analysed(path, capsys)
    _within_windows(result)
    # independent count: the original's GPU rows with a duration, each written twice
    once = [e for e in _gpu_events(_example_doc()) if float(e.get("dur") or 0) > 0]
    keys = {(e.get("cat"), e["args"].get("stream"), e["ts"], e["dur"], e["name"]) for e in once}
    assert len(keys) == len(once)  # the original has no copies of its own
    flagged = [w for w in result["warnings"] if "exact copies" in w]
    assert flagged == [
        f"{len(once)} of {2 * len(once)} GPU rows are exact copies of another (same stream, "
        "start, duration and name): the trace was written or merged twice; their time counts "
        "twice in busy and kernel figures; re-export the trace"
    ]


def test_a_sound_trace_has_no_suspect_rows(capsys: pytest.CaptureFixture[str]) -> None:
    result = _analysed(EXAMPLE, capsys)
    _within_windows(result)
    assert not [w for w in result["warnings"] if "exact copies" in w or "longer than" in w]


def test_the_cap_is_one_rule_for_every_finding() -> None:
    """``build._within_window`` against a plain min: recoverable and share both bounded."""
    from dataclasses import replace

    from traceforensics.analysis.findings.build import _within_window
    from traceforensics.analysis.findings.results import Finding

    class Rec:  # the two fields the rule reads
        window_ns = 1_000

    base = Finding("io", 0, 0, 0, 0.0, "t", "r", "low")
    for ns, share in [(0, 0.0), (999, 0.999), (1_000, 1.0), (1_190, 1.19), (10**20, 1e13)]:
        got = _within_window(replace(base, recoverable_ns=ns, share_of_window=share), Rec())
        assert got.recoverable_ns == min(ns, 1_000)
        assert got.share_of_window == min(share, 1.0)


# --- wording -------------------------------------------------------------------------------


@pytest.mark.parametrize("keep", [1, 2, 10, 18, 30, 63])
def test_a_gzip_cut_in_its_first_bytes_is_cut_not_empty(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], keep: int
) -> None:
    path = tmp_path / "t.json.gz"
    path.write_bytes(EXAMPLE.read_bytes()[:keep])
    code, _out, err = run_cli(["analyze", str(path), "--no-cache"], capsys)
    line = _one_line_refusal(code, err)
    assert "empty" not in line
    if keep >= 2:  # (one byte is not even the gzip magic: not a trace at all)
        assert f"cut off after {keep} bytes" in line


def test_an_empty_gzip_stream_is_still_empty(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = tmp_path / "t.json.gz"
    path.write_bytes(gzip.compress(b"", mtime=0))
    code, _out, err = run_cli(["analyze", str(path), "--no-cache"], capsys)
    assert "the file is empty" in _one_line_refusal(code, err)


def test_a_latin1_name_shows_its_byte(tmp_path: Path) -> None:
    """``caf\\xe9`` (Latin-1 é) printed as ``\\udce9`` (Python's surrogate); now as the byte,
    in the one-line error and the text report. The JSON keeps the path exact (its
    ``\\udce9`` escape decodes back to the name: a script can open the file)."""
    raw = os.fsencode(tmp_path) + b"/caf\xe9.json.gz"
    with open(raw, "wb") as fh:
        fh.write(EXAMPLE.read_bytes())
    bad = os.fsencode(tmp_path) + b"/bad\xe9.json"
    with open(bad, "wb") as fh:
        fh.write(b"not a trace")
    env = {**os.environ, "LC_ALL": "C.UTF-8", "PYTHONIOENCODING": "utf-8"}
    tf = [sys.executable, "-c", "from traceforensics.cli.entry import main; main()"]

    def run(*argv: str | bytes) -> subprocess.CompletedProcess[bytes]:
        return subprocess.run([*tf, *argv], capture_output=True, env=env, timeout=120, check=False)

    refused = run("analyze", bad, "--no-cache")
    line = refused.stderr.decode()
    assert refused.returncode == 2 and "bad\\xe9.json" in line and "udc" not in line
    text = run("analyze", raw, "--no-cache")
    assert text.returncode == 0 and "caf\\xe9.json.gz" in text.stdout.decode()
    assert "udc" not in text.stdout.decode()
    doc = run("analyze", raw, "--no-cache", "--json")
    assert json.loads(doc.stdout)["inputs"][0]["path"] == os.fsdecode(raw)
