"""Which program a trace records (``findings.program``) and remedies in its terms
(``findings.remedies``): every shared trace, small generated traces per framework, and the
remedy table's rules."""

from __future__ import annotations

import json
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import pytest

import traceforensics
from tests.conftest import TRACES, kineto_trace_files, nonempty, nsys_trace_files, shared_trace
from traceforensics.analysis.findings.remedies import (
    CATEGORIES,
    GENERIC,
    REMEDIES,
    remedy,
)
from traceforensics.analysis.idle.causes import CAUSES
from traceforensics.analysis.program import FRAMEWORKS, VENDORS, Program, detect_program

# What each shared trace is, checked by reading its names (and nsys/SOURCES.md):
# (framework, vendor, a piece of the evidence line).
REAL: dict[str, tuple[str, str, str]] = {
    "hta/alexnet_a100_sync.json.gz": ("pytorch", "nvidia", "aten:: operators"),
    # CPU-only rank of a gloo job: aten::empty, ProfilerStep, no GPU named anywhere
    "hta/cpu_only_rank34.json.gz": ("pytorch", "unknown", "aten:: operators"),
    "hta/cuda_event_sync_a100.json.gz": ("pytorch", "nvidia", "aten:: operators"),
    "hta/cuda_event_sync_multistream_a100.json.gz": ("pytorch", "nvidia", "aten:: operators"),
    "hta/ddp_nccl_a100_rank0.json.gz": ("pytorch", "nvidia", "aten:: operators"),
    "hta/job128_sampled/rank-0.json.gz": ("pytorch", "nvidia", "aten:: operators"),
    "hta/job128_sampled/rank-1.json.gz": ("pytorch", "nvidia", "aten:: operators"),
    "hta/mi250_rocm62_minitoy.json.gz": ("pytorch", "amd", "aten:: operators"),
    "hta/resnet_v100_ns_resolution.json.gz": ("pytorch", "nvidia", "aten:: operators"),
    # torch.compile: no aten op, one ProfilerStep and an Inductor triton kernel
    "hta/triton_a100.json.gz": ("pytorch", "nvidia", "ProfilerStep# ranges"),
    "kineto/resnet50_v100_workers0.pt.trace.json.gz": ("pytorch", "nvidia", "aten:: operators"),
    "kineto/resnet50_v100_workers4.pt.trace.json.gz": ("pytorch", "nvidia", "aten:: operators"),
    # CS336 transformer benchmarks: user NVTX only, kernels from at::native
    "nsys/Athrun0109__CS336_assignment2__result.sqlite": ("pytorch", "nvidia", "ATen kernels"),
    "nsys/jsun-012__assignment2-systems__result.sqlite": ("pytorch", "nvidia", "ATen kernels"),
    "nsys/zx3xyy__assignment2-systems__result_2_7B_nvtx.sqlite": (
        "pytorch",
        "nvidia",
        "ATen kernels",
    ),
    # nvFuser/Thunder under pytest: nvFuser NVTX, nvfuser_* and at::native kernels
    "nsys/NVIDIA__Fuser__report1.sqlite": ("pytorch", "nvidia", "ATen kernels"),
    # CS336 benchmark recorded with CUDA tracing off: OS runtime calls only, no name of any
    # framework, so the fallback rule answers (a plain CUDA program on the export's NVIDIA
    # GPU); the program was PyTorch, but nothing in the trace says so
    "nsys/IhorAtlanov__assignment2-systems__result_no_cuda.sqlite": (
        "cuda",
        "nvidia",
        "no framework names",
    ),
    # climate_train_unet: an nvfortran CUDA Fortran binary (libcudafor), no kernel captured
    "nsys/frasertajima__WeatherBench2__report1.sqlite": ("cuda", "nvidia", "no framework names"),
    # facebookresearch/param's MLP on an RTX 2080 Ti: aten ops, autograd nodes, SGD foreach
    "real2/param_linear_2080ti.pt.trace.json.gz": ("pytorch", "nvidia", "aten:: operators"),
    "tracelens/bert_small_h100.json.gz": ("pytorch", "nvidia", "aten:: operators"),
    "tracelens/bert_small_mi300x.json.gz": ("pytorch", "amd", "aten:: operators"),
    "tracelens/eager_b200.json.gz": ("pytorch", "nvidia", "aten:: operators"),
    # GPU activities only (no host ops): at::native kernels on MI210
    "tracelens/gpu_only_mi210.json.gz": ("pytorch", "amd", "ATen kernels"),
    "tracelens/vit_nsfw_h100.json.gz": ("pytorch", "nvidia", "aten:: operators"),
    # vLLM decode with hipGraphLaunch: still PyTorch
    "tracelens/vllm_decode_cudagraph_rocm.json.gz": ("pytorch", "amd", "aten:: operators"),
}


@pytest.mark.parametrize("rel", sorted(REAL))
def test_shared_trace_program(rel: str) -> None:
    session = traceforensics.load(shared_trace(rel), use_cache=False)
    program = detect_program(session)
    framework, vendor, evidence = REAL[rel]
    assert (program.framework, program.vendor) == (framework, vendor), program
    assert evidence in program.evidence
    assert "\n" not in program.evidence


def test_every_shared_trace_has_an_expectation() -> None:
    if not TRACES.exists():
        pytest.skip("../shared/traces not present (tests on real traces need ../shared)")
    found = nonempty([*kineto_trace_files(), *nsys_trace_files()])
    assert set(found) <= set(REAL), sorted(set(found) - set(REAL))


# ------------------------------------------------------------------- generated Kineto traces
def _kineto(
    tmp_path: Path,
    kernels: list[str],
    *,
    runtime: str = "cudaLaunchKernel",
    host: Sequence[tuple[str, str]] = (),
    device_name: str | None = None,
) -> Program:
    """Write a Kineto trace with ``kernels`` (each launched by ``runtime``) and ``host`` rows
    ``(cat, name)``; detect its program."""
    events: list[dict[str, Any]] = []
    for i, name in enumerate(kernels):
        ts = 10.0 * i + 1.0
        events.append(_x("cuda_runtime", runtime, ts, 1.0, 100, 100, correlation=i + 1))
        gpu = {"device": 0, "stream": 7, "correlation": i + 1}
        events.append(_x("kernel", name, ts + 2.0, 2.0, 0, 7, **gpu))
    for i, (cat, name) in enumerate(host):
        ph = "i" if cat == "cpu_instant_event" else "X"
        events.append({**_x(cat, name, 500.0 + i, 1.0, 100, 100), "ph": ph, "s": "t"})
    top: dict[str, Any] = {"schemaVersion": 1, "traceEvents": events}
    if device_name is not None:
        top["deviceProperties"] = [{"id": 0, "name": device_name}]
    path = tmp_path / "trace.json"
    path.write_text(json.dumps(top), encoding="utf-8")
    return detect_program(traceforensics.load(path, use_cache=False))


def _x(
    cat: str, name: str, ts: float, dur: float, pid: int, tid: int, **args: Any
) -> dict[str, Any]:
    fields = {"cat": cat, "name": name, "pid": pid, "tid": tid, "ts": ts, "dur": dur}
    return {"ph": "X", **fields, "args": args}


OMP = "__omp_offloading_10303_1f2b3_main_l12"
MARKER = ("cpu_instant_event", "Iteration Start: PyTorch Profiler")
MM = ("cpu_op", "aten::mm")
GENERATED: dict[str, tuple[dict[str, Any], str, str]] = {
    # id: (arguments of _kineto, framework, vendor)
    "openmp-clang": ({"kernels": [OMP], "runtime": "cuLaunchKernel"}, "openmp", "nvidia"),
    "openmp-amdclang": ({"kernels": [OMP], "runtime": "hipModuleLaunchKernel"}, "openmp", "amd"),
    "openmp-nvc": ({"kernels": ["nvkernel_main_F1L12_2"]}, "openmp", "nvidia"),
    "openacc-nvc": ({"kernels": ["matvec_41_gpu", "dot_57_gpu__red"]}, "openacc", "nvidia"),
    "openacc-pgi": ({"kernels": ["__pgi_uacc_cuda_kernel_7"]}, "openacc", "nvidia"),
    "jax-fusions": (
        {"kernels": ["loop_add_fusion", "input_reduce_fusion_3", "fusion_12", "wrapped_transpose"]},
        "jax",
        "nvidia",
    ),
    "jax-nvtx": (
        {
            "kernels": ["gemm_kernel"],
            "host": [("user_annotation", "XlaModule:#hlo_module=jit_train_step,program_id=3#")],
        },
        "jax",
        "nvidia",
    ),
    "tensorrt-myelin": ({"kernels": ["__myl_bb0_2_MulAddCas_myl0_3"]}, "tensorrt", "nvidia"),
    "tensorrt-trt": (
        {"kernels": ["trt_ampere_fp16x2_hcudnn_fp16x2_128x128_relu_medium_nn_v1"]},
        "tensorrt",
        "nvidia",
    ),
    # cuBLAS uses sm80_xmma_* names too: alone they do not make a TensorRT program
    "cuda-cublas-xmma": (
        {"kernels": ["sm80_xmma_gemm_bf16bf16_bf16f32_f32_tn_n_tilesize64x64x64"]},
        "cuda",
        "nvidia",
    ),
    "cuda-plain": ({"kernels": ["saxpy(int, float, float const*, float*)"]}, "cuda", "nvidia"),
    "hip-device": (
        {"kernels": ["vector_add"], "runtime": "cudaLaunchKernel", "device_name": "AMD MI300X"},
        "hip",
        "amd",
    ),
    "hip-runtime": ({"kernels": ["vector_add"], "runtime": "hipLaunchKernel"}, "hip", "amd"),
    "pytorch-ops": (
        {
            "kernels": ["void at::native::vectorized_elementwise_kernel<4>(int)"],
            "host": [("cpu_op", "aten::add"), ("user_annotation", "ProfilerStep#3")],
        },
        "pytorch",
        "nvidia",
    ),
    # emit_nvtx-style range text, a Triton kernel, a graph launch and NCCL: still PyTorch
    "pytorch-nvtx-triton-nccl": (
        {
            "kernels": ["triton_poi_fused_add_0", "ncclDevKernel_AllReduce_Sum_f32_RING_LL"],
            "runtime": "cudaGraphLaunch",
            "host": [("user_annotation", "aten::addmm, seq = 3")],
        },
        "pytorch",
        "nvidia",
    ),
    "pytorch-rocm": (
        {"kernels": ["Cijk_Alik_Bljk_SB"], "runtime": "hipLaunchKernel", "host": [MM]},
        "pytorch",
        "amd",
    ),
    # only the recorder names PyTorch ...
    "pytorch-marker": (
        {"kernels": ["my_kernel"], "host": [MARKER]},
        "pytorch",
        "nvidia",
    ),
    # ... and the program's own names outrank the recorder's
    "openmp-under-kineto": (
        {"kernels": [OMP], "host": [MARKER]},
        "openmp",
        "nvidia",
    ),
    "no-gpu": ({"kernels": [], "host": [("user_annotation", "main loop")]}, "cuda", "unknown"),
}


@pytest.mark.parametrize("case", sorted(GENERATED))
def test_generated_program(tmp_path: Path, case: str) -> None:
    kwargs, framework, vendor = GENERATED[case]
    program = _kineto(tmp_path, **kwargs)
    assert (program.framework, program.vendor) == (framework, vendor), program
    assert program.evidence and "\n" not in program.evidence


def test_evidence_counts_rows_and_names(tmp_path: Path) -> None:
    program = _kineto(tmp_path, [OMP, OMP, OMP + "_2"])
    assert program.evidence == "3 __omp_offloading_* kernels (2 distinct)"


def test_empty_session() -> None:
    from traceforensics.model.schema import empty_events
    from traceforensics.model.session import TraceMeta, TraceSession

    program = detect_program(TraceSession(empty_events(), TraceMeta(source_format="kineto")))
    assert program == Program("cuda", "unknown", program.evidence)
    assert "0 kernel rows" in program.evidence


# ------------------------------------------------------------------- remedies
PROGRAMS = [Program(f, v, "") for f in FRAMEWORKS for v in VENDORS]
TORCH_WORDS = ("torch", "dataloader", "pin_memory", ".item()")


def test_categories() -> None:
    assert CATEGORIES[: len(CAUSES)] == CAUSES
    extra = (
        "exposed_communication",
        "transfer_bound",
        "kernel_efficiency",
        "one_off",
        "straggler_wait",
        "fp32_matmul",  # issue 44: kernel-name evidence and the zero_grad fill kernels
        "layout_conversion",
        "zero_grad",
        "optimizer_step",  # issue 47: the optimizer's share of the window
        "serving_scheduler_gap",  # issue 48: serving and memory
        "serving_eager_decode",
        "allocator_churn",
        "reserved_unused",
        "memory_near_capacity",
    )
    assert CATEGORIES[len(CAUSES) :] == extra
    assert set(GENERIC) == set(CATEGORIES)
    assert {c for c, _ in REMEDIES} <= set(CATEGORIES)
    assert {f for _, f in REMEDIES} <= set(FRAMEWORKS)


@pytest.mark.parametrize("program", PROGRAMS, ids=lambda p: f"{p.framework}-{p.vendor}")
def test_remedy_rules(program: Program) -> None:
    for category in CATEGORIES:
        text = remedy(category, program)
        assert text.strip() and "\n" not in text and "{" not in text, (category, text)
        assert len(text) <= 200, (category, text)
        low = text.lower()
        if program.framework != "pytorch":
            assert not any(w in low for w in TORCH_WORDS), (category, text)
        if program.vendor == "amd":
            assert "nsys" not in low and "nsight" not in low, (category, text)
        if program.framework == "hip" and program.vendor == "amd":
            assert "cuda" not in low, (category, text)


@pytest.mark.parametrize(
    ("category", "framework", "vendor", "words"),
    [
        ("memcpy", "cuda", "nvidia", ("cudaMallocHost", "cudaMemcpyAsync")),
        ("launch_overhead", "cuda", "nvidia", ("CUDA graph",)),
        ("memcpy", "hip", "amd", ("hipHostMalloc", "hipMemcpyAsync")),
        ("launch_overhead", "hip", "amd", ("hipGraph",)),
        ("memcpy", "openacc", "nvidia", ("data region", "present", "-gpu=pinned")),
        ("host_sync", "openacc", "nvidia", ("async",)),
        ("memcpy", "openmp", "amd", ("target data", "enter")),
        ("host_sync", "openmp", "nvidia", ("nowait", "depend")),
        ("memory_management", "openmp", "nvidia", ("omp_target_alloc",)),
        ("launch_overhead", "jax", "nvidia", ("jax.jit",)),
        ("memcpy", "jax", "nvidia", ("donate_argnums",)),
        ("host_sync", "jax", "amd", ("block_until_ready",)),
        ("launch_overhead", "tensorrt", "nvidia", ("enqueueV3", "CUDA graph")),
        ("kernel_efficiency", "tensorrt", "nvidia", ("FP8",)),
        ("exposed_communication", "pytorch", "nvidia", ("DDP", "FSDP", "stragglers")),
        ("kernel_efficiency", "pytorch", "nvidia", ("bf16", "torch.compile")),
        ("one_off", "pytorch", "nvidia", ("schedule(wait, warmup, active)",)),
        ("memory_management", "pytorch", "amd", ("hipMalloc",)),
        ("untraced", "pytorch", "amd", ("rocprofv3",)),
        ("untraced", "cuda", "nvidia", ("nsys",)),
        ("kernel_efficiency", "hip", "amd", ("rocprof-compute",)),
    ],
)
def test_remedy_speaks_the_programs_terms(
    category: str, framework: str, vendor: str, words: tuple[str, ...]
) -> None:
    text = remedy(category, Program(framework, vendor, ""))
    for word in words:
        assert word in text, (word, text)


def test_unknown_category() -> None:
    with pytest.raises(ValueError, match="no remedy"):
        remedy("nonsense", Program("cuda", "nvidia", ""))
