"""Communication kernels by name: one rule (``model.comm``) for the function, both ingesters and
every kernel name of the real traces under ../shared/traces (read here with gzip+json and
sqlite3, not with traceforensics)."""

from __future__ import annotations

import gzip
import json
import shutil
import sqlite3
from pathlib import Path

import polars as pl
import pytest

from tests.conftest import FIXTURES, kineto_trace_files, nonempty, nsys_trace_files, shared_trace
from traceforensics.ingest import load_path
from traceforensics.ingest.kineto import gpu as kineto_gpu
from traceforensics.model.comm import COMM_KERNEL_RE, NOT_COMM_KERNEL_RE, is_comm_kernel

COMM_NAMES = [
    # NCCL, plain and demangled
    "ncclKernel_AllReduce_RING_LL_Sum_float(ncclDevComm*, unsigned long, ncclWork*)",
    "ncclKernel_SendRecv_RING_SIMPLE_Sum_int8_t(ncclDevComm*, unsigned long, ncclWork*)",
    "ncclDevKernel_AllGather_RING_LL(ncclDevKernelArgsStorage<4096ul>)",
    "ncclDevKernel_AllReduce_Sum_f32_RING_LL",
    "void ncclKernel<(ncclFuncId)3, (ncclProtocol)0>(ncclDevComm*, unsigned long, ncclWork*)",
    # RCCL: its own prefix, and NCCL-style names on ROCm
    "rcclGenericKernel<1, false>",
    "ncclDevKernel_Generic_4(ncclDevKernelArgsStorage<4096ul>)",
    # MSCCL / MSCCL++, NVSHMEM
    "mscclKernel_Sum_float_LL128(int, int, mscclAlgo*, mscclWork*)",
    "void mscclpp::allreduce8<__nv_bfloat16>(__nv_bfloat16*, __nv_bfloat16*, unsigned long)",
    "void nvshmemi_reduce_kernel<float, (rdxn_ops)0>(int, float*, float const*, int)",
    "nvshmemx_barrier_all_on_stream_kernel",
    # PyTorch symmetric memory (c10d::symmetric_memory), as recorded in tracelens/eager_b200
    "void (anonymous namespace)::multimem_all_reduce_kernel<c10::BFloat16, 16>(c10::BFloat16*, "
    "unsigned long, unsigned int**, unsigned long, unsigned long)",
    "multimem_all_reduce_kernel",
    "void c10d::symmetric_memory::one_shot_all_reduce_kernel<float, 8, 8>(float**, float*, "
    "unsigned long, unsigned int**, unsigned long, unsigned long)",
    "two_shot_all_reduce_kernel",
    # vLLM / SGLang custom all-reduce
    "void vllm::cross_device_reduce_1stage<__nv_bfloat16, 8>(vllm::RankData*, "
    "vllm::RankSignals, vllm::Signal*, __nv_bfloat16*, int, int)",
    "void vllm::cross_device_reduce_2stage<float, 4>(vllm::RankData*, vllm::RankSignals, "
    "vllm::Signal*, float*, int, int)",
    "void sglang::cross_device_reduce_1stage<half, 8>(sglang::RankData*, sglang::RankSignals, "
    "sglang::Signal*, half*, int, int)",
    # TensorRT-LLM
    "void tensorrt_llm::kernels::oneShotAllReduceKernel<__nv_bfloat16, 8, 8>"
    "(tensorrt_llm::kernels::AllReduceParams)",
    "void tensorrt_llm::kernels::twoShotAllReduceKernel<float, 4, 8>"
    "(tensorrt_llm::kernels::AllReduceParams)",
    "void tensorrt_llm::kernels::ar_fusion::allreduce_fusion_kernel_oneshot_lamport"
    "<(tensorrt_llm::kernels::AllReduceFusionPattern)0, __nv_bfloat16, 8, true>"
    "(tensorrt_llm::kernels::ar_fusion::AllReduceFusionParams<__nv_bfloat16>)",
    # DeepEP
    "void deep_ep::intranode::dispatch<8, 768, 8192>(int4*, float*, int*, long*, float*, int*)",
    "void deep_ep::internode::combine<true, 4, 8, 24, 128>(int4*, float*, bool*, int4 const*)",
    "void deep_ep::internode_ll::dispatch<true, 3, 7168>(void*, float*, int*, long*, int*)",
    # generic collective words
    "all_gather_kernel",
    "fused_allgather_into_tensor",
    "custom_reduce_scatter_kernel",
    "void ReduceScatterKernel<float>(float*)",
    "quickreduce::allreduce_prototype_twoshot<half>",
    "moeAllToAllKernel",
    "void vllm::all2all_kernel<float>(float*)",
    "ALLREDUCE_KERNEL",
]

NON_COMM_NAMES = [
    "void at::native::reduce_kernel<512, 1, at::native::ReduceOp<float, at::native::MeanOps"
    "<float, float>, unsigned int, float, 4> >(at::native::ReduceOp<float, at::native::MeanOps"
    "<float, float>, unsigned int, float, 4>)",
    "void cub::DeviceReduceKernel<cub::DeviceReducePolicy<float, float, int, cub::Sum>::Policy600,"
    " float*, float*, int, cub::Sum>(float*, float*, int, cub::GridEvenShare<int>, cub::Sum)",
    "void (anonymous namespace)::softmax_warp_forward<float, float, float, 10, false, false>"
    "(float*, float const*, int, int, int, bool const*, int, bool)",
    "block_reduce",
    "void splitKreduce_kernel<float, float, float, float>(cublasSplitKParams<float>, float const*)",
    "void at::native::_scatter_gather_elementwise_kernel<128, 4>(at::TensorIterator&)",
    "void at::native::vectorized_elementwise_kernel<4>",
    # intra-block all-reduce helpers inside compute kernels
    "void rms_norm_kernel<float, warp_all_reduce<float>>(float*)",
    "void layer_norm<block_all_reduce<float, 256>>(float*)",
    "void vllm::rms_norm_kernel<c10::BFloat16>(c10::BFloat16*, blockAllReduce)",
    "softmaxKernel_warpAllReduce_sum",
    "WarpAllReduceMax",
    # DeepEP's layout kernel counts tokens on one GPU
    "void deep_ep::layout::get_dispatch_layout<256, 32, 8>(long const*, int*, int*, int*, bool*)",
    # a collective word only at a word start
    "call_reduce_kernel",
    "smallgather",
]

#: Communication kernel names per real trace, verified by reading every kernel name of each;
#: all other kernel names of these traces must stay non-communication.
REAL_COMM_NAMES: dict[str, set[str]] = {
    "hta/ddp_nccl_a100_rank0.json.gz": {
        "ncclKernel_AllReduce_RING_LL_Sum_float(ncclDevComm*, unsigned long, ncclWork*)",
        "ncclKernel_Broadcast_RING_LL_Sum_int8_t(ncclDevComm*, unsigned long, ncclWork*)",
    },
    "hta/job128_sampled/rank-0.json.gz": {
        "ncclKernel_SendRecv_RING_SIMPLE_Sum_int8_t(ncclDevComm*, unsigned long, ncclWork*)"
    },
    "hta/job128_sampled/rank-1.json.gz": {
        "ncclKernel_SendRecv_RING_SIMPLE_Sum_int8_t(ncclDevComm*, unsigned long, ncclWork*)"
    },
    "tracelens/eager_b200.json.gz": {
        "ncclDevKernel_AllGather_RING_LL(ncclDevKernelArgsStorage<4096ul>)",
        "void (anonymous namespace)::multimem_all_reduce_kernel<c10::BFloat16, 16>"
        "(c10::BFloat16*, unsigned long, unsigned int**, unsigned long, unsigned long)",
    },
}


def _polars_rule(names: list[str]) -> list[bool]:
    """The rule as the nsys ingester applies it (blank out, then match)."""
    series = pl.Series(names, dtype=pl.String)
    return series.str.replace_all(NOT_COMM_KERNEL_RE, " ").str.contains(COMM_KERNEL_RE).to_list()


@pytest.mark.parametrize("name", COMM_NAMES)
def test_comm_names(name: str) -> None:
    assert is_comm_kernel(name)
    assert kineto_gpu.is_comm_kernel(name)  # the Kineto reader's name for the same function


@pytest.mark.parametrize("name", NON_COMM_NAMES)
def test_non_comm_names(name: str) -> None:
    assert not is_comm_kernel(name)


def test_python_and_polars_read_the_regexes_alike() -> None:
    names = COMM_NAMES + NON_COMM_NAMES
    assert _polars_rule(names) == [is_comm_kernel(n) for n in names]


# -- real traces --------------------------------------------------------------------------
def _kineto_kernel_names(path: Path) -> set[str]:
    with gzip.open(path, "rt", encoding="utf-8") as fh:
        data = json.load(fh)
    events = data.get("traceEvents", []) if isinstance(data, dict) else data
    return {
        e["name"]
        for e in events
        if isinstance(e, dict) and str(e.get("cat", "")).lower() == "kernel" and e.get("name")
    }


def _nsys_kernel_names(path: Path) -> set[str]:
    conn = sqlite3.connect(f"file:{path}?mode=ro", uri=True)
    try:
        tables = {r[0] for r in conn.execute("SELECT name FROM sqlite_master")}
        if "CUPTI_ACTIVITY_KIND_KERNEL" not in tables:
            return set()
        query = (
            "SELECT DISTINCT coalesce(d.value, s.value) FROM CUPTI_ACTIVITY_KIND_KERNEL k "
            "LEFT JOIN StringIds d ON d.id = k.demangledName "
            "LEFT JOIN StringIds s ON s.id = k.shortName"
        )
        return {r[0] for r in conn.execute(query) if r[0]}
    finally:
        conn.close()


@pytest.mark.parametrize("rel", kineto_trace_files() + nsys_trace_files())
def test_real_trace_kernel_names(rel: str) -> None:
    path = shared_trace(rel)
    names = _nsys_kernel_names(path) if rel.endswith(".sqlite") else _kineto_kernel_names(path)
    expected = REAL_COMM_NAMES.get(rel, set())
    comm = {n for n in names if is_comm_kernel(n)}
    assert comm == expected
    assert len(comm) == len(expected)
    ordered = sorted(names)
    assert _polars_rule(ordered) == [n in expected for n in ordered]


def test_real_trace_list_is_current() -> None:
    # a renamed or removed trace would make its expectation silently vacuous
    files = set(kineto_trace_files() + nsys_trace_files())
    if not files:
        pytest.skip("../shared/traces not present (tests on real traces need ../shared)")
    assert set(REAL_COMM_NAMES) <= files


def test_kineto_ingest_marks_real_custom_all_reduce() -> None:
    path = shared_trace("tracelens/eager_b200.json.gz")
    k = load_path(path).events.filter(pl.col("kind") == "kernel")
    names = k["name"].cast(pl.String).to_list()
    assert k["is_comm"].to_list() == [is_comm_kernel(n) for n in names]
    comm = nonempty(n for n, c in zip(names, k["is_comm"].to_list(), strict=True) if c)
    assert set(comm) == REAL_COMM_NAMES["tracelens/eager_b200.json.gz"]
    assert len(comm) == 74  # 73 multimem all-reduce launches + 1 NCCL all-gather


# -- both ingesters -----------------------------------------------------------------------
def test_kineto_ingest_marks_comm_kernels(tmp_path: Path) -> None:
    names = COMM_NAMES + NON_COMM_NAMES
    ts0 = 1_700_000_000_000_000
    events = [
        {"ph": "M", "name": "process_labels", "pid": 0, "tid": 0, "args": {"labels": "GPU 0"}}
    ] + [
        {
            "ph": "X",
            "cat": "kernel",
            "name": name,
            "pid": 0,
            "tid": 7,
            "ts": ts0 + 10 * i,
            "dur": 5,
            "args": {"device": 0, "stream": 7, "correlation": i + 1},
        }
        for i, name in enumerate(names)
    ]
    path = tmp_path / "comm.json"
    path.write_text(json.dumps({"schemaVersion": 1, "traceEvents": events}))
    k = load_path(path).events.filter(pl.col("kind") == "kernel").sort("start_ns")
    assert k["name"].cast(pl.String).to_list() == names
    assert k["is_comm"].to_list() == [n in COMM_NAMES for n in names]


#: Demangled-name ids of the three kernels of tests/fixtures/nsys/modern.sqlite (two rows each).
_NSYS_NAME_IDS = (1, 3, 4)
_CHUNKS = [
    (COMM_NAMES + NON_COMM_NAMES)[i : i + len(_NSYS_NAME_IDS)]
    for i in range(0, len(COMM_NAMES + NON_COMM_NAMES), len(_NSYS_NAME_IDS))
]


@pytest.mark.parametrize("chunk", _CHUNKS, ids=lambda c: c[0][:30])
def test_nsys_ingest_marks_comm_kernels(tmp_path: Path, chunk: list[str]) -> None:
    path = tmp_path / "renamed.sqlite"
    shutil.copyfile(FIXTURES / "nsys" / "modern.sqlite", path)
    renamed = dict(zip(_NSYS_NAME_IDS, chunk, strict=False))
    conn = sqlite3.connect(path)
    try:
        with conn:
            for string_id, name in renamed.items():
                conn.execute("UPDATE StringIds SET value = ? WHERE id = ?", (name, string_id))
    finally:
        conn.close()
    k = load_path(path).events.filter(pl.col("kind") == "kernel")
    got = dict(zip(k["name"].cast(pl.String).to_list(), k["is_comm"].to_list(), strict=True))
    for name in chunk:
        assert got[name] == (name in COMM_NAMES) == is_comm_kernel(name), name
