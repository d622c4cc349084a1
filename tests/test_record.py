"""``tf record -- COMMAND`` (issue 16): a training script is profiled without an edit, through
the injected ``sitecustomize`` (``recording.inject``), and the traces are analysed."""

from __future__ import annotations

import ast
import hashlib
import json
import os
import re
import sys
from pathlib import Path

import polars as pl
import pytest

import traceforensics
from tests.conftest import run_cli
from traceforensics.recording import inject
from traceforensics.recording.child import BOOT_DIR
from traceforensics.recording.settings import ENV_VAR, NSYS_FLAGS

pytest.importorskip("torch")

TRAIN_SMALL = Path(__file__).resolve().parent / "data" / "train_small.py"
SLEEP_S = 0.002  # train_small's default --sleep-ms
BATCH = 4


def _record(
    out: Path, capfd: pytest.CaptureFixture[str], *args: str, flags: tuple[str, ...] = ()
) -> tuple[int, str, str]:
    argv = ["record", "--out", str(out), *flags, "--", sys.executable, str(TRAIN_SMALL), *args]
    return run_cli(argv, capfd)


def _names(session: traceforensics.TraceSession, pattern: str) -> pl.DataFrame:
    return (
        session.events.with_columns(pl.col("name").cast(pl.String))
        .filter(pl.col("name").str.contains(pattern))
        .sort("start_ns")
    )


def test_record_profiles_the_script_untouched(
    tmp_path: Path, capfd: pytest.CaptureFixture[str]
) -> None:
    before = hashlib.sha256(TRAIN_SMALL.read_bytes()).hexdigest()
    code, out, err = _record(tmp_path / "rec", capfd)
    assert code == 0, err
    assert hashlib.sha256(TRAIN_SMALL.read_bytes()).hexdigest() == before
    trace = tmp_path / "rec" / "rank-0.pt.trace.json.gz"
    assert trace.is_file()
    session = traceforensics.load(tmp_path / "rec")  # the folder, as tf analyze reads it
    steps = _names(session, r"^ProfilerStep#\d+$").get_column("name").to_list()
    assert steps == [f"ProfilerStep#{n}" for n in range(4, 9)]
    loads = _names(session, r"^enumerate\(DataLoader\)#_SingleProcessDataLoaderIter")
    assert loads.height == 5  # one batch per step
    assert int(loads.get_column("dur_ns").min()) >= BATCH * SLEEP_S * 1e9
    # the optimizer step ends each step: every recorded step holds exactly one
    opt = _names(session, r"^Optimizer\.step#SGD\.step$")
    assert opt.height == 5
    lines = out.splitlines()  # the script's own output first, then the recording, the report
    assert lines[0] == "train_small: 12 steps, last loss 0.8466"
    assert lines[1].startswith(f"tf record: recorded steps #4-#8 (5) into {trace} (")
    assert "No GPU activity in this trace (CPU-only)" in out
    assert re.search(r"host: data loading .* per step \((\d+\.\d)%\) over 5 recorded steps", out)
    status = json.loads(next((tmp_path / "rec" / BOOT_DIR).glob("status-*.json")).read_text())
    assert status["optimizer_steps"] == 12 and status["error"] == ""


def test_record_json_keeps_stdout_for_the_json(
    tmp_path: Path, capfd: pytest.CaptureFixture[str]
) -> None:
    code, out, err = _record(tmp_path / "rec", capfd, flags=("--json", "--no-cache"))
    assert code == 0, err
    doc = json.loads(out)
    assert doc["schema"] == "traceforensics.analysis/1" and doc["devices"] == []
    # the script's print went to stderr, with the recording line
    assert "train_small: 12 steps" in err and "tf record: recorded steps #4-#8" in err


def test_failing_command_still_reports_then_exits_2(
    tmp_path: Path, capfd: pytest.CaptureFixture[str]
) -> None:
    code, out, err = _record(tmp_path / "rec", capfd, "--fail")
    assert code == 2
    assert "tf record: recorded steps #4-#8 (5)" in out and "No GPU activity" in out
    assert err.strip().splitlines()[-1] == (
        "tf: error: the command exited with code 3; the report covers what it recorded"
    )


def test_too_few_steps_is_one_line(tmp_path: Path, capfd: pytest.CaptureFixture[str]) -> None:
    code, _, err = _record(tmp_path / "rec", capfd, "--steps", "4")
    assert code == 2
    assert err.strip().splitlines()[-1] == (
        "tf: error: no trace was recorded: the run made 3 optimizer steps after the first, and "
        "the schedule records steps #4-#8 (after wait 2 + warmup 2); run more steps or lower "
        "wait/warmup"
    )
    flags = ("--wait", "0", "--warmup", "1", "--active", "2")
    code, out, err = _record(tmp_path / "rec", capfd, "--steps", "4", flags=flags)
    assert code == 0, err  # the same run with a shorter schedule: both active steps whole
    assert "tf record: recorded steps #1-#2 (2)" in out
    assert "note:" not in out


def test_an_earlier_recording_is_not_mixed_in(
    tmp_path: Path, capfd: pytest.CaptureFixture[str]
) -> None:
    out_dir = tmp_path / "rec"
    out_dir.mkdir()
    (out_dir / "rank-1.pt.trace.json.gz").write_bytes(b"old")
    code, out, err = _record(out_dir, capfd)
    assert code == 2 and out == ""
    assert "rank-1.pt.trace.json.gz" in err and "--overwrite" in err
    assert len(err.strip().splitlines()) == 1
    code, out, err = _record(out_dir, capfd, flags=("--overwrite", "--no-analyze"))
    assert code == 0, err
    assert sorted(p.name for p in out_dir.iterdir()) == [BOOT_DIR, "rank-0.pt.trace.json.gz"]


def test_nsys_missing_prints_the_command_and_exits_2(
    tmp_path: Path, capfd: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr("traceforensics.cli.record.shutil.which", lambda _name: None)
    out_dir = tmp_path / "rec"
    code, out, err = run_cli(
        ["record", "--nsys", "--out", str(out_dir), "--", "python", "train.py", "--lr", "3"],
        capfd,
    )
    assert code == 2
    assert err.count("\n") == 1 and "nsys (Nsight Systems) is not on PATH" in err
    assert str(out_dir / "report.nsys-rep") in err
    command = out.strip()
    assert " nsys profile " + " ".join(NSYS_FLAGS) in command
    assert command.endswith(f"-o {out_dir / 'report'} python train.py --lr 3")
    assert f"PYTHONPATH={out_dir / BOOT_DIR}" in command and f"'{ENV_VAR}=" in command
    assert (out_dir / BOOT_DIR / "sitecustomize.py").read_bytes() == Path(
        inject.__file__
    ).read_bytes()


def test_a_missing_command_is_one_line(tmp_path: Path, capfd: pytest.CaptureFixture[str]) -> None:
    code, _, err = run_cli(["record", "--out", str(tmp_path), "--", "no-such-cmd-tf"], capfd)
    assert code == 2
    assert err == "tf: error: no-such-cmd-tf: command not found; check the command after --\n"


def test_the_injected_file_needs_nothing_of_traceforensics() -> None:
    """The command may run another Python than tf's: the injected file imports only the
    standard library and torch."""
    tree = ast.parse(Path(inject.__file__).read_text())
    roots = {
        (n.module or "") if isinstance(n, ast.ImportFrom) else a.name
        for n in ast.walk(tree)
        if isinstance(n, (ast.Import, ast.ImportFrom))
        for a in n.names
    }
    allowed = set(sys.stdlib_module_names) | {"torch", "__future__"}
    assert {r.split(".")[0] for r in roots} <= allowed, roots
    assert inject.ENV_VAR == ENV_VAR


def test_only_the_first_optimizer_counts_steps(
    tmp_path: Path, capfd: pytest.CaptureFixture[str]
) -> None:
    """Two optimizers stepping in one loop (a GAN) still make one profiler step per loop."""
    script = tmp_path / "two_optimizers.py"
    script.write_text(
        "import torch\n"
        "g, d = torch.nn.Linear(8, 8), torch.nn.Linear(8, 1)\n"
        "og, od = torch.optim.SGD(g.parameters(), 0.1), torch.optim.SGD(d.parameters(), 0.1)\n"
        "for _ in range(12):\n"
        "    for opt, net in ((od, d), (og, g)):\n"
        "        opt.zero_grad(); net(torch.randn(4, 8)).sum().backward(); opt.step()\n"
    )
    argv = ["record", "--out", str(tmp_path / "rec"), "--no-analyze", "--", sys.executable]
    code, out, err = run_cli([*argv, str(script)], capfd)
    assert code == 0, err
    assert "tf record: recorded steps #4-#8 (5)" in out
    session = traceforensics.load(tmp_path / "rec")
    steps = _names(session, r"^ProfilerStep#\d+$")
    assert steps.height == 5
    opt = _names(session, r"^Optimizer\.step#SGD\.step$")
    assert opt.height == 10  # both optimizers' steps, two per profiler step


class _Calls:
    """Stands in for the CUDA calls of nsys mode, recording them in order."""

    def __init__(self) -> None:
        self.calls: list[str] = []

    def cudart(self) -> _Calls:
        return self

    def cudaProfilerStart(self) -> None:  # noqa: N802 (CUDA's name)
        self.calls.append("start")

    def cudaProfilerStop(self) -> None:  # noqa: N802
        self.calls.append("stop")


def test_nsys_mode_brackets_the_active_steps(monkeypatch: pytest.MonkeyPatch) -> None:
    import torch

    fake = _Calls()
    monkeypatch.setattr(torch.cuda, "cudart", fake.cudart)
    monkeypatch.setattr(torch.cuda, "synchronize", lambda: fake.calls.append("sync"))
    monkeypatch.setattr(torch.cuda.nvtx, "range_push", lambda n: fake.calls.append(f"+{n}"))
    monkeypatch.setattr(torch.cuda.nvtx, "range_pop", lambda: fake.calls.append("-"))
    cfg = {"mode": "nsys", "wait": 1, "warmup": 1, "active": 2}
    rec = inject.Recorder(cfg)
    optimizer, other = torch.optim.SGD([torch.zeros(1)]), torch.optim.SGD([torch.zeros(1)])
    for _ in range(6):  # optimizer steps 1..6: ProfilerStep#0..#5 start after each
        rec.after_step(optimizer, (), {})
        rec.after_step(other, (), {})  # a second optimizer is not followed
    assert fake.calls == [
        "start", "+ProfilerStep#2", "-", "+ProfilerStep#3", "-", "sync", "stop"
    ]  # fmt: skip
    assert rec.optimizer_steps == 6 and rec.traces == ["nsys"] and rec.error == ""


def test_a_shadowed_sitecustomize_still_runs(tmp_path: Path) -> None:
    """The injected start-up file takes the name ``sitecustomize``: the one it shadows (a
    distribution's, a virtualenv's) runs after it, and a process without torch is untouched."""
    import subprocess

    from traceforensics.recording import child
    from traceforensics.recording.settings import CaptureSettings

    theirs = tmp_path / "theirs"
    theirs.mkdir()
    (theirs / "sitecustomize.py").write_text("import os\nos.environ['THEIRS_RAN'] = '1'\n")
    out = tmp_path / "rec"
    boot = child.boot_dir(out)
    env = child.environment(CaptureSettings(), out, boot, "kineto")
    env["PYTHONPATH"] += f"{os.pathsep}{theirs}"
    code = (
        "import os, sys; print(os.environ.get('THEIRS_RAN'), 'torch' in sys.modules, "
        "[type(f).__name__ for f in sys.meta_path if 'Torch' in type(f).__name__])"
    )
    run = [sys.executable, "-c", code]
    shown = subprocess.run(run, env=env, capture_output=True, text=True, check=True)
    assert shown.stdout == "1 False ['_AfterTorch']\n", shown.stderr  # both ran, torch not
    assert not list(boot.glob("status-*.json"))  # no torch: nothing to report
