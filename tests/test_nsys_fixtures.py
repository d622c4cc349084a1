"""Schema variants built by tools/make_nsys_fixtures.py; expectations come from its raw rows."""

from __future__ import annotations

import hashlib
import importlib.util
import json
import os
import shutil
import sqlite3
from collections import Counter
from pathlib import Path
from types import ModuleType
from typing import Any

import polars as pl
import pytest

from tests.conftest import FIXTURES, ROOT, nonempty
from traceforensics.ingest import load_path
from traceforensics.model.session import TraceSession

NSYS = FIXTURES / "nsys"
VARIANTS = ("modern", "legacy_export_meta", "legacy_no_meta")


def _generator() -> ModuleType:
    spec = importlib.util.spec_from_file_location(
        "make_nsys_fixtures", ROOT / "tools" / "make_nsys_fixtures.py"
    )
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


GEN = _generator()
RAW: dict[str, list[dict[str, Any]]] = GEN.capture()


def _load(variant: str) -> TraceSession:
    return load_path(NSYS / f"{variant}.sqlite")


def _args(session: TraceSession, key: str) -> dict[int, Any]:
    rows = session.args_for(key).iter_rows()
    return {int(i): json.loads(v) for i, v in rows}


def test_committed_fixtures_match_the_generator(tmp_path: Path) -> None:
    GEN.main(["make", str(tmp_path)])
    for variant in VARIANTS:
        with (
            sqlite3.connect(tmp_path / f"{variant}.sqlite") as new,
            sqlite3.connect(NSYS / f"{variant}.sqlite") as old,
        ):
            assert list(new.iterdump()) == list(old.iterdump()), variant


@pytest.mark.parametrize("variant", VARIANTS)
def test_kind_counts_match_raw_rows(variant: str) -> None:
    counts = Counter(_load(variant).events["kind"].cast(str).to_list())
    nvtx = RAW["NVTX_EVENTS"]
    assert counts["kernel"] == len(RAW["CUPTI_ACTIVITY_KIND_KERNEL"])
    assert counts["memcpy"] == len(RAW["CUPTI_ACTIVITY_KIND_MEMCPY"])
    assert counts["memset"] == len(RAW["CUPTI_ACTIVITY_KIND_MEMSET"])
    assert counts["gpu_sync"] == len(RAW["CUPTI_ACTIVITY_KIND_SYNCHRONIZATION"])
    assert counts["cuda_graph"] == len(RAW["CUPTI_ACTIVITY_KIND_GRAPH_TRACE"])
    assert counts["cuda_api"] == len(RAW["CUPTI_ACTIVITY_KIND_RUNTIME"])
    assert counts["os_call"] == len(RAW["OSRT_API"])
    assert counts["overhead"] == len(RAW["PROFILER_OVERHEAD"])
    assert counts["marker"] == sum(r["eventType"] == 34 for r in nvtx)
    closed = [r for r in nvtx if r["eventType"] in (59, 60) and r["end"] is not None]
    torch_ops = [r for r in closed if (r["text"] or "").startswith("aten::")]
    assert counts["cpu_op"] == len(torch_ops)
    assert counts["annotation"] == len(closed) - len(torch_ops)


def _comparable(session: TraceSession) -> pl.DataFrame:
    return session.events.drop("event_id").with_columns(
        pl.col("kind", "name", "category", "copy_kind", "src_mem", "dst_mem").cast(pl.String)
    )


def test_legacy_variants_read_like_modern() -> None:
    modern = _comparable(_load("modern"))
    assert _comparable(_load("legacy_export_meta")).equals(modern)
    # Without domainId the NCCL domain is unknown, so only those ranges lose is_comm.
    no_meta = _comparable(_load("legacy_no_meta"))
    differs = no_meta.with_columns(pl.lit(False).alias("is_comm")).equals(
        modern.with_columns(pl.lit(False).alias("is_comm"))
    )
    assert differs
    nccl_ranges = modern.filter((pl.col("kind") == "annotation") & pl.col("is_comm"))
    assert nccl_ranges["name"].to_list() == ["ncclAllReduce", "ncclAllReduce"]


@pytest.mark.parametrize("variant", VARIANTS)
def test_correlation_links_resolve_within_the_process(variant: str) -> None:
    ev = _load(variant).events
    api = ev.filter(pl.col("kind") == "cuda_api").select(
        "pid", "tid", "correlation", pl.col("name").cast(str).alias("api")
    )
    gpu = ev.filter(pl.col("kind").is_in(["kernel", "memcpy", "memset", "gpu_sync", "cuda_graph"]))
    # Correlation ids collide across the two processes: a join on the id alone is ambiguous.
    assert gpu.join(api, on="correlation").height > gpu.height
    linked = gpu.join(api, on=["pid", "correlation"], how="left")
    assert linked.height == gpu.height and linked["api"].null_count() == 0
    # Expected launcher of every GPU row, from the raw rows: same process, same correlation id.
    launcher = {}
    for r in RAW["CUPTI_ACTIVITY_KIND_RUNTIME"]:
        pid = (r["globalTid"] >> 24) & 0xFFFFFF
        launcher[(pid, r["correlationId"])] = (r["globalTid"] & 0xFFFFFF, r["start"])
    for pid, corr, tid in nonempty(linked.select("pid", "correlation", "tid_right").iter_rows()):
        assert launcher[(pid, corr)][0] == tid
    assert set(ev["pid"].drop_nulls().unique().to_list()) == set(GEN.PIDS)


@pytest.mark.parametrize("variant", VARIANTS)
def test_devices_streams_and_nccl_kernels(variant: str) -> None:
    session = _load(variant)
    k = session.events.filter(pl.col("kind") == "kernel")
    streams = {d: sorted(g["stream"].to_list()) for (d,), g in k.group_by("device")}
    raw_streams: dict[int, list[int]] = {}
    for r in RAW["CUPTI_ACTIVITY_KIND_KERNEL"]:
        raw_streams.setdefault(r["deviceId"], []).append(r["streamId"])
    assert streams == {d: sorted(s) for d, s in raw_streams.items()}
    comm = k.filter(pl.col("is_comm"))["name"].cast(str).to_list()
    raw_nccl = [
        GEN.STRINGS[r["demangledName"] - 1]
        for r in RAW["CUPTI_ACTIVITY_KIND_KERNEL"]
        if GEN.STRINGS[r["shortName"] - 1].startswith("nccl")
    ]
    assert comm == raw_nccl and len(comm) == 2
    assert [d.device for d in session.meta.devices] == [0, 1]  # the Intel adapter is skipped
    assert all(d.sm_count == 132 and d.compute_capability == "9.0" for d in session.meta.devices)
    assert all(d.clock_khz == 1_980_000 for d in session.meta.devices)  # Hz and kHz sources
    if variant == "modern":
        assert session.meta.devices[0].memory_bandwidth_bytes_per_s == 3_352_320_000_000
    # kernel names: demangled name, short name kept in args; grid/block from the launch config
    short = _args(session, "short name")
    first = k.row(0, named=True)
    assert first["name"] == GEN.STRINGS[0] and short[first["event_id"]] == GEN.STRINGS[1]
    assert first["grid"] == [1024, 1, 1] and first["block"] == [128, 1, 1]
    assert first["start_ns"] == -500 and first["dur_ns"] == 700  # before capture start: kept


@pytest.mark.parametrize("variant", VARIANTS)
def test_memcpy_kinds_and_api_names(variant: str) -> None:
    ev = _load(variant).events
    mc = ev.filter(pl.col("kind") == "memcpy").head(4)
    got = [
        (r["copy_kind"], r["src_mem"], r["dst_mem"], r["name"]) for r in mc.iter_rows(named=True)
    ]
    assert got == [
        ("h2d", "pageable", "device", "Memcpy HtoD (Pageable -> Device)"),
        ("d2h", "device", "pinned", "Memcpy DtoH (Device -> Pinned)"),
        ("d2d", "device", "device", "Memcpy DtoD (Device -> Device)"),
        ("p2p", "device", "device", "Memcpy PtoP (Device -> Device)"),
    ]
    assert mc["bytes"].to_list() == [r["bytes"] for r in RAW["CUPTI_ACTIVITY_KIND_MEMCPY"][:4]]
    ms = ev.filter(pl.col("kind") == "memset").row(0, named=True)
    assert (ms["name"], ms["dst_mem"], ms["bytes"]) == ("Memset (Device)", "device", 1024)
    sync = ev.filter(pl.col("kind") == "gpu_sync").row(0, named=True)
    assert sync["name"] == "Stream Sync"
    apis = set(ev.filter(pl.col("kind") == "cuda_api")["name"].cast(str).to_list())
    assert apis == {
        "cudaLaunchKernel",
        "cudaMemcpyAsync",
        "cudaStreamSynchronize",
        "cuLaunchKernel",
        "cudaGraphLaunch",
    }


@pytest.mark.parametrize("variant", VARIANTS)
def test_pytorch_nvtx_ops_keep_shapes(variant: str) -> None:
    session = _load(variant)
    ops = session.events.filter(pl.col("kind") == "cpu_op")
    assert sorted(set(ops["name"].cast(str).to_list())) == ["aten::addmm", "aten::copy_"]
    dims = _args(session, "Input Dims")
    seq = _args(session, "Sequence number")
    addmm = ops.filter(pl.col("name") == "aten::addmm")["event_id"].to_list()
    assert [dims[i] for i in addmm] == [[[16, 32], [16, 64], [64, 32]]] * 2
    assert [seq[i] for i in addmm] == [12, 12]
    markers = session.events.filter(pl.col("kind") == "marker")
    assert markers["dur_ns"].to_list() == [0, 0] and set(markers["name"].cast(str)) == {
        "checkpoint"
    }


def test_modern_metadata_warnings_and_names() -> None:
    session = _load("modern")
    meta = session.meta
    assert meta.format_version == "3.20.3" and meta.source_format == "nsys"
    assert meta.clock_base_ns == RAW["TARGET_INFO_SESSION_START_TIME"][0]["utcEpochNs"]
    assert meta.clock_is_wall is False
    dropped = [w for w in meta.warnings if "dropped" in w and "CUPTI" in w]
    assert len(dropped) == 1
    assert not any("AnalysisService" in w for w in meta.warnings)  # not about lost data
    assert any("2 NVTX ranges never ended" in w for w in meta.warnings)
    extra = meta.extra["nsys"]
    assert {p["pid"] for p in extra["processes"]} == set(GEN.PIDS)  # kworker has no events
    assert {(t["pid"], t["tid"], t["name"]) for t in extra["threads"]} == {
        (pid, tid, name)
        for pid in GEN.PIDS
        for tid, name in ((pid, "python"), (pid + 7, "pt_autograd_0"))
    }
    domains = _args(session, "domain")
    assert set(domains.values()) == {"NCCL"}


def test_legacy_metadata_variants() -> None:
    assert _load("legacy_export_meta").meta.format_version == "2.7.1"
    assert _load("legacy_export_meta").meta.extra["nsys"]["metadata_table"] == "EXPORT_META_DATA"
    no_meta = _load("legacy_no_meta").meta
    assert no_meta.format_version is None and no_meta.extra["nsys"]["metadata_table"] is None


def test_enum_tables_are_joined_by_name(tmp_path: Path) -> None:
    path = tmp_path / "swapped.sqlite"
    shutil.copy(NSYS / "modern.sqlite", path)
    with sqlite3.connect(path) as conn:  # ids 0 and 1 swap meaning in this (invented) export
        conn.execute("UPDATE ENUM_CUDA_MEM_KIND SET name = 'X' WHERE id = 0")
        conn.execute(
            "UPDATE ENUM_CUDA_MEM_KIND SET name = 'CUDA_MEMOPR_MEMORY_KIND_PAGEABLE' WHERE id = 1"
        )
        conn.execute(
            "UPDATE ENUM_CUDA_MEM_KIND SET name = 'CUDA_MEMOPR_MEMORY_KIND_PINNED' WHERE name = 'X'"
        )
    mc = load_path(path).events.filter(pl.col("kind") == "memcpy").row(0, named=True)
    assert (mc["src_mem"], mc["name"]) == ("pinned", "Memcpy HtoD (Pinned -> Device)")


@pytest.mark.parametrize("variant", VARIANTS)
def test_fixture_file_is_not_modified(variant: str) -> None:
    path = NSYS / f"{variant}.sqlite"
    before = (hashlib.sha256(path.read_bytes()).hexdigest(), os.stat(path).st_mtime_ns)
    _load(variant)
    assert (hashlib.sha256(path.read_bytes()).hexdigest(), os.stat(path).st_mtime_ns) == before


@pytest.mark.parametrize("variant", VARIANTS)
def test_bulk_readers_and_chunking_agree(variant: str, monkeypatch: pytest.MonkeyPatch) -> None:
    """Arrow (when installed), text fallback and many small parallel rowid ranges: same table."""
    from traceforensics.ingest.nsys import db

    reference = _load(variant)
    monkeypatch.setenv(db.NO_ADBC_ENV, "1")
    monkeypatch.setattr(db, "CHUNK_ROWS", 2)  # tiny ranges: many chunks on the thread pool
    chunked = _load(variant)
    assert chunked.events.equals(reference.events)
    assert chunked.args.sort("event_id", "key").equals(reference.args.sort("event_id", "key"))
