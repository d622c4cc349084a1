"""No process outlives ``tf`` (issue 45): ``tf analyze`` of a trace big enough for every helper
the reader ever started (the early-scan child, formerly a decode worker with multiprocessing's
resource tracker) runs in a process group of its own, and once the command has exited no
process of that group is left. Checked through ``/proc`` (each process's group id, field 5 of
``/proc/PID/stat``)."""

from __future__ import annotations

import contextlib
import os
import subprocess
import sys
import time
from pathlib import Path

import pytest

from tests.conftest import ROOT

TRACE = Path("/work/shared/traces/kineto/resnet50_v100_workers0.pt.trace.json.gz")
#: Copies of the 1x ResNet-50 trace: ~16 MB gzipped, 757k events (the decode worker started
#: from 48 MB of JSON).
COPY_ARGS = ("--copies", "10")
ENTRY = "import sys; from traceforensics.cli.entry import main; main()"

pytestmark = [
    pytest.mark.skipif(not TRACE.exists(), reason=f"shared trace {TRACE} not available"),
    pytest.mark.skipif(not Path("/proc/self/stat").exists(), reason="needs Linux /proc"),
]


def _group_members(pgid: int) -> list[int]:
    """The processes whose process group is ``pgid`` now."""
    members = []
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            stat = Path(f"/proc/{entry}/stat").read_text()
        except OSError:  # ended while we looked
            continue
        # "pid (comm) state ppid pgrp ...": comm may hold spaces, so split after its ")"
        fields = stat[stat.rindex(")") + 2 :].split()
        if int(fields[2]) == pgid:
            members.append(int(entry))
    return members


@pytest.fixture(scope="module")
def big_trace(tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("tiled") / "resnet50_x10.pt.trace.json.gz"
    subprocess.run(
        [sys.executable, str(ROOT / "tools" / "tile_trace.py"), str(TRACE), str(out), *COPY_ARGS],
        check=True,
        timeout=600,
    )
    return out


@pytest.mark.parametrize("extra", [[], ["--json"]])
def test_no_process_of_tf_outlives_it(big_trace: Path, tmp_path: Path, extra: list[str]) -> None:
    env = os.environ | {"XDG_CACHE_HOME": str(tmp_path / "cache")}
    proc = subprocess.Popen(
        [sys.executable, "-c", ENTRY, "analyze", str(big_trace), "--no-cache", *extra],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        env=env,
        start_new_session=True,  # its own process group, id = its pid
    )
    _, err = proc.communicate(timeout=600)
    assert proc.returncode == 0, err.decode()[-2000:]
    # the moment it has exited (and been reaped), nothing of its group may remain: not a
    # child still finishing, not a tracker waiting for its pipe to close
    left = _group_members(proc.pid)
    if left:  # name them, and do not leave them behind this test either
        names = {p: Path(f"/proc/{p}/cmdline").read_bytes()[:200] for p in left}
        for p in left:
            with contextlib.suppress(OSError):
                os.kill(p, 9)
        time.sleep(0.1)
        pytest.fail(f"processes of tf's group left after it exited: {names}")
