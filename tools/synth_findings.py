"""Labelled traces for the ranked findings (issue 11): in each, one change is known to give
back the most time, and it is not (only) an idle gap. Written in either format by
``SynthTrace.write_kineto`` / ``write_nsys``.

- ``exposed_comm_loop``: per step 4 GEMMs at ~70 % MFU (~0.8 ms), then an all-reduce kernel of
  6 ms on its own stream that nothing overlaps: first change ``exposed_communication``.
- ``transfer_bound_loop``: per step a 96 MB pageable host-to-device copy at 3 GB/s (32 ms)
  that nothing overlaps, then 2 ms of GEMMs: first change ``transfer_bound``.
- ``low_mfu_loop``: materialised attention (bmm, softmax, bmm over S x S scores) with the
  GEMMs at ~4 % MFU filling the GPU: first change ``kernel_efficiency``.
- ``healthy_loop``: GEMMs back to back at ~74 % MFU: nothing large to give back.
- ``offload_program``: an OpenMP-offload program (``__omp_offloading_`` kernels, no PyTorch)
  whose time is pageable copies each way: first change ``transfer_bound``, worded for OpenMP.

Times in ns; the device is an H100 (bf16 dense peak 989.4 TFLOPS, 3.35 TB/s).
"""

from __future__ import annotations

from typing import Any

from synth import SynthTrace

H100_BF16_FLOP_PER_NS = 989_400  # dense bf16 peak, FLOP per ns
BF16 = "c10::BFloat16"
GEMM = "sm90_xmma_gemm_bf16bf16_bf16f32_f32_tn_n_tilesize128x128x64_warpgroupsize1x1x1"


def _mm(
    tr: SynthTrace, t: int, gpu_t: int, m: int, k: int, n: int, mfu: float, op: str = "aten::mm"
) -> tuple[int, int]:
    """An aten::mm (or bmm with a leading batch of 1) at ``mfu``; returns (host end, GPU end)."""
    flops = 2 * m * k * n
    dur = int(flops / (H100_BF16_FLOP_PER_NS * mfu))
    args: dict[str, Any] = {"Input Dims": [[m, k], [k, n]], "Input type": [BF16, BF16]}
    if op == "aten::bmm":
        args = {"Input Dims": [[1, m, k], [1, k, n]], "Input type": [BF16, BF16]}
    tr.cpu_range(op, t, 20_000, args=args)
    start = max(gpu_t, t + 10_000)
    tr.launch(GEMM, t + 5_000, 5_000, start, dur)
    return t + 20_000, start + dur


def exposed_comm_loop(steps: int = 5) -> SynthTrace:
    tr = SynthTrace()
    t, gpu = 10_000, 0
    for i in range(steps):
        tr.cpu_range(f"ProfilerStep#{i}", t, 1, kind="annotation")
        for _ in range(4):
            t, gpu = _mm(tr, t, gpu, 4096, 4096, 4096, 0.7)
        tr.cpu_range("c10d::allreduce_", t, 20_000)
        start = max(gpu, t + 10_000)
        tr.launch(
            "ncclDevKernel_AllReduce_Sum_bf16_RING_LL(ncclDevKernelArgsStorage<4096ul>)",
            t + 5_000, 5_000, start, 6_000_000, stream=13,
        )  # fmt: skip
        gpu, t = start + 6_000_000, start + 6_000_000 + 10_000
    return tr


def transfer_bound_loop(steps: int = 4) -> SynthTrace:
    tr = SynthTrace()
    t, gpu = 10_000, 0
    nbytes = 96 * 2**20
    for _ in range(steps):
        copy_ns = nbytes // 3  # 3 GB/s, pageable
        start = max(gpu, t + 10_000)  # same stream: after the previous step's GEMMs
        tr.cpu_range("aten::copy_", t, start - t + copy_ns + 20_000)
        tr.launch(
            "", t + 5_000, start - t + copy_ns + 10_000, start, copy_ns, kind="memcpy",
            copy_kind="h2d", src_mem="pageable", dst_mem="device", bytes=nbytes,
            api="cudaMemcpyAsync",
        )  # fmt: skip
        t, gpu = start + copy_ns + 20_000, start + copy_ns
        for _ in range(8):
            t, gpu = _mm(tr, t, gpu, 4096, 4096, 4096, 0.7)
    return tr


def low_mfu_loop(steps: int = 4, seq: int = 4096, head_dim: int = 128) -> SynthTrace:
    """Attention written out: scores = q @ k^T (S x S), softmax, out = p @ v; GEMMs at ~4 %."""
    tr = SynthTrace()
    t, gpu = 10_000, 0
    for _ in range(steps):
        for _ in range(8):  # heads
            t, gpu = _mm(tr, t, gpu, seq, head_dim, seq, 0.04, op="aten::bmm")
            tr.cpu_range(
                "aten::softmax", t, 20_000,
                args={"Input Dims": [[1, seq, seq], [], []], "Input type": [BF16, "Scalar", ""]},
            )  # fmt: skip
            start = max(gpu, t + 10_000)
            soft = 2 * seq * seq * 2 // 1_000  # ~1 TB/s effective over the S x S scores
            tr.launch("softmax_warp_forward", t + 5_000, 5_000, start, soft)
            t, gpu = t + 20_000, start + soft
            t, gpu = _mm(tr, t, gpu, seq, seq, head_dim, 0.04, op="aten::bmm")
    return tr


def healthy_loop(steps: int = 4) -> SynthTrace:
    tr = SynthTrace()
    t, gpu = 10_000, 0
    for _ in range(steps * 8):
        t, gpu = _mm(tr, t, gpu, 8192, 8192, 8192, 0.74)
    return tr


def offload_program(iterations: int = 6) -> SynthTrace:
    """``target map(to: a, b) map(from: c)`` around one kernel, every iteration, pageable."""
    tr = SynthTrace()
    t = 10_000
    nbytes = 64 * 2**20
    for _ in range(iterations):
        for direction in ("h2d", "h2d", "kernel", "d2h"):
            if direction == "kernel":
                tr.launch("__omp_offloading_10302_2f4c8a_main_l42", t, 6_000, t + 8_000, 400_000)
                t += 410_000
                continue
            copy_ns = nbytes * 10 // 39  # 3.9 GB/s
            src, dst = ("pageable", "device") if direction == "h2d" else ("device", "pageable")
            tr.launch(
                "", t, copy_ns + 20_000, t + 10_000, copy_ns, kind="memcpy",
                copy_kind=direction, src_mem=src, dst_mem=dst, bytes=nbytes,
                api="cuMemcpyHtoDAsync_v2" if direction == "h2d" else "cuMemcpyDtoHAsync_v2",
            )  # fmt: skip
            t += copy_ns + 30_000
    return tr
