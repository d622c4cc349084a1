"""Kineto ingester on every real trace under ../shared/traces, checked against an independent
plain-Python reading of the raw JSON (json module, ``decimal.Decimal`` for exact ns, a sorted-loop
interval union). Nothing of traceforensics is used on the reference side."""

from __future__ import annotations

import gzip
import json
from collections import Counter, defaultdict
from decimal import Decimal
from pathlib import Path
from typing import Any

import polars as pl
import pytest

from tests.conftest import kineto_trace_files, nonempty, shared_trace
from traceforensics.analysis.intervals import union
from traceforensics.ingest.kineto import load_kineto
from traceforensics.model.session import TraceSession

GPU_CATS = {
    "kernel": "kernel",
    "Kernel": "kernel",
    "gpu_memcpy": "memcpy",
    "Memcpy": "memcpy",
    "gpu_memset": "memset",
    "Memset": "memset",
}


# -- independent reference ----------------------------------------------------------------
def raw_trace(path: Path) -> dict[str, Any]:
    with gzip.open(path, "rt", encoding="utf-8") as fh:
        data = json.load(fh, parse_float=Decimal)
    return data if isinstance(data, dict) else {"traceEvents": data}


def ref_ns(value: Any) -> int:
    exact = Decimal(value) * 1000
    assert exact == exact.to_integral_value(), f"sub-ns value {value}"
    return int(exact)


def ref_union_total(intervals: list[tuple[int, int]]) -> int:
    total = 0
    cur_start = cur_end = None
    for start, end in sorted(intervals):
        if cur_end is None or start > cur_end:
            if cur_end is not None:
                total += cur_end - cur_start
            cur_start, cur_end = start, end
        else:
            cur_end = max(cur_end, end)
    if cur_end is not None:
        total += cur_end - cur_start
    return total


def reference_devices(data: dict[str, Any], rank: int) -> dict[tuple[int, int], dict[str, int]]:
    """Per (rank, device): counts, window, busy and idle ns straight from the raw JSON."""
    base = int(data.get("baseTimeNanoseconds") or 0)
    spans: dict[int, list[tuple[int, int]]] = defaultdict(list)
    counts: dict[int, Counter[str]] = defaultdict(Counter)
    for ev in data["traceEvents"]:
        if ev.get("ph") != "X" or ev.get("cat") not in GPU_CATS:
            continue
        args = ev.get("args") or {}
        device = args["device"] if isinstance(args.get("device"), int) else int(ev["pid"])
        start = base + ref_ns(ev["ts"])
        end = start + max(ref_ns(ev.get("dur", 0)), 0)
        spans[device].append((start, end))
        counts[device][GPU_CATS[ev["cat"]]] += 1
    out = {}
    for device, ivs in spans.items():
        window = max(e for _, e in ivs) - min(s for s, _ in ivs)
        busy = ref_union_total(ivs)
        out[(rank, device)] = {
            "kernel": counts[device]["kernel"],
            "memcpy": counts[device]["memcpy"],
            "memset": counts[device]["memset"],
            "window": window,
            "busy": busy,
            "idle": window - busy,
        }
    return out


def ref_rank(data: dict[str, Any]) -> int:
    info = data.get("distributedInfo") or {}
    return int(info.get("rank", 0))


# -- the tool's side ----------------------------------------------------------------------
def tool_devices(session: TraceSession) -> dict[tuple[int, int], dict[str, int]]:
    gpu = session.events.filter(pl.col("kind").is_in(["kernel", "memcpy", "memset"]))
    out = {}
    for (rank, device), part in gpu.group_by(["rank", "device"]):
        starts = part["start_ns"].to_numpy()
        ends = starts + part["dur_ns"].to_numpy()
        u_s, u_e = union(starts, ends)
        busy = int((u_e - u_s).sum())
        window = int(ends.max() - starts.min())
        kinds = Counter(part["kind"].cast(pl.String).to_list())
        out[(int(rank), int(device))] = {
            "kernel": kinds["kernel"],
            "memcpy": kinds["memcpy"],
            "memset": kinds["memset"],
            "window": window,
            "busy": busy,
            "idle": window - busy,
        }
    return out


@pytest.mark.parametrize("rel", kineto_trace_files())
def test_every_trace_matches_independent_reference(rel: str) -> None:
    """Counts, window, busy and idle per (rank, device); row count and exact times."""
    path = shared_trace(rel)
    session = load_kineto([path])
    session.validate()
    data = raw_trace(path)
    expected = reference_devices(data, ref_rank(data))
    assert tool_devices(session) == expected
    assert session.meta.source_format == "kineto"
    assert [i.format for i in session.meta.inputs] == ["kineto"]
    # every listed or used GPU has a DeviceInfo
    listed = {(d.rank, d.device) for d in session.meta.devices}
    assert set(expected) <= listed
    # every X/i row except the Trace span is kept, each start and duration exact to the ns
    base = int(data.get("baseTimeNanoseconds") or 0)
    rows = [e for e in data["traceEvents"] if e.get("ph") in ("X", "i") and e.get("cat") != "Trace"]
    assert session.events.height == len(rows)
    assert session.events["start_ns"].to_list() == [base + ref_ns(e["ts"]) for e in rows]
    ref_dur = [0 if e["ph"] == "i" else max(ref_ns(e.get("dur", 0)), 0) for e in rows]
    assert session.events["dur_ns"].to_list() == ref_dur
    assert session.meta.clock_is_wall and session.meta.clock_base_ns == 0


def test_rank_directory_loads_both_ranks() -> None:
    r0 = shared_trace("hta/job128_sampled/rank-0.json.gz")
    r1 = shared_trace("hta/job128_sampled/rank-1.json.gz")
    session = load_kineto([r0, r1])
    assert session.ranks == [0, 1]
    assert [(i.rank, Path(i.path).name) for i in session.meta.inputs] == [
        (0, "rank-0.json.gz"),
        (1, "rank-1.json.gz"),
    ]
    expected = {}
    for path in (r0, r1):
        data = raw_trace(path)
        expected |= reference_devices(data, ref_rank(data))
    assert tool_devices(session) == expected
    assert session.events["event_id"].is_unique().all()
    # no deviceProperties: devices come from events, with empty names
    assert {(d.rank, d.device, d.name) for d in session.meta.devices} == {
        (rank, dev, "unknown") for rank, dev in expected
    }
    assert session.meta.distributed["world_size"] == 128


def _link_fractions(session: TraceSession) -> tuple[float, float]:
    ev = session.events
    api = ev.filter(pl.col("kind") == "cuda_api")
    kernels = ev.filter(pl.col("kind") == "kernel")
    linked = kernels.join(api.select("correlation"), on="correlation", how="semi").height
    ops = ev.filter(pl.col("kind").is_in(["cpu_op", "annotation"])).select("external_id")
    api_ext = api.filter(pl.col("external_id").is_not_null())
    api_linked = api_ext.join(ops, on="external_id", how="semi").height
    return linked / kernels.height, api_linked / max(api_ext.height, 1)


@pytest.mark.parametrize(
    "rel",
    [
        "kineto/resnet50_v100_workers0.pt.trace.json.gz",
        "hta/ddp_nccl_a100_rank0.json.gz",
        "tracelens/bert_small_h100.json.gz",
    ],
)
def test_kernel_launch_and_op_links(rel: str) -> None:
    session = load_kineto([shared_trace(rel)])
    kernel_to_launch, launch_to_op = _link_fractions(session)
    assert kernel_to_launch > 0.95
    assert launch_to_op > 0.95


def test_legacy_1_9_trace_fields() -> None:
    path = shared_trace("kineto/resnet50_v100_workers0.pt.trace.json.gz")
    session = load_kineto([path])
    ev = session.events
    assert "1.8-1.9" in (session.meta.format_version or "")
    gpu = ev.filter(pl.col("kind").is_in(["kernel", "memcpy", "memset"]))
    assert gpu["stream"].null_count() == 0
    assert gpu["tid"].null_count() == gpu.height  # GPU rows carry a stream, not an OS thread
    assert set(gpu["stream"].unique().to_list()) == {7}  # parsed from "stream 7"
    host = ev.filter(pl.col("kind") == "cpu_op")
    assert host["tid"].null_count() == 0  # "25738" strings parsed
    assert set(host["pid"].unique().to_list()) == {25738}
    memcpy = ev.filter(pl.col("kind") == "memcpy")
    raw = [
        e for e in raw_trace(path)["traceEvents"] if e.get("cat") == "Memcpy" and e.get("ph") == "X"
    ]
    assert memcpy["bytes"].to_list() == [e["args"]["bytes"] for e in raw]
    first = memcpy.row(0, named=True)
    assert raw[0]["name"] == "Memcpy HtoD (Pageable -> Device)"
    assert (first["copy_kind"], first["src_mem"], first["dst_mem"]) == ("h2d", "pageable", "device")
    # external ids of 1.9 ("external id", lower case) are read
    assert ev.filter(pl.col("kind") == "kernel")["external_id"].null_count() == 0
    dev0 = next(d for d in session.meta.devices if d.device == 0)
    assert (dev0.name, dev0.compute_capability, dev0.sm_count, dev0.vendor) == (
        "Tesla V100-DGXS-32GB",
        "7.0",
        80,
        "nvidia",
    )
    assert dev0.memory_bytes and dev0.memory_bytes > 30 * 2**30


def test_python_function_pid_collision() -> None:
    path = shared_trace("tracelens/bert_small_h100.json.gz")
    session = load_kineto([path])
    ev = session.events
    python = ev.filter(pl.col("kind") == "python")
    raw = raw_trace(path)["traceEvents"]
    n_python = sum(1 for e in raw if e.get("cat") == "python_function")
    assert python.height == n_python
    assert python.filter(pl.col("pid") == 0).height > 0  # the colliding rows exist ...
    assert python["device"].null_count() == python.height  # ... and stay host rows


def test_rocm_and_cuda_graph_replay() -> None:
    path = shared_trace("tracelens/vllm_decode_cudagraph_rocm.json.gz")
    session = load_kineto([path])
    raw = raw_trace(path)["traceEvents"]
    graph_corr = {
        e["args"]["correlation"]
        for e in raw
        if e.get("cat") == "cuda_runtime" and e.get("name") == "hipGraphLaunch"
    }
    n_replayed = sum(
        1 for e in raw if e.get("cat") == "kernel" and e["args"]["correlation"] in graph_corr
    )
    assert n_replayed > 100
    ev = session.events
    launches = ev.filter(pl.col("name") == "hipGraphLaunch").select("correlation", "name")
    kernels = ev.filter(pl.col("kind") == "kernel").join(launches, on="correlation", how="inner")
    assert kernels.height == n_replayed
    assert {d.vendor for d in session.meta.devices} == {"amd"}
    # pid is not a safe device index on ROCm: the device comes from args.device
    devs = {e["args"]["device"] for e in raw if e.get("cat") == "kernel"}
    assert set(ev.filter(pl.col("kind") == "kernel")["device"].unique().to_list()) == devs


def test_cpu_only_trace() -> None:
    session = load_kineto([shared_trace("hta/cpu_only_rank34.json.gz")])
    assert session.events.filter(pl.col("device").is_not_null()).height == 0
    assert session.meta.devices == []
    assert session.ranks == [34]
    assert session.meta.distributed["backend"] == "gloo"


def test_nccl_kernels_are_comm_and_keep_collective_args() -> None:
    path = shared_trace("hta/ddp_nccl_a100_rank0.json.gz")
    session = load_kineto([path])
    raw = raw_trace(path)["traceEvents"]
    nccl = [e for e in raw if e.get("cat") == "kernel" and e["name"].startswith("nccl")]
    kernels = session.events.filter(pl.col("kind") == "kernel")
    assert kernels["is_comm"].sum() == len(nccl) > 0
    coll = session.args_for("Collective name").join(
        kernels.select("event_id"), on="event_id", how="semi"
    )
    with_name = [e for e in raw if e.get("cat") == "kernel" and "Collective name" in e["args"]]
    assert coll.height == len(with_name)
    assert {json.loads(v) for v in coll["value"]} == {
        e["args"]["Collective name"] for e in with_name
    }
    host_comm = session.events.filter(
        pl.col("kind").is_in(["cpu_op", "annotation"]) & pl.col("is_comm")
    )
    assert "record_param_comms" in set(host_comm["name"].cast(pl.String).to_list())


def test_args_side_table_values_round_trip() -> None:
    path = shared_trace("tracelens/vit_nsfw_h100.json.gz")
    session = load_kineto([path])
    raw = raw_trace(path)["traceEvents"]
    rows = [e for e in raw if e.get("ph") in ("X", "i") and e.get("cat") != "Trace"]
    table = session.args.join(session.events.select("event_id", "kind"), on="event_id")
    assert set(table["kind"].cast(pl.String).unique().to_list()) <= {
        "cpu_op",
        "annotation",
        "kernel",
        "marker",  # issue 48: the [memory] events' bytes and totals
    }
    assert "Ev Idx" not in set(table["key"].cast(pl.String).to_list())
    first = session.events["event_id"][0]
    for event_id, key, value in nonempty(
        table.select("event_id", "key", "value").head(3000).iter_rows()
    ):
        expected = rows[event_id - first]["args"][key]
        assert json.loads(value, parse_float=Decimal) == expected


def test_session_save_load_round_trip(tmp_path: Path) -> None:
    r0 = shared_trace("hta/job128_sampled/rank-0.json.gz")
    r1 = shared_trace("hta/job128_sampled/rank-1.json.gz")
    session = load_kineto([r0, r1])
    back = TraceSession.load(session.save(tmp_path / "s"))
    assert back.events.equals(session.events)
    assert back.args.equals(session.args)
    assert back.meta == session.meta
