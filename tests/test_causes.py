"""Cause classification of host rows: one case per rule, exclusions, priorities, thresholds."""

from __future__ import annotations

import polars as pl
import pytest

from traceforensics.analysis.cause_table import CAUSE_TABLE
from traceforensics.analysis.classify import classify_host
from traceforensics.analysis.idle.causes import (
    CAUSE_INDEX,
    CAUSES,
    OUTLIER_MAD_SIGMAS,
    OUTLIER_MIN_EXCESS_FRACTION,
    PRIORITY,
)
from traceforensics.analysis.idle.results import StepStats
from traceforensics.analysis.idle.step_idle import step_statistics
from traceforensics.analysis.steps import GENERIC_STEP_RE

CASES = [
    # (kind, name, is_comm, blocking_d2h, expected cause or None)
    ("cuda_api", "cudaStreamSynchronize", False, False, "host_sync"),
    ("cuda_api", "cudaDeviceSynchronize", False, False, "host_sync"),
    ("cuda_api", "cudaEventSynchronize", False, False, "host_sync"),
    ("cuda_api", "cudaMemcpyAsync", False, True, "host_sync"),  # blocking D2H copy
    ("cpu_op", "aten::item", False, False, "host_sync"),
    ("cpu_op", "aten::_local_scalar_dense", False, False, "host_sync"),
    ("cuda_api", "cudaMemcpyAsync", False, False, "memcpy"),
    ("cuda_api", "cudaMemcpy", False, False, "memcpy"),
    ("cuda_api", "cudaFree", False, False, "memory_management"),
    ("cuda_api", "cudaMalloc", False, False, "memory_management"),
    ("cpu_op", "torch.cuda.empty_cache", False, False, "memory_management"),
    ("cuda_api", "cuModuleLoadData", False, False, "compilation"),
    ("cuda_api", "nvrtcCompileProgram", False, False, "compilation"),
    ("annotation", "torch.compile", False, False, "compilation"),
    ("annotation", "nccl:all_reduce", False, False, "communication"),
    ("cpu_op", "record_param_comms", False, False, "communication"),
    ("cpu_op", "c10d::allreduce_", False, False, "communication"),
    ("annotation", "my_comm_range", True, False, "communication"),
    (
        "annotation",
        "enumerate(DataLoader)#_SingleProcessDataLoaderIter.__next__",
        False,
        False,
        "data_loading",
    ),
    (
        "cpu_op",
        "enumerate(DataLoader)#_MultiProcessingDataLoaderIter.__next__",
        False,
        False,
        "data_loading",
    ),
    ("annotation", "load_batch", False, False, "data_loading"),
    ("annotation", "## prefetch ##", False, False, "data_loading"),
    ("python", "torch/utils/data/dataloader.py(630): __next__", False, False, "data_loading"),
    ("os_call", "write", False, False, "io"),
    ("os_call", "fsync", False, False, "io"),
    ("annotation", "checkpoint", False, False, "io"),
    ("annotation", "save_model", False, False, "io"),
    ("overhead", "CUPTI Overhead", False, False, "profiler_overhead"),
    ("cuda_api", "cudaLaunchKernel", False, False, "launch_overhead"),
    ("cuda_api", "cudaEventRecord", False, False, "launch_overhead"),
    ("cpu_op", "aten::mm", False, False, "cpu_compute"),
    ("python", "model.py(10): forward", False, False, "cpu_compute"),
    # exclusions
    ("cpu_op", "aten::batch_norm", False, False, "cpu_compute"),  # not "batch" data loading
    ("cpu_op", "CudnnBatchNormBackward", False, False, "cpu_compute"),
    ("cpu_op", "CheckpointFunction", False, False, "cpu_compute"),  # activation checkpointing
    ("annotation", "ProfilerStep#5", False, False, None),  # step markers explain nothing
    ("os_call", "pthread_cond_wait", False, False, None),
]


def _classify(
    rows: list[tuple[str, str, bool, bool]], patterns: tuple[str, ...] | None = None
) -> list[int]:
    frame = pl.DataFrame(
        {
            "kind": [r[0] for r in rows],
            "name": [r[1] for r in rows],
            "is_comm": [r[2] for r in rows],
            "blocking_d2h": [r[3] for r in rows],
        }
    )
    if patterns is None:
        return classify_host(frame).to_list()
    return classify_host(frame, patterns).to_list()


@pytest.mark.parametrize(("kind", "name", "comm", "d2h", "expected"), CASES)
def test_rule(kind: str, name: str, comm: bool, d2h: bool, expected: str | None) -> None:
    (got,) = _classify([(kind, name, comm, d2h)])
    assert got == (CAUSE_INDEX[expected] if expected else -1), (name, got)


def test_data_patterns_are_configurable() -> None:
    rows = [
        ("annotation", "fetch_samples", False, False),
        ("annotation", "load_batch", False, False),
    ]
    got = _classify(rows, ("fetch",))
    assert got == [CAUSE_INDEX["data_loading"], CAUSE_INDEX["cpu_compute"]]


def test_priority_covers_every_host_class() -> None:
    # every cause except the GPU-side ones (dependency, pick-up) and untraced can be a host
    # class, exactly once
    gpu_side = {"cross_stream_wait", "untraced", "gpu_pickup"}
    later = {c.id for c in CAUSE_TABLE[13:] if c.priority is not None}  # host classes added since
    assert sorted(PRIORITY) == sorted((set(CAUSES[:13]) - gpu_side) | later)
    # blocking calls beat the context they run in, context beats generic work
    order = {c: i for i, c in enumerate(PRIORITY)}
    assert order["memcpy"] < order["data_loading"] < order["cpu_compute"]
    assert order["host_sync"] < order["communication"] < order["launch_overhead"]


def test_cause_ids_are_the_contract() -> None:
    # ids are only ever added, at the end (the table's row order is the report order): the
    # first 13 stay as they are, whatever comes after them
    assert CAUSES[:13] == (
        "data_loading",
        "host_sync",
        "memcpy",
        "launch_overhead",
        "memory_management",
        "compilation",
        "communication",
        "io",
        "cross_stream_wait",
        "cpu_compute",
        "profiler_overhead",
        "untraced",
        "gpu_pickup",  # issue 44: added after the first 12, never renamed
    )


@pytest.mark.parametrize(
    ("name", "is_step"),
    [
        ("step 3", True),
        ("train_step", True),
        ("Warm-up Step 1", True),
        ("iteration_10", True),
        ("Optimizer.step#SGD.step", False),
        ("ProfilerStep#4", False),
        ("stepper", False),
    ],
)
def test_generic_step_names(name: str, is_step: bool) -> None:
    assert bool(pl.Series([name]).str.contains(GENERIC_STEP_RE)[0]) is is_step


def _step(name: str, dur: int, busy: int, data: int) -> StepStats:
    idle = {c: 0 for c in CAUSES}
    idle["data_loading"] = data
    idle["launch_overhead"] = dur - busy - data
    return StepStats(0, 0, name, 0, dur, busy, dur - busy, idle, 0)


def test_outlier_thresholds() -> None:
    base = [_step(f"s{i}", 100_000 + 1_000 * (i % 3), 80_000, 0) for i in range(9)]
    med = 101_000
    # just above both limits (MAD here is 1000 -> 3 sigmas ~4.4 µs; the 20 % bar dominates)
    limit = med + max(OUTLIER_MIN_EXCESS_FRACTION * med, OUTLIER_MAD_SIGMAS * 1.4826 * 1_000)
    slow = _step("slow", int(limit) + 1_000, 80_000, int(limit) + 1_000 - 100_000)
    edge = _step("edge", int(limit) - 1_000, 80_000, 0)
    (summary,) = step_statistics([*base, slow, edge], {0: "test"}, {(0, 0): 0})
    names = [o.name for o in summary.outliers]
    assert names == ["slow"]
    assert summary.outliers[0].top_cause == "data_loading"
    busy_slow = _step("busy", int(limit) + 5_000, int(limit) - 15_000, 0)
    (summary,) = step_statistics([*base, busy_slow], {0: "test"}, {(0, 0): 0})
    assert summary.outliers[0].top_cause == "busy"


def test_a_name_matching_two_rules_takes_the_priority_order() -> None:
    rows = [("annotation", "profiler flush empty_cache", False, False)]
    assert _classify(rows) == [CAUSE_INDEX["memory_management"]]  # memory 30 < overhead 40
