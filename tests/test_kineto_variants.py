"""Kineto format variants on small hand-written traces, the timestamp rule, and bad input."""

from __future__ import annotations

import gzip
import json
import random
from decimal import Decimal
from pathlib import Path
from typing import Any

import numpy as np
import polars as pl
import pytest

from traceforensics.ingest.kineto import load_kineto
from traceforensics.ingest.kineto.generic import json_texts
from traceforensics.ingest.kineto.gpu import is_comm_host, is_comm_kernel, memcpy_kinds
from traceforensics.ingest.kineto.timeconv import (
    FAST_LIMIT_US,
    float_us_to_ns,
    floats_us_to_ns,
    us_to_ns,
)
from traceforensics.model.errors import CorruptTraceError, InputError, UnsupportedFormatError

CPU_PID = 4242


def write(tmp: Path, name: str, events: list[Any] | None, *, gz: bool = False, **top: Any) -> Path:
    body: Any = {"schemaVersion": 1, **top, "traceEvents": events} if events is not None else top
    raw = json.dumps(body).encode()
    path = tmp / name
    path.write_bytes(gzip.compress(raw) if gz else raw)
    return path


def x(
    cat: str, name: str, ts: Any, dur: Any, *, pid: Any = CPU_PID, tid: Any = CPU_PID, **args: Any
) -> dict[str, Any]:
    return {
        "ph": "X",
        "cat": cat,
        "name": name,
        "pid": pid,
        "tid": tid,
        "ts": ts,
        "dur": dur,
        "args": args,
    }


def labels(pid: Any, text: str) -> dict[str, Any]:
    return {"ph": "M", "name": "process_labels", "pid": pid, "tid": 0, "args": {"labels": text}}


def basic_events(ts0: Any = 1_700_000_000_000_000) -> list[dict[str, Any]]:
    return [
        labels(CPU_PID, "CPU"),
        labels(0, "GPU 0"),
        x("cpu_op", "aten::mm", ts0, 50, **{"External id": 7, "Input Dims": [[2, 3], [3, 4]]}),
        x("cuda_runtime", "cudaLaunchKernel", ts0 + 10, 5, correlation=99, **{"External id": 7}),
        x(
            "kernel",
            "gemm",
            ts0 + 20,
            30,
            pid=0,
            tid=7,
            device=0,
            stream=7,
            correlation=99,
            grid=[4, 1, 1],
            block=[128, 1, 1],
            **{"External id": 7, "registers per thread": 32},
        ),
        {
            "ph": "X",
            "cat": "Trace",
            "name": "PyTorch Profiler (0)",
            "pid": "Spans",
            "tid": "PyTorch Profiler",
            "ts": ts0,
            "dur": 100,
        },
        {"ph": "s", "id": 99, "pid": CPU_PID, "tid": CPU_PID, "ts": ts0 + 10, "cat": "ac2g"},
        {"ph": "f", "id": 99, "pid": 0, "tid": 7, "ts": ts0 + 20, "cat": "ac2g", "bp": "e"},
        {"ph": "C", "name": "counter", "pid": 0, "ts": ts0, "args": {"v": 1}},
    ]


def rows(path: Path) -> pl.DataFrame:
    return load_kineto([path]).events


# -- containers -------------------------------------------------------------------------
def test_json_and_gzip_give_the_same_table(tmp_path: Path) -> None:
    a = rows(write(tmp_path, "a.json", basic_events()))
    b = rows(write(tmp_path, "b.json.gz", basic_events(), gz=True))
    assert a.equals(b)
    # M, s, f, C and the Trace span are not rows
    assert a["kind"].cast(pl.String).to_list() == ["cpu_op", "cuda_api", "kernel"]
    kernel = a.row(2, named=True)
    assert (kernel["device"], kernel["stream"], kernel["tid"], kernel["pid"]) == (
        0,
        7,
        None,
        CPU_PID,
    )
    assert (kernel["grid"], kernel["block"]) == ([4, 1, 1], [128, 1, 1])
    assert (kernel["correlation"], kernel["external_id"]) == (99, 7)


def test_array_format_and_unterminated_array(tmp_path: Path) -> None:
    events = basic_events()
    p1 = tmp_path / "list.json"
    p1.write_text(json.dumps(events))
    p2 = tmp_path / "cut.json"
    p2.write_text(json.dumps(events)[:-1] + ",\n")
    assert rows(p1).height == rows(p2).height == 3
    assert any("closing" in w for w in load_kineto([p2]).meta.warnings)


# -- categories ---------------------------------------------------------------------------
def test_legacy_capitalised_categories_and_string_ids(tmp_path: Path) -> None:
    ts = 1_623_142_623_460_111
    events = [
        x("Operator", "aten::add", ts, 10, tid=str(CPU_PID), **{"external id": 3}),
        x("Runtime", "cudaLaunchKernel", ts + 1, 2, tid=str(CPU_PID), correlation=5),
        x("Kernel", "k", ts + 3, 4, pid=0, tid="stream 7", correlation=5, device=0),
        x(
            "Memcpy",
            "Memcpy DtoH (Device -> Pinned)",
            ts + 8,
            1,
            pid=0,
            tid="stream 7 (sync)",
            bytes=64,
            **{"memory bandwidth (GB/s)": 12.5},
        ),
        x("Memset", "Memset (Device)", ts + 9, 1, pid=0, tid="stream 9", bytes=16),
        {"ph": "i", "s": "t", "name": "[memory]", "pid": CPU_PID, "tid": CPU_PID, "ts": ts + 2},
    ]
    session = load_kineto([write(tmp_path, "old.json", events)])
    ev = session.events
    assert ev["kind"].cast(pl.String).to_list() == [
        "cpu_op",
        "cuda_api",
        "kernel",
        "memcpy",
        "memset",
        "marker",
    ]
    assert ev["tid"].to_list() == [CPU_PID, CPU_PID, None, None, None, CPU_PID]
    assert ev["stream"].to_list() == [None, None, 7, 7, 9, None]
    assert ev["device"].to_list() == [None, None, 0, 0, 0, None]
    assert ev["bytes"].to_list() == [None, None, None, 64, 16, None]  # not the bandwidth
    assert ev.row(3, named=True)["copy_kind"] == "d2h"
    assert (ev.row(3, named=True)["src_mem"], ev.row(3, named=True)["dst_mem"]) == (
        "device",
        "pinned",
    )
    assert ev.row(4, named=True)["dst_mem"] == "device"
    assert ev["external_id"].to_list()[0] == 3
    assert ev["start_ns"].to_list()[0] == ts * 1000
    assert ev["dur_ns"].to_list()[-1] == 0
    assert "1.8-1.9" in (session.meta.format_version or "")
    assert ev["category"].cast(pl.String).to_list()[:2] == ["Operator", "Runtime"]


def test_newer_categories(tmp_path: Path) -> None:
    ts = 1000.5
    events = [
        x("cuda_sync", "Stream Sync", ts, 3, pid=0, tid=7, device=0, stream=7, correlation=1),
        x("cuda_driver", "cuLaunchKernel", ts, 2, correlation=2),
        x("gpu_user_annotation", "ProfilerStep#1", ts, 9, pid=0, tid=7, device=0),
        x("user_annotation", "ProfilerStep#1", ts, 9),
        x("python_function", "f.py(1): g", ts, 1, pid=0, tid=0),
        x("overhead", "Activity Buffer Request", ts, 1, pid=-1, tid=0),
        {
            "ph": "i",
            "cat": "cpu_instant_event",
            "s": "t",
            "name": "[memory]",
            "pid": CPU_PID,
            "tid": CPU_PID,
            "ts": ts,
            "args": {"Bytes": 4},
        },
        x("collective_comm", "something new", ts, 1),
    ]
    session = load_kineto([write(tmp_path, "new.json", events, baseTimeNanoseconds=10**18)])
    ev = session.events
    assert ev["kind"].cast(pl.String).to_list() == [
        "gpu_sync",
        "cuda_api",
        "gpu_annotation",
        "annotation",
        "python",
        "overhead",
        "marker",
        "annotation",
    ]
    # python_function with pid 0 is a host row, not GPU 0
    assert ev.row(4, named=True)["device"] is None and ev.row(4, named=True)["pid"] == 0
    assert ev["name"].cast(pl.String).to_list()[1] == "cuLaunchKernel"
    assert ev["correlation"].to_list()[:2] == [1, 2]
    assert ev["start_ns"].to_list()[0] == 10**18 + 1_000_500
    assert any("collective_comm" in w for w in session.meta.warnings)
    assert "2.4+" in (session.meta.format_version or "")


# -- flows ----------------------------------------------------------------------------------
def flow_events(flow_cat: str = "ac2g") -> list[dict[str, Any]]:
    """A launch and two kernels with no correlation, and the launch flows that give them one:
    the rows' correlations are then 11, 11, 12 (3 filled from the flows)."""
    ts = 5_000
    return [
        labels(0, "GPU 0"),
        x("cuda_runtime", "cudaLaunchKernel", ts, 10, tid="4242"),
        x("kernel", "k", ts + 20, 5, pid=0, tid="stream 7"),
        x("kernel", "k2", ts + 40, 5, pid=0, tid=7),
        {"ph": "s", "id": 11, "pid": CPU_PID, "tid": CPU_PID, "ts": ts, "cat": flow_cat},
        {"ph": "f", "id": 11, "pid": 0, "tid": 7, "ts": ts + 20, "cat": flow_cat, "bp": "e"},
        # an endpoint inside the row (Chrome's enclosing-slice binding)
        {"ph": "f", "id": 12, "pid": 0, "tid": 7, "ts": ts + 42, "cat": flow_cat, "bp": "e"},
        {"ph": "f", "id": 13, "pid": 0, "tid": 7, "ts": ts + 99, "cat": "fwdbwd", "bp": "e"},
    ]


@pytest.mark.parametrize("flow_cat", ["async", "async_cpu_to_gpu", "ac2g", "async_gpu"])
def test_flows_fill_missing_correlation(tmp_path: Path, flow_cat: str) -> None:
    session = load_kineto([write(tmp_path, "flows.json", flow_events(flow_cat))])
    assert session.events["correlation"].to_list() == [11, 11, 12]
    info = next(iter(session.meta.extra["kineto"].values()))
    assert info["correlation_from_flows"] == 3


# -- devices, ROCm, CUDA graphs ---------------------------------------------------------
def test_rocm_device_from_args_then_labels(tmp_path: Path) -> None:
    events = [
        labels(CPU_PID, "CPU"),
        labels(5, "GPU 1"),
        x("cuda_runtime", "hipLaunchKernel", 1.0, 1, correlation=1, stream="0x0"),
        x("kernel", "k_args", 2.0, 1, pid=5, tid=0, device=3, stream=0, correlation=1),
        x("kernel", "k_label", 4.0, 1, pid=5, tid=0, stream=0, correlation=1),
        x("gpu_memcpy", "Memcpy HtoD (Host -> Device)", 5.0, 1, pid=5, tid=0, kind="HtoD"),
    ]
    session = load_kineto([write(tmp_path, "rocm.json", events, roctracer_version=4)])
    ev = session.events
    assert ev["device"].to_list() == [None, 3, 1, 1]
    assert ev["stream"].to_list() == [None, 0, 0, 0]
    assert ev.row(3, named=True)["copy_kind"] == "h2d"
    assert {(d.device, d.vendor, d.name) for d in session.meta.devices} == {
        (1, "amd", "unknown"),
        (3, "amd", "unknown"),
    }
    assert not session.meta.clock_is_wall  # small relative times without a base


def test_cuda_graph_replay_links_every_kernel(tmp_path: Path) -> None:
    events = [x("cuda_runtime", "cudaGraphLaunch", 10, 5, correlation=77)] + [
        x("kernel", f"node{i}", 20 + i, 1, pid=0, tid=7, device=0, correlation=77) for i in range(4)
    ]
    ev = load_kineto([write(tmp_path, "graph.json", events)]).events
    kernels = ev.filter(pl.col("kind") == "kernel")
    launches = ev.filter(pl.col("kind") == "cuda_api").select("correlation", "name")
    joined = kernels.join(launches, on="correlation", suffix="_launch")
    assert joined.height == 4
    assert set(joined["name_launch"].cast(pl.String).to_list()) == {"cudaGraphLaunch"}


def test_device_properties_and_missing_metadata(tmp_path: Path) -> None:
    props = [
        {
            "id": 0,
            "name": "NVIDIA H100 80GB HBM3",
            "numSms": 132,
            "computeMajor": 9,
            "computeMinor": 0,
            "totalGlobalMem": 85_000_000_000,
        }
    ]
    events = [x("kernel", "k", 1, 1, pid=0, tid=7, device=0), x("kernel", "k", 1, 1, pid=2, tid=7)]
    session = load_kineto([write(tmp_path, "p.json", events, deviceProperties=props)])
    d0, d2 = session.meta.devices
    assert (d0.name, d0.sm_count, d0.compute_capability, d0.memory_bytes, d0.vendor) == (
        "NVIDIA H100 80GB HBM3",
        132,
        "9.0",
        85_000_000_000,
        "nvidia",
    )
    assert (d2.device, d2.name) == (2, "unknown")
    # no distributedInfo: only where the rank came from (a lone file: its position)
    assert session.meta.distributed == {"rank_source": "file order"}
    assert session.ranks == [0]


def test_cpu_only(tmp_path: Path) -> None:
    events = [x("cpu_op", "aten::add", 1, 1), x("user_annotation", "step", 0, 5)]
    session = load_kineto([write(tmp_path, "cpu.json", events, deviceProperties=[])])
    assert session.events["device"].null_count() == 2
    assert session.meta.devices == []


# -- ranks ---------------------------------------------------------------------------------
def test_rank_from_distributed_info_name_and_order(tmp_path: Path) -> None:
    ev = [x("cpu_op", "a", 1, 1)]
    a = write(tmp_path, "w.json", ev, distributedInfo={"rank": "5", "world_size": 8})
    b = write(tmp_path, "rank-3.json", ev)
    c = write(tmp_path, "trace_2.json", ev)
    session = load_kineto([a, b, c])
    assert [i.rank for i in session.meta.inputs] == [5, 3, 2]
    assert session.events["rank"].to_list() == [5, 3, 2]
    assert session.meta.distributed["world_size"] == 8
    d = write(tmp_path, "x.json", ev)
    e = write(tmp_path, "y.json", ev)
    assert [i.rank for i in load_kineto([d, e]).meta.inputs] == [0, 1]
    # a lone file named <host>_<pid>.json is not rank <pid>
    assert load_kineto([write(tmp_path, "host_12345.json", ev)]).ranks == [0]


def test_colliding_ranks_fall_back_to_order(tmp_path: Path) -> None:
    ev = [x("cpu_op", "a", 1, 1)]
    a = write(tmp_path, "a.json", ev, distributedInfo={"rank": 0})
    b = write(tmp_path, "b.json", ev, distributedInfo={"rank": 0})
    session = load_kineto([a, b])
    assert session.ranks == [0, 1]
    assert any("collide" in w for w in session.meta.warnings)


# -- timestamps ------------------------------------------------------------------------------
def exact(value: float) -> int:
    return int((Decimal(repr(value)) * 1000).to_integral_value())


def test_absolute_epoch_float_is_exact_but_multiply_is_not() -> None:
    ts = 1712195495519695.8
    assert float_us_to_ns(ts) == 1712195495519695800
    assert round(ts * 1000) != 1712195495519695800  # float64 multiply loses 50 ns here
    assert us_to_ns([ts, 1.5, 7]).tolist() == [1712195495519695800, 1500, 7000]


def test_fast_path_equals_exact_rule_below_limit() -> None:
    rng = random.Random(1234)
    values = []
    for _ in range(20000):
        magnitude = 10 ** rng.uniform(-3, 12.9)
        ns = int(magnitude * 1000) + rng.randrange(1000)
        values.append(float(Decimal(ns) / 1000))  # a 3-decimal µs text read as a double
        values.append(rng.uniform(0, FAST_LIMIT_US))  # arbitrary doubles too
    values += [0.0, 0.001, 1.0005, FAST_LIMIT_US - 0.5, -3.25]
    got = floats_us_to_ns(np.asarray(values)).tolist()
    assert got == [exact(v) for v in values]


def test_limit_is_2_pow_43_not_2_pow_53_over_1000() -> None:
    """Above 2**43 µs a double can read back from a 2-decimal text whose value differs from the
    nearest 3-decimal value, so rint(ts*1000) breaks the shortest-repr rule there."""
    rng = random.Random(7)
    counterexample = None
    for _ in range(200000):
        ts = rng.uniform(2**43, 2**53 / 1000)
        if round(ts * 1000) != exact(ts):
            counterexample = ts
            break
    assert counterexample is not None and counterexample < 2**53 / 1000
    assert floats_us_to_ns(np.asarray([counterexample])).tolist() == [exact(counterexample)]


def test_absolute_epoch_range_vectorised_equals_repr_rule() -> None:
    """2**43..2**53 µs (absolute epoch floats) are converted in int64 arithmetic; compare with
    Decimal(repr(v)) on random doubles, 3-decimal texts and exact round-half-even ties."""
    rng = random.Random(99)
    values = [rng.uniform(2**43, 2**53) for _ in range(20000)]
    values += [
        float(Decimal(rng.randrange(2**43 * 1000, 2**53 * 1000)) / 1000) for _ in range(20000)
    ]
    values += [2.0**44 + j / 16 for j in range(1, 64)]  # x.0625 -> .062 (ties to even)
    values += [1712195495519695.8, -1712195495519695.8, 2.0**43, 2.0**53 - 1]
    got = floats_us_to_ns(np.asarray(values)).tolist()
    assert got == [exact(v) for v in values]


def test_negative_dur_clamped_with_warning(tmp_path: Path) -> None:
    events = [x("cpu_op", "a", 10, -3), x("cpu_op", "b", 10.25, 2.5)]
    session = load_kineto([write(tmp_path, "neg.json", events)])
    assert session.events["dur_ns"].to_list() == [0, 2500]
    assert session.events["start_ns"].to_list() == [10_000, 10_250]
    assert any("negative dur" in w for w in session.meta.warnings)


def test_sub_ns_digits_round_half_even() -> None:
    assert us_to_ns([1.0005, 1.0015, "2.0000004"]).tolist() == [1000, 1002, 2000]


# -- names, args ------------------------------------------------------------------------
@pytest.mark.parametrize(
    ("name", "expected"),
    [
        ("Memcpy HtoD (Pageable -> Device)", ("h2d", "pageable", "device")),
        ("Memcpy DtoH (Device -> Pinned)", ("d2h", "device", "pinned")),
        ("Memcpy DtoD (Device -> Device)", ("d2d", "device", "device")),
        ("Memcpy PtoP (Device -> Device)", ("p2p", "device", "device")),
        ("Memcpy PtoP", ("p2p", None, None)),
        ("Memcpy HtoD (Host -> Device)", ("h2d", "unknown", "device")),
        ("Memcpy", ("unknown", None, None)),
    ],
)
def test_memcpy_names(name: str, expected: tuple[str, str | None, str | None]) -> None:
    assert memcpy_kinds(name) == expected


def test_comm_names() -> None:
    assert is_comm_kernel(
        "ncclDevKernel_AllReduce_Sum_f32_RING_LL(ncclDevKernelArgsStorage<4096ul>)"
    )
    assert is_comm_kernel("ncclKernel_AllGather_RING_LL_Sum_int8_t(ncclWorkElem)")
    assert is_comm_kernel("rcclGenericKernel<1, false>")
    assert not is_comm_kernel("void at::native::vectorized_elementwise_kernel<4>")
    for host in ("nccl:all_reduce", "c10d::allreduce_", "gloo:all_reduce", "record_param_comms"):
        assert is_comm_host(host)
    assert not is_comm_host("aten::add")


def test_args_table_keeps_selected_keys_as_json(tmp_path: Path) -> None:
    session = load_kineto([write(tmp_path, "a.json", basic_events())])
    got = {
        (r["event_id"], r["key"]): json.loads(r["value"])
        for r in session.args.iter_rows(named=True)
    }
    assert got == {(0, "Input Dims"): [[2, 3], [3, 4]], (2, "registers per thread"): 32}


def test_json_texts_sentinel_fallback() -> None:
    tricky = ['a","b', "\x00tf-arg-sep\x00", [1, "\x00tf-arg-sep\x00"], 2**70, None, 0.5]
    assert [json.loads(t) for t in json_texts(tricky)] == tricky


# -- bad input ----------------------------------------------------------------------------------
@pytest.mark.parametrize(
    ("content", "error", "words"),
    [
        (b"this is not json", CorruptTraceError, "not valid JSON"),
        (
            gzip.compress(b'{"traceEvents": [' + b"1," * 5000 + b"1]}", mtime=0)[:60],
            CorruptTraceError,
            "gzip",
        ),
        (b'{"hello": 1}', UnsupportedFormatError, "not a trace"),
        (b'{"schemaVersion": 1, "traceEvents": []}', CorruptTraceError, "no events"),
        (b"", CorruptTraceError, "empty"),
        (b"  \n", CorruptTraceError, "empty"),
        (b"42", UnsupportedFormatError, "not a trace"),
        (b'{"traceEvents": [1, 2]}', UnsupportedFormatError, "not a trace"),
        (
            b'{"traceEvents": [{"ph": "X", "cat": "cpu_op", "name": "a", "ts": "x"}]}',
            CorruptTraceError,
            "ts/dur",
        ),
        (
            b'{"traceEvents": [{"ph": "X", "cat": "cpu_op", "ts": 1e300, "dur": 1}]}',
            CorruptTraceError,
            "int64",
        ),
    ],
)
def test_bad_input_one_line_naming_the_file(
    tmp_path: Path, content: bytes, error: type[InputError], words: str
) -> None:
    path = tmp_path / "bad.json"
    path.write_bytes(content)
    with pytest.raises(error) as info:
        load_kineto([path])
    message = str(info.value)
    assert str(path) in message and words in message and "\n" not in message


def test_a_list_category_costs_that_event_only(tmp_path: Path) -> None:
    """Once refused as malformed (an unhashable ``cat``); issue 10: one bad field costs that
    field, so the event is read as an annotation and the category named in a warning."""
    path = tmp_path / "listcat.json"
    path.write_bytes(
        b'{"traceEvents": [{"ph": "X", "cat": ["x"], "name": "a", "ts": 1, "dur": 1}]}'
    )
    session = load_kineto([path])
    assert session.events.get_column("kind").cast(pl.String).to_list() == ["annotation"]
    assert any("['x']" in w and "annotation" in w for w in session.meta.warnings)


def test_missing_file_is_input_error(tmp_path: Path) -> None:
    with pytest.raises(InputError, match="no such file"):
        load_kineto([tmp_path / "nope.json"])


def test_unplaceable_gpu_rows_dropped_and_ids_stay_unique(tmp_path: Path) -> None:
    first = write(
        tmp_path,
        "rank-0.json",
        [
            x("kernel", "lost", 1, 1, pid="nowhere", tid=7),
            x("kernel", "k", 2, 1, pid=0, tid=7, **{"registers per thread": 8}),
            x("cpu_op", "op", 3, 1, **{"Input Dims": [[1]]}),
        ],
    )
    second = write(tmp_path, "rank-1.json", [x("cpu_op", "op", 4, 1, **{"Input Dims": [[2]]})])
    session = load_kineto([first, second])
    assert session.events["name"].cast(pl.String).to_list() == ["k", "op", "op"]
    assert session.events["event_id"].to_list() == [1, 2, 3]
    assert session.args["event_id"].to_list() == [1, 2, 3]
    assert any("dropped" in w for w in session.meta.warnings)


def test_load_path_directory_dispatch(tmp_path: Path) -> None:
    from traceforensics.ingest import load_path

    ev = [x("cpu_op", "a", 1, 1)]
    write(tmp_path, "rank-1.json.gz", ev, gz=True)
    write(tmp_path, "rank-0.json", ev)
    session = load_path(tmp_path)
    assert [(Path(i.path).name, i.rank) for i in session.meta.inputs] == [
        ("rank-0.json", 0),
        ("rank-1.json.gz", 1),
    ]
