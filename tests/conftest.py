"""Shared test fixtures: where the real traces live, and skipping when they are absent."""

from __future__ import annotations

from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
SHARED = ROOT.parent / "shared"
TRACES = SHARED / "traces"
FIXTURES = Path(__file__).resolve().parent / "fixtures"


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
