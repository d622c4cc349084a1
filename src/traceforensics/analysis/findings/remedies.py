"""One line of advice per finding category, in the terms of the program that was traced.

A table, not logic: ``REMEDIES[(category, framework)]`` when the framework has its own wording,
else ``GENERIC[category]`` (framework-neutral: no PyTorch, no vendor API names). Texts name the
tools of the program's vendor through three placeholders, filled from ``VENDOR_WORDS``:
``{prof}`` (system profiler), ``{kprof}`` (kernel profiler) and ``{rt}`` (runtime API prefix),
so an AMD program is never told to run nsys or Nsight.

Categories: the idle causes (``analysis.idle.causes.CAUSES``) plus ``exposed_communication``
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

from traceforensics.analysis.findings.program import Program
from traceforensics.analysis.findings.results import CATEGORIES
from traceforensics.analysis.idle.causes import CAUSES

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

#: Framework-neutral wording: the fallback for every (category, framework) not in REMEDIES.
#: Holds ids a later version adds to ``CAUSES`` (``gpu_pickup``); ``GENERIC`` keeps the ids of
#: ``CATEGORIES`` only, so the table and the category list always agree.
_GENERIC_ALL: Final[dict[str, str]] = {
    "gpu_pickup": "fewer, larger kernels (the GPU's own pick-up time between queued kernels): "
    "fuse adjacent kernels, batch more work per kernel",
    "data_loading": "feed the GPU faster: prepare the next batch on other threads while this "
    "one computes, and double-buffer its upload",
    "host_sync": "remove host waits from the step: read results back every N steps, wait on "
    "events instead of whole-device synchronizes",
    "memcpy": "use page-locked (pinned) host buffers and asynchronous copies on their own stream "
    "so copies overlap compute",
    "launch_overhead": "launch fewer, larger kernels: fuse small kernels, batch work, capture the "
    "repeated step once as a graph",
    "memory_management": "allocate device and pinned memory once, outside the loop, and reuse it "
    "(allocating and freeing synchronize the device)",
    "compilation": "compile once: build for the exact GPU, cache compiled kernels, warm up before "
    "profiling",
    "communication": "overlap communication with compute (start it early, wait late) and check "
    "for stragglers on other ranks",
    "io": "move file I/O (checkpoints, logging) off the thread that launches GPU work, or do it "
    "less often",
    "cross_stream_wait": "queued work waited on another stream's event: record the event right "
    "after the work it guards, split that producer, or give this stream other work meanwhile",
    "cpu_compute": "the launching thread was busy with other CPU work: move it off the step's "
    "critical path or overlap it with GPU work",
    "profiler_overhead": "profiler overhead: compare with a run that records less before acting",
    "untraced": "nothing recorded explains this idle: profile with more host detail ({prof}) to "
    "see what the host did",
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
}
GENERIC: Final[dict[str, str]] = {c: _GENERIC_ALL[c] for c in CATEGORIES if c in _GENERIC_ALL}

REMEDIES: Final[dict[tuple[str, str], str]] = {
    # -- PyTorch: the idle-cause wording the reports always gave, plus the other findings
    ("data_loading", "pytorch"): "feed the GPU faster: DataLoader(num_workers>0, pin_memory=True, "
    "persistent_workers=True, prefetch_factor), move decoding/augmentation off the main thread",
    ("host_sync", "pytorch"): "remove host syncs from the step: avoid .item()/.cpu()/print of GPU "
    "tensors, torch.cuda.synchronize and blocking D2H copies; log metrics every N steps",
    ("memcpy", "pytorch"): "pin host buffers (pin_memory=True) and copy with non_blocking=True so "
    "copies overlap compute instead of blocking the host",
    ("launch_overhead", "pytorch"): "launch fewer, larger kernels: torch.compile / fusion, CUDA "
    "graphs, fused/foreach optimizers, larger batch",
    ("memory_management", "pytorch"): "stop allocator churn: avoid empty_cache(), reuse buffers, "
    "let the caching allocator warm up ({rt}Malloc/{rt}Free synchronize)",
    ("compilation", "pytorch"): "compile once: warm up before profiling, avoid recompiles "
    "(dynamic shapes, guards), cache kernels",
    ("communication", "pytorch"): "overlap communication with compute (bucketing, async "
    "collectives), check for stragglers on other ranks",
    ("io", "pytorch"): "move checkpoint/logging I/O off the training thread (async "
    "checkpointing) or do it less often",
    ("profiler_overhead", "pytorch"): "profiler overhead: compare with a run that records less "
    "(no with_stack/record_shapes) before acting",
    ("untraced", "pytorch"): "nothing recorded explains this idle: profile with more host detail "
    "({prof}, or record_shapes/with_stack) to see what the host did",
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
    ("data_loading", "cuda"): "overlap input preparation with compute: a producer thread fills "
    "cudaMallocHost buffers, double-buffered with cudaMemcpyAsync on a second stream",
    ("host_sync", "cuda"): "drop cudaDeviceSynchronize/cudaStreamSynchronize and blocking "
    "cudaMemcpy from the loop: wait on a cudaEvent every N steps, cudaStreamWaitEvent between",
    ("memcpy", "cuda"): "allocate host buffers with cudaMallocHost (or cudaHostRegister; CUDA "
    "Fortran: pinned) and cudaMemcpyAsync on a non-default stream so copies overlap kernels",
    ("launch_overhead", "cuda"): "launch fewer, larger kernels: fuse adjacent kernels and "
    "capture the repeated step as a CUDA graph (cudaStreamBeginCapture, cudaGraphLaunch)",
    ("memory_management", "cuda"): "move cudaMalloc/cudaFree out of the loop: allocate once and "
    "reuse, or cudaMallocAsync from a memory pool",
    ("compilation", "cuda"): "avoid run-time JIT and lazy loading in the loop: build SASS for the "
    "GPU (-gencode arch=compute_XX,code=sm_XX), CUDA_MODULE_LOADING=EAGER",
    ("communication", "cuda"): "run NCCL/MPI exchanges on their own stream overlapped with "
    "independent kernels, and check for stragglers on other ranks",
    ("exposed_communication", "cuda"): "hide NCCL behind compute on a separate stream, group "
    "small collectives (ncclGroupStart/ncclGroupEnd) into fewer larger ones, check stragglers",
    ("transfer_bound", "cuda"): "keep data resident on the device across steps, copy only what "
    "changed, overlap the rest from cudaMallocHost buffers with cudaMemcpyAsync",
    ("one_off", "cuda"): "start-up cost (module loading, library handles, first allocations) "
    "before the first step: warm up before profiling, CUDA_MODULE_LOADING=EAGER",
    # -- HIP (AMD)
    ("data_loading", "hip"): "overlap input preparation with compute: a producer thread fills "
    "hipHostMalloc buffers, double-buffered with hipMemcpyAsync on a second stream",
    ("host_sync", "hip"): "drop hipDeviceSynchronize/hipStreamSynchronize and blocking hipMemcpy "
    "from the loop: wait on a hipEvent every N steps, hipStreamWaitEvent between streams",
    ("memcpy", "hip"): "allocate host buffers with hipHostMalloc (or hipHostRegister) and "
    "hipMemcpyAsync on a non-null stream so copies overlap kernels",
    ("launch_overhead", "hip"): "launch fewer, larger kernels: fuse adjacent kernels and capture "
    "the repeated step as a hipGraph (hipStreamBeginCapture, hipGraphLaunch)",
    ("memory_management", "hip"): "move hipMalloc/hipFree out of the loop: allocate once and "
    "reuse, or hipMallocAsync from a memory pool",
    ("compilation", "hip"): "build code objects for the exact GPU (--offload-arch=gfx90a/gfx942) "
    "so nothing is compiled at run time; warm up before profiling",
    ("exposed_communication", "hip"): "hide RCCL behind compute on a separate stream, group small "
    "collectives (ncclGroupStart/ncclGroupEnd) into fewer larger ones, check stragglers",
    ("transfer_bound", "hip"): "keep data resident on the device across steps, copy only what "
    "changed, overlap the rest from hipHostMalloc buffers with hipMemcpyAsync",
    ("one_off", "hip"): "start-up cost (code-object loading, rocBLAS/MIOpen tuning) before the "
    "first step: warm up before profiling, keep MIOpen's find-db between runs",
    # -- OpenACC
    ("data_loading", "openacc"): "overlap input preparation with compute: upload the next batch "
    "with update device(...) async(q) while the current compute region runs",
    ("host_sync", "openacc"): "put compute regions and updates on async(q) queues and wait(q) "
    "only when the host needs results; no update self(...) every iteration",
    ("memcpy", "openacc"): "wrap the loop in a data region (copyin/create, present on inner "
    "regions) so arrays are not copied implicitly per kernel; build with -gpu=pinned",
    ("launch_overhead", "openacc"): "fewer, larger kernels: merge adjacent loops into one "
    "parallel region, collapse(n) nested loops, async queues so launches do not wait",
    ("memory_management", "openacc"): "create device arrays once (enter data create) outside the "
    "loop, not per region; -gpu=managed or -gpu=pinned changes how host memory is allocated",
    ("compilation", "openacc"): "build for the target GPU (nvc -gpu=ccXX) so nothing is "
    "JIT-compiled from PTX at start; warm up before profiling",
    ("communication", "openacc"): "pass device arrays to CUDA-aware MPI via host_data "
    "use_device, and overlap halo exchange with interior compute on async queues",
    ("cpu_compute", "openacc"): "host loops still run on the CPU between kernels: offload them "
    "too (parallel loop) or overlap them with async compute regions",
    ("transfer_bound", "openacc"): "keep arrays resident on the device (enter data copyin once, "
    "present clauses, update only changed parts); -gpu=pinned speeds the remaining copies",
    ("kernel_efficiency", "openacc"): "check the loop schedule (nvc -Minfo=accel): gang/vector "
    "on the right loops, collapse, contiguous inner index; call cuBLAS via host_data",
    ("one_off", "openacc"): "start-up cost (device init, first data region, module loading) "
    "before the first iteration: warm up before profiling, create data once at start",
    # -- OpenMP target offload
    ("data_loading", "openmp"): "overlap input preparation with compute: target update to(...) "
    "nowait depend(out: ...) for the next batch while the current target region runs",
    ("host_sync", "openmp"): "end target regions with nowait + depend and taskwait only where "
    "the host needs results; no target update from(...) every iteration",
    ("memcpy", "openmp"): "keep data mapped across the loop (target data, or target enter/exit "
    "data) and map only what each region needs; avoid implicit tofrom maps per region",
    ("launch_overhead", "openmp"): "fewer, larger target regions: fuse loops into one target "
    "teams distribute parallel for, collapse(n), nowait so launches do not serialise",
    ("memory_management", "openmp"): "allocate device memory once (target enter data "
    "map(alloc: ...) or omp_target_alloc) outside the loop and reuse it",
    ("compilation", "openmp"): "build the offload image for the exact GPU (--offload-arch=..., "
    "nvc -gpu=ccXX) so nothing is JIT-compiled at start; warm up before profiling",
    ("communication", "openmp"): "pass device pointers to MPI (use_device_addr) and overlap "
    "halo exchange with nowait target tasks on interior work",
    ("cpu_compute", "openmp"): "host loops still run on the CPU between target regions: offload "
    "them too, or overlap them with nowait target tasks",
    ("transfer_bound", "openmp"): "keep arrays resident on the device (target enter data once, "
    "target update only changed parts), overlap the rest with nowait + depend",
    ("kernel_efficiency", "openmp"): "check the teams/threads mapping (num_teams, thread_limit), "
    "collapse loops, contiguous inner index; call vendor BLAS via use_device_ptr",
    ("one_off", "openmp"): "start-up cost (offload runtime init, image loading, first maps) "
    "before the first iteration: warm up before profiling",
    # -- JAX / XLA
    ("data_loading", "jax"): "feed the device ahead: prefetch the next batch with "
    "jax.device_put (or a tf.data/grain pipeline with prefetch) while this step runs",
    ("host_sync", "jax"): "no block_until_ready, float()/np.asarray of device arrays or host "
    "callbacks (jax.debug.print) in the loop; log metrics every N steps",
    ("memcpy", "jax"): "keep arrays on the device between steps (jax.device_put once, "
    "donate_argnums for updated state) and put inputs ahead of use",
    ("launch_overhead", "jax"): "jax.jit the whole step (lax.scan over micro-steps) instead of "
    "many small jitted calls or op-by-op execution",
    ("memory_management", "jax"): "donate buffers replaced every step (donate_argnums) and avoid "
    "rebuilding large arrays on the host each step",
    ("compilation", "jax"): "compile once: static shapes (pad or bucket), static_argnums for "
    "config so jit does not retrace, the persistent compilation cache",
    ("communication", "jax"): "shard with jax.sharding / shard_map so XLA schedules collectives "
    "asynchronously next to compute; check for stragglers",
    ("io", "jax"): "checkpoint asynchronously (orbax async checkpointing) or less often, off "
    "the step's critical path",
    ("exposed_communication", "jax"): "fewer, larger collectives (shard so gradients reduce in "
    "big chunks); XLA's latency-hiding scheduler flag only when sure; check stragglers",
    ("transfer_bound", "jax"): "keep data and state on the device (device_put once, "
    "donate_argnums), prefetch batches, do preprocessing inside the jitted step",
    ("kernel_efficiency", "jax"): "bf16 matmuls (dtype or jax.default_matmul_precision), "
    "jax.nn.dot_product_attention for attention, larger aligned shapes, jit bigger functions",
    ("one_off", "jax"): "start-up cost (tracing, XLA compilation, autotuning) before the first "
    "step: warm up before profiling; the persistent compilation cache spares later runs",
    # -- TensorRT
    ("data_loading", "tensorrt"): "prepare the next request while the engine runs: "
    "double-buffer pinned input buffers and upload them on a second stream",
    ("host_sync", "tensorrt"): "do not synchronize after every inference: record a cudaEvent "
    "per request and wait only when the output is consumed",
    ("memcpy", "tensorrt"): "pinned (cudaMallocHost) I/O buffers and cudaMemcpyAsync on the "
    "inference stream; keep inputs on the device when a GPU produced them",
    ("launch_overhead", "tensorrt"): "capture enqueueV3 into a CUDA graph once (stream capture, "
    "then cudaGraphLaunch per request) and run larger batches",
    ("memory_management", "tensorrt"): "create the execution context and I/O buffers once, set "
    "tensor addresses once and reuse them; no per-request cudaMalloc",
    ("compilation", "tensorrt"): "build the engine offline and deserialize it at start; keep a "
    "timing cache so rebuilds skip tactic autotuning",
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
