"""One line of advice per finding category, in the terms of the program that was traced.

A table, not logic: ``REMEDIES[(category, framework)]`` when the framework has its own wording,
else ``GENERIC[category]`` (framework-neutral: no PyTorch, no vendor API names). The idle
causes' texts are their rows of ``analysis.cause_table`` (``remedy``, ``remedies``); the other
categories' are here. Texts name the
tools of the program's vendor through three placeholders, filled from ``VENDOR_WORDS``:
``{prof}`` (system profiler), ``{kprof}`` (kernel profiler) and ``{rt}`` (runtime API prefix),
so an AMD program is never told to run nsys or Nsight.

Categories: the idle causes (``analysis.cause_table.CAUSES``) plus ``exposed_communication``
(collectives not hidden behind compute), ``transfer_bound`` (host<->device copies dominate),
``kernel_efficiency`` (the kernels themselves are slow), ``one_off`` (start-up: lazy module
loading, autotuning, compilation before the first step), ``straggler_wait``, ``fp32_matmul``
(GEMMs/convolutions in FP32 without tensor cores), ``layout_conversion`` (NCHW<->NHWC
transposes) and ``zero_grad`` (gradient-zeroing fill kernels).

These texts are what to do when the trace shows nothing of it applied: every finding's remedy
then passes through ``preconditions`` (the one table of what the trace must not already show,
and the next step where it does, and of what the chip can do).
"""

from __future__ import annotations

from typing import Final

from traceforensics.analysis.cause_table import CAUSE_TABLE, CAUSES
from traceforensics.analysis.findings.results import CATEGORIES
from traceforensics.analysis.program import Program

#: The categories that are not idle causes (the one list of ids is ``results.CATEGORIES``).
EXTRA_CATEGORIES: Final[tuple[str, ...]] = CATEGORIES[len(CAUSES) :]

#: Vendor-specific words for the placeholders (``unknown`` names both vendors' tools).
VENDOR_WORDS: Final[dict[str, dict[str, str]]] = {
    "nvidia": {"prof": "nsys --trace=cuda,nvtx,osrt", "kprof": "Nsight Compute", "rt": "cuda"},
    "amd": {
        "prof": "rocprofv3 --hip-trace --kernel-trace --marker-trace, or rocprof-sys",
        "kprof": "rocprof-compute",
        "rt": "hip",
    },
    "unknown": {
        "prof": "the vendor's system profiler: nsys on NVIDIA, rocprofv3 on AMD",
        "kprof": "the vendor's kernel profiler",
        "rt": "cuda",
    },
}

#: Framework-neutral wording of the categories that are not idle causes.
_GENERIC_OTHER: Final[dict[str, str]] = {
    "exposed_communication": "communication is not hidden behind compute: overlap it with "
    "independent work, send fewer larger messages, check for stragglers",
    "transfer_bound": "host<->device copies dominate: keep data resident on the GPU, copy only "
    "what changed, overlap the rest with compute from pinned buffers",
    "kernel_efficiency": "the kernels are slow: use tuned library GEMM/convolution, FP16/BF16 "
    "matrix units, fuse memory-bound kernels, check them with {kprof}",
    "one_off": "start-up cost before the first step (module loading, autotuning, compilation): "
    "warm up before profiling and profile the steady state",
    "straggler_wait": "nothing on this rank shortens the wait: fix the straggler rank's cause "
    "first (its own findings say how), then balance work and data across the ranks",
    "fp32_matmul": "run the GEMMs/convolutions on the tensor (matrix) cores: TF32 or BF16 data "
    "where the chip has them, FP16 with loss scaling otherwise",
    "layout_conversion": "keep activations in the layout the convolution kernels use (NHWC, "
    "channels-last) so no transposes run between layers",
    "zero_grad": "stop zeroing gradients with one fill kernel per parameter: release the "
    "buffers instead, or zero them all in one kernel",
    "optimizer_step": "update the parameters with one multi-tensor (fused) kernel per "
    "operation instead of one launch per parameter",
    "serving_scheduler_gap": "the GPU waits for the engine's host work between iterations: "
    "overlap scheduling with the running batch (async scheduling / async output processing), "
    "larger decode batches",
    "serving_eager_decode": "capture graphs for the batch sizes decode runs at (or pad decode "
    "batches to a captured size) so every decode iteration replays a graph",
    "allocator_churn": "stop allocating and freeing device memory in the loop: reuse buffers, "
    "no empty_cache in the loop, a caching allocator with expandable segments",
    "reserved_unused": "the allocator holds memory it does not use: fewer differently sized "
    "allocations, expandable segments against fragmentation",
    "memory_near_capacity": "the peak is near the device's memory: smaller activations "
    "(checkpointing, smaller micro-batches) or sharded state before the next size up",
}
#: The remedy of ``optimizer_step`` when the trace shows the update already multi-tensor.
OPTIMIZER_FUSED_REMEDY: Final = (
    "the update already runs multi-tensor kernels: the GPU waits while the host prepares it - "
    "compile the optimizer step (torch.compile) or capture it in a CUDA graph; for the update "
    "itself, shard the optimizer state across data-parallel ranks (ZeRO-1/FSDP) or keep it in "
    "lower precision (8-bit or BF16 states)"
)
#: Framework-neutral wording: the fallback for every (category, framework) not in REMEDIES;
#: ``CATEGORIES`` order (the idle causes first).
GENERIC: Final[dict[str, str]] = {**{c.id: c.remedy for c in CAUSE_TABLE}, **_GENERIC_OTHER}

#: Per-framework wording: the idle causes' (``Cause.remedies``), then the other categories'.
REMEDIES: Final[dict[tuple[str, str], str]] = {
    **{(c.id, fw): text for c in CAUSE_TABLE for fw, text in c.remedies.items()},
    # -- PyTorch
    ("exposed_communication", "pytorch"): "hide collectives behind compute: tune DDP "
    "bucket_cap_mb / FSDP prefetch so they overlap, fewer larger collectives, check stragglers",
    ("transfer_bound", "pytorch"): "copies dominate: pin_memory=True + .to(non_blocking=True), "
    "keep tensors on the GPU across steps, move preprocessing to the GPU",
    ("kernel_efficiency", "pytorch"): "faster kernels: bf16/tf32 matmuls and convolutions "
    "(torch.backends.cuda.matmul.allow_tf32, autocast), aligned shapes (multiples of 8/16), "
    "torch.compile to fuse memory-bound elementwise chains",
    ("one_off", "pytorch"): "start-up cost before the first step: warm up before profiling, or "
    "profile the steady state with torch.profiler.schedule(wait, warmup, active)",
    ("fp32_matmul", "pytorch"): "use the tensor cores: torch.set_float32_matmul_precision('high')"
    " and torch.backends.cudnn.allow_tf32 (TF32), or torch.autocast(dtype=torch.bfloat16)",
    ("layout_conversion", "pytorch"): "channels_last: model.to(memory_format=torch.channels_last)"
    " and the inputs too, so convolutions run NHWC kernels without NCHW<->NHWC transposes",
    ("allocator_churn", "pytorch"): "reuse buffers instead of allocating in the loop, no "
    "torch.cuda.empty_cache() in the loop, PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True",
    ("reserved_unused", "pytorch"): "PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True against "
    "fragmentation; fewer differently sized allocations (fixed shapes, preallocated buffers)",
    ("memory_near_capacity", "pytorch"): "activation checkpointing (torch.utils.checkpoint), "
    "smaller micro-batches with gradient accumulation, or FSDP-sharded parameters and state",
    ("optimizer_step", "pytorch"): "build the optimizer with fused=True (Adam/AdamW/SGD on CUDA)"
    " or foreach=True: a few multi-tensor kernels update every parameter",
    ("zero_grad", "pytorch"): "optimizer.zero_grad(set_to_none=True) (the default since PyTorch "
    "2.0): no fill kernel per parameter; or one torch._foreach_zero_ over the grads",
    ("fp32_matmul", "cuda"): "tensor-core math in cuBLAS/cuDNN: CUBLAS_COMPUTE_32F_FAST_TF32, or "
    "16-bit data (cublasGemmEx with CUDA_R_16BF/CUDA_R_16F)",
    ("fp32_matmul", "hip"): "16-bit data (bf16/fp16) in rocBLAS/hipBLASLt/MIOpen calls so the "
    "GEMMs and convolutions run on the matrix cores at full rate",
    ("fp32_matmul", "jax"): "bf16 matmuls (dtype=jnp.bfloat16) or "
    "jax.default_matmul_precision('tensorfloat32') so XLA uses the tensor cores",
    ("fp32_matmul", "tensorrt"): "build the engine with FP16/BF16 precision (TF32 is on by "
    "default unless disabled) so the layers run on the tensor cores",
    # -- plain CUDA C/C++/Fortran
    ("exposed_communication", "cuda"): "hide NCCL behind compute on a separate stream, group "
    "small collectives (ncclGroupStart/ncclGroupEnd) into fewer larger ones, check stragglers",
    ("transfer_bound", "cuda"): "keep data resident on the device across steps, copy only what "
    "changed, overlap the rest from cudaMallocHost buffers with cudaMemcpyAsync",
    ("one_off", "cuda"): "start-up cost (module loading, library handles, first allocations) "
    "before the first step: warm up before profiling, CUDA_MODULE_LOADING=EAGER",
    # -- HIP (AMD)
    ("exposed_communication", "hip"): "hide RCCL behind compute on a separate stream, group small "
    "collectives (ncclGroupStart/ncclGroupEnd) into fewer larger ones, check stragglers",
    ("transfer_bound", "hip"): "keep data resident on the device across steps, copy only what "
    "changed, overlap the rest from hipHostMalloc buffers with hipMemcpyAsync",
    ("one_off", "hip"): "start-up cost (code-object loading, rocBLAS/MIOpen tuning) before the "
    "first step: warm up before profiling, keep MIOpen's find-db between runs",
    # -- OpenACC
    ("transfer_bound", "openacc"): "keep arrays resident on the device (enter data copyin once, "
    "present clauses, update only changed parts); -gpu=pinned speeds the remaining copies",
    ("kernel_efficiency", "openacc"): "check the loop schedule (nvc -Minfo=accel): gang/vector "
    "on the right loops, collapse, contiguous inner index; call cuBLAS via host_data",
    ("one_off", "openacc"): "start-up cost (device init, first data region, module loading) "
    "before the first iteration: warm up before profiling, create data once at start",
    # -- OpenMP target offload
    ("transfer_bound", "openmp"): "keep arrays resident on the device (target enter data once, "
    "target update only changed parts), overlap the rest with nowait + depend",
    ("kernel_efficiency", "openmp"): "check the teams/threads mapping (num_teams, thread_limit), "
    "collapse loops, contiguous inner index; call vendor BLAS via use_device_ptr",
    ("one_off", "openmp"): "start-up cost (offload runtime init, image loading, first maps) "
    "before the first iteration: warm up before profiling",
    # -- JAX / XLA
    ("exposed_communication", "jax"): "fewer, larger collectives (shard so gradients reduce in "
    "big chunks); XLA's latency-hiding scheduler flag only when sure; check stragglers",
    ("transfer_bound", "jax"): "keep data and state on the device (device_put once, "
    "donate_argnums), prefetch batches, do preprocessing inside the jitted step",
    ("kernel_efficiency", "jax"): "bf16 matmuls (dtype or jax.default_matmul_precision), "
    "jax.nn.dot_product_attention for attention, larger aligned shapes, jit bigger functions",
    ("one_off", "jax"): "start-up cost (tracing, XLA compilation, autotuning) before the first "
    "step: warm up before profiling; the persistent compilation cache spares later runs",
    # -- TensorRT
    ("transfer_bound", "tensorrt"): "pinned I/O buffers, pre/post-processing on the GPU, and "
    "overlap copies with the previous batch's enqueueV3 on a second stream",
    ("kernel_efficiency", "tensorrt"): "build with FP16/BF16 or FP8/INT8 precision, larger "
    "batches and optimisation profiles that match real shapes",
    ("one_off", "tensorrt"): "start-up cost (engine deserialization, context creation, first "
    "inferences) before steady state: run a few warm-up inferences before profiling",
}


#: Materialised attention (an S x S score matrix written to memory), per framework.
ATTENTION: Final[dict[str, str]] = {
    "pytorch": "replace the written-out attention (matmul, softmax, matmul) with "
    "F.scaled_dot_product_attention (Flash/memory-efficient kernels never store the S x S scores)",
    "jax": "use jax.nn.dot_product_attention (cuDNN flash attention) instead of writing the "
    "S x S scores",
    "tensorrt": "let the builder fuse attention (a supported MHA pattern / plugin) so the S x S "
    "scores are never written",
}
ATTENTION_GENERIC: Final = (
    "use a fused attention kernel (FlashAttention, cuDNN/rocm fused attention) so the S x S "
    "scores are never written to memory"
)


#: Short kernels worth fusing (``kernels.short``), by remedy code: PyTorch wording, then
#: per-framework wording, then a neutral fallback.
SHORT_KERNEL_REMEDIES: Final[dict[tuple[str, str], str]] = {
    ("fused_optimizer", "pytorch"): "foreach/fused optimizer: build the optimizer with "
    "fused=True (or foreach=True) so one kernel updates every parameter",
    ("zero_grad", "pytorch"): "foreach/fused optimizer: zero_grad(set_to_none=True) drops these "
    "fill kernels (or zero all grads in one foreach call)",
    ("cuda_graphs", "pytorch"): "CUDA graphs: launch-bound - capture the region "
    "(torch.compile mode='reduce-overhead' or torch.cuda.graphs) to replay without host launches",
    ("fusion", "pytorch"): "torch.compile / fusion: fuse these small kernels with their neighbours",
    ("cuda_graphs", "cuda"): "launch-bound: capture the repeated launches once as a CUDA graph "
    "(cudaStreamBeginCapture, cudaGraphLaunch) or fuse them into fewer kernels",
    ("cuda_graphs", "hip"): "launch-bound: capture the repeated launches once as a HIP graph "
    "(hipStreamBeginCapture, hipGraphLaunch) or fuse them into fewer kernels",
    ("cuda_graphs", "jax"): "launch-bound: jax.jit the whole step so XLA fuses and launches it "
    "as one program",
    ("fusion", "jax"): "jit larger regions so XLA fuses these small kernels",
    ("cuda_graphs", "tensorrt"): "launch-bound: capture inference (enqueueV3) in a CUDA graph and "
    "replay it",
    ("cuda_graphs", "openacc"): "launch-bound: merge small parallel loops into one kernels/"
    "parallel region (collapse), launch with async queues",
    ("cuda_graphs", "openmp"): "launch-bound: merge small target regions into one target teams "
    "distribute loop (collapse), launch them nowait",
}
SHORT_KERNEL_GENERIC: Final[dict[str, str]] = {
    "fused_optimizer": "one fused kernel for the parameter update (multi-tensor apply) instead "
    "of one launch per parameter",
    "zero_grad": "zero the gradients in one kernel, or overwrite them instead of zeroing",
    "cuda_graphs": "launch-bound: replay the repeated launches as one graph or fuse them into "
    "fewer kernels",
    "larger_batch": "larger batch: the GEMMs are too small to fill the GPU; batch more work per "
    "call (or group the GEMMs)",
    "fusion": "fuse these small kernels with their neighbours (one pass over the data)",
}


def short_kernel_remedy(code: str, program: Program) -> str:
    """The remedy of a short-kernel group (``kernels.short`` remedy code) in the program's
    terms."""
    return SHORT_KERNEL_REMEDIES.get((code, program.framework), SHORT_KERNEL_GENERIC[code])


def attention_remedy(program: Program) -> str:
    """The remedy for materialised attention, in the program's terms."""
    return ATTENTION.get(program.framework, ATTENTION_GENERIC)


def remedy(category: str, program: Program) -> str:
    """One line of advice for ``category`` in ``program``'s terms (rules in the module
    docstring). ``ValueError`` for a category not in ``CATEGORIES``."""
    if category not in GENERIC:
        raise ValueError(f"no remedy for category {category!r}; known: {', '.join(CATEGORIES)}")
    text = REMEDIES.get((category, program.framework), GENERIC[category])
    return text.format_map(VENDOR_WORDS.get(program.vendor, VENDOR_WORDS["unknown"]))


__all__ = [
    "CATEGORIES",
    "EXTRA_CATEGORIES",
    "GENERIC",
    "REMEDIES",
    "SHORT_KERNEL_GENERIC",
    "SHORT_KERNEL_REMEDIES",
    "VENDOR_WORDS",
    "attention_remedy",
    "remedy",
    "short_kernel_remedy",
]
