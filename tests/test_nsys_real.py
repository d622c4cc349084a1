"""Real Nsight Systems exports from ../shared: counts and busy time against independent SQL.

The expected values are computed here with plain SQL over the raw file and a plain-Python
interval union, never with the ingester's code.
"""

from __future__ import annotations

import hashlib
import os
import sqlite3
from pathlib import Path

import numpy as np
import pytest

from tests.conftest import nonempty, nsys_trace_files, shared_trace
from traceforensics.analysis.context import prepare
from traceforensics.analysis.intervals import total
from traceforensics.ingest import load_path

FILES = nsys_trace_files() or ["nsys/<absent>.sqlite"]

SIMPLE_COUNTS = {
    "kernel": ["CUPTI_ACTIVITY_KIND_KERNEL"],
    "memcpy": ["CUPTI_ACTIVITY_KIND_MEMCPY"],
    "memset": ["CUPTI_ACTIVITY_KIND_MEMSET"],
    "gpu_sync": ["CUPTI_ACTIVITY_KIND_SYNCHRONIZATION"],
    "cuda_api": ["CUPTI_ACTIVITY_KIND_RUNTIME"],
    "os_call": ["OSRT_API"],
    "overhead": ["PROFILER_OVERHEAD", "CUPTI_ACTIVITY_KIND_OVERHEAD"],
    "cuda_graph": ["CUPTI_ACTIVITY_KIND_GRAPH_TRACE"],
}

#: The tables CUDA tracing writes (``nsys profile -t cuda``), by their SQL names.
CUDA_TABLES = frozenset(
    {
        "CUPTI_ACTIVITY_KIND_KERNEL",
        "CUPTI_ACTIVITY_KIND_MEMCPY",
        "CUPTI_ACTIVITY_KIND_MEMSET",
        "CUPTI_ACTIVITY_KIND_SYNCHRONIZATION",
        "CUPTI_ACTIVITY_KIND_GRAPH_TRACE",
        "CUPTI_ACTIVITY_KIND_RUNTIME",
    }
)


def _raw(path: Path) -> sqlite3.Connection:
    return sqlite3.connect(f"file:{path}?mode=ro", uri=True)


def _tables(conn: sqlite3.Connection) -> set[str]:
    return {r[0] for r in conn.execute("SELECT name FROM sqlite_master WHERE type='table'")}


def _expected_counts(path: Path) -> dict[str, int]:
    with _raw(path) as conn:
        tables = _tables(conn)
        out = {
            kind: sum(
                conn.execute(f"SELECT count(*) FROM {t}").fetchone()[0]
                for t in names
                if t in tables
            )
            for kind, names in SIMPLE_COUNTS.items()
        }
        if "NVTX_EVENTS" in tables:
            out["nvtx_ranges"] = conn.execute(
                "SELECT count(*) FROM NVTX_EVENTS WHERE eventType IN (59, 60, 70, 71) "
                "AND end IS NOT NULL"
            ).fetchone()[0]
            out["marker"] = conn.execute(
                "SELECT count(*) FROM NVTX_EVENTS WHERE eventType = 34"
            ).fetchone()[0]
        else:
            out["nvtx_ranges"] = out["marker"] = 0
    return out


def _python_union_total(intervals: list[tuple[int, int]]) -> int:
    """Sort, merge and sum in plain Python."""
    busy = 0
    cur_s = cur_e = None
    for s, e in sorted(intervals):
        if e <= s:
            continue
        if cur_e is None or s > cur_e:
            if cur_e is not None and cur_s is not None:
                busy += cur_e - cur_s
            cur_s, cur_e = s, e
        else:
            cur_e = max(cur_e, e)
    if cur_e is not None and cur_s is not None:
        busy += cur_e - cur_s
    return busy


def _expected_busy(path: Path) -> dict[int, tuple[int, int]]:
    """device -> (window ns, busy ns); window = first GPU op start .. last GPU op end."""
    per_device: dict[int, list[tuple[int, int]]] = {}
    with _raw(path) as conn:
        tables = _tables(conn)
        for t in (
            "CUPTI_ACTIVITY_KIND_KERNEL",
            "CUPTI_ACTIVITY_KIND_MEMCPY",
            "CUPTI_ACTIVITY_KIND_MEMSET",
            "CUPTI_ACTIVITY_KIND_GRAPH_TRACE",
        ):
            if t in tables:
                for dev, s, e in conn.execute(f"SELECT deviceId, start, end FROM {t}"):
                    per_device.setdefault(dev, []).append((s, e))
    return {
        dev: (max(e for _, e in iv) - min(s for s, _ in iv), _python_union_total(iv))
        for dev, iv in per_device.items()
    }


@pytest.mark.parametrize("rel", FILES)
def test_real_export_counts_and_busy(rel: str) -> None:
    path = shared_trace(rel)
    session = load_path(path)
    session.validate()
    counts = dict(session.events.group_by("kind").len().iter_rows())
    expected = _expected_counts(path)
    for kind in SIMPLE_COUNTS:
        assert counts.get(kind, 0) == expected[kind], kind
    assert counts.get("annotation", 0) + counts.get("cpu_op", 0) == expected["nvtx_ranges"]
    assert counts.get("marker", 0) == expected["marker"]

    busy = _expected_busy(path)
    ours = {}
    ctx = prepare(session)
    for dev in busy:
        s, e = ctx.dev_union(ctx.devices.index((0, dev)))
        gpu = session.events.filter(
            session.events["kind"].is_in(["kernel", "memcpy", "memset", "cuda_graph"])
            & (session.events["device"] == dev)
        )
        window = int((gpu["start_ns"] + gpu["dur_ns"]).max()) - int(gpu["start_ns"].min())  # type: ignore[arg-type]
        ours[dev] = (window, total(s, e))
    assert ours == busy
    codes = [d["code"] for d in session.meta.diagnostics]
    with _raw(path) as conn:
        cuda_tables = _tables(conn) & CUDA_TABLES
    if not cuda_tables:
        # CUDA tracing was off: no device, and the loader says so (never "CPU-only")
        assert busy == {} and ctx.devices == [] and "cuda_tables_missing" in codes
        assert any("-t cuda" in w for w in session.meta.warnings)
        return
    assert "cuda_tables_missing" not in codes
    for window, b in nonempty(busy.values()):
        assert 0 <= b <= window  # idle = window - busy is never negative


@pytest.mark.parametrize("rel", FILES)
def test_real_export_is_left_untouched(rel: str) -> None:
    path = shared_trace(rel)
    before = (hashlib.sha256(path.read_bytes()).hexdigest(), os.stat(path).st_mtime_ns)
    siblings = set(path.parent.iterdir())
    load_path(path)
    after = (hashlib.sha256(path.read_bytes()).hexdigest(), os.stat(path).st_mtime_ns)
    assert after == before
    assert set(path.parent.iterdir()) == siblings  # no journal, index or cache file left


@pytest.mark.parametrize("rel", FILES)
def test_real_export_links_and_metadata(rel: str) -> None:
    path = shared_trace(rel)
    session = load_path(path)
    ev = session.events
    with _raw(path) as conn:
        tables = _tables(conn)
        gpus = (
            conn.execute("SELECT count(*) FROM TARGET_INFO_GPU WHERE smCount > 0").fetchone()[0]
            if "TARGET_INFO_GPU" in tables
            else 0
        )
        start = conn.execute("SELECT utcEpochNs FROM TARGET_INFO_SESSION_START_TIME").fetchone()[0]
        linked = 0
        if {"CUPTI_ACTIVITY_KIND_KERNEL", "CUPTI_ACTIVITY_KIND_RUNTIME"} <= tables:
            linked = conn.execute(
                "SELECT count(*) FROM CUPTI_ACTIVITY_KIND_KERNEL k WHERE EXISTS (SELECT 1 FROM "
                "CUPTI_ACTIVITY_KIND_RUNTIME r WHERE r.correlationId = k.correlationId AND "
                "((r.globalTid >> 24) & 16777215) = ((k.globalPid >> 24) & 16777215))"
            ).fetchone()[0]
    assert len(session.meta.devices) == gpus  # Intel/Microsoft adapters are skipped
    assert session.meta.clock_base_ns == start
    assert session.meta.clock_is_wall is False
    api = ev.filter(ev["kind"] == "cuda_api").select("pid", "correlation").unique()
    kernels = ev.filter(ev["kind"] == "kernel").join(api, on=["pid", "correlation"], how="semi")
    assert kernels.height == linked
    names = ev.filter(ev["kind"] == "cuda_api")["name"].cast(str)
    assert not names.str.contains(r"_v\d{4,}$").any()
    assert np.all(ev["dur_ns"].to_numpy() >= 0)
