"""Shared test fixtures: where the real traces live, and skipping when they are absent."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import tempfile
from collections.abc import Iterable
from pathlib import Path
from typing import TYPE_CHECKING, TypeVar

import pytest
from hypothesis import HealthCheck, settings

if TYPE_CHECKING:
    from traceforensics.model.session import TraceSession

ROOT = Path(__file__).resolve().parents[1]
TOOLS = ROOT / "tools"
# the project's scripts (synthetic trace builders) are importable from every test
if str(TOOLS) not in sys.path:
    sys.path.insert(0, str(TOOLS))
# the session and analysis caches of every test run (and of the CLI children they start) go to
# a private folder: never the user's cache, never a result left by an earlier run
os.environ["XDG_CACHE_HOME"] = tempfile.mkdtemp(prefix="tf-test-cache-")
# a pass that raises fails the test run (and the CLI children it starts) instead of degrading to
# an ``analysis_failed`` warning: the suite treats a crashed pass as a bug (issue 43). Read when
# ``analysis.pipeline`` is imported, so it is set before any test imports traceforensics.
os.environ.setdefault("TF_RAISE_FAILED", "1")
SHARED = ROOT.parent / "shared"
TRACES = SHARED / "traces"
FIXTURES = Path(__file__).resolve().parent / "fixtures"
T = TypeVar("T")


def shared_trace(rel: str) -> Path:
    """Path of a file under ../shared/traces, skipping the test when it is absent."""
    path = TRACES / rel
    if not path.exists():
        pytest.skip(f"../shared/traces/{rel} not present (tests on real traces need ../shared)")
    return path


def kineto_trace_files() -> list[str]:
    """Every Kineto trace under ../shared/traces (relative paths), or [] when absent."""
    if not TRACES.exists():
        return []
    return sorted(str(p.relative_to(TRACES)) for p in TRACES.rglob("*.json.gz") if p.is_file())


def nsys_trace_files() -> list[str]:
    """Every .sqlite under ../shared/traces (relative paths), or [] when absent."""
    if not TRACES.exists():
        return []
    return sorted(str(p.relative_to(TRACES)) for p in TRACES.rglob("*.sqlite") if p.is_file())


@pytest.fixture
def traces_dir() -> Path:
    if not TRACES.exists():
        pytest.skip("../shared/traces not present (tests on real traces need ../shared)")
    return TRACES


def plain_union(spans: list[tuple[int, int]]) -> list[list[int]]:
    """Merge intervals with a plain sorted loop: the tests' reference, independent of the tool's
    vectorised ``analysis.intervals``. Zero-length spans cover nothing and are dropped."""
    merged: list[list[int]] = []
    for s, e in sorted(spans):
        if e <= s:
            continue
        if merged and s <= merged[-1][1]:
            merged[-1][1] = max(merged[-1][1], e)
        else:
            merged.append([s, e])
    return merged


def run_cli(argv: list[str], capsys: pytest.CaptureFixture[str]) -> tuple[int, str, str]:
    """Run ``tf`` in-process; return (exit code, stdout, stderr)."""
    from traceforensics.cli.main import main

    code = 0
    try:
        main(argv)
    except SystemExit as exc:
        code = exc.code if isinstance(exc.code, int) else 1
    out, err = capsys.readouterr()
    return code, out, err


def fresh_python(code: str, cache: Path | None = None) -> subprocess.CompletedProcess[str]:
    """``code`` run by a fresh interpreter (this one has imported everything already), with
    the user cache at ``cache`` when given; fails the test if it exits non-zero."""
    env = os.environ | ({"XDG_CACHE_HOME": str(cache)} if cache is not None else {})
    return subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, env=env, check=True
    )


def nonempty(items: Iterable[T]) -> list[T]:
    """``items`` as a list, failing the test when there is nothing to check (a loop of asserts
    over an empty list passes without checking anything)."""
    out = list(items)
    assert out, "nothing to check: the list is empty"
    return out


def tree_parents(session: TraceSession) -> dict[int, int | None]:
    """Parent of every host range and launch call, as ``prepare`` computes them."""
    import polars as pl

    from traceforensics.analysis.context import host_rows
    from traceforensics.analysis.optree import host_tree

    ev = session.events.lazy().with_columns((pl.col("start_ns") + pl.col("dur_ns")).alias("end_ns"))
    tree = host_tree(host_rows(ev).collect())
    return dict(zip(tree["event_id"].to_list(), tree["parent_id"].to_list(), strict=True))


def chromium() -> str:
    """Path of a headless-capable Chromium, installed with apt (Debian's ``chromium``) when
    missing; skips the test, with the reason, only where that is impossible."""
    found = shutil.which("chromium") or shutil.which("chromium-browser")
    if found:
        return found
    if os.geteuid() != 0 or shutil.which("apt-get") is None:
        pytest.skip("chromium is not installed and cannot be installed here (needs root + apt)")
    done = subprocess.run(
        ["apt-get", "install", "-y", "-q", "chromium"], capture_output=True, text=True,
        timeout=600, check=False, env={**os.environ, "DEBIAN_FRONTEND": "noninteractive"},
    )  # fmt: skip
    found = shutil.which("chromium")
    if done.returncode != 0 or not found:
        pytest.skip(f"apt-get install chromium failed: {done.stderr.strip()[-200:]}")
    return found


def drawn_shapes_settings(examples: int) -> settings:
    """Hypothesis settings of a test over drawn trace shapes (``tools/shapes.py``): the same
    examples every run (derandomized, no database), no deadline (a shape is written, loaded
    and analysed)."""
    return settings(
        max_examples=examples,
        deadline=None,
        derandomize=True,
        database=None,
        suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
    )
