"""Deterministic scenarios built with ``synth.SynthTrace``.

``training_loop``: a small bf16 MLP training loop with ProfilerStep#N ranges, a DataLoader
``__next__`` per step (long in the stall steps), a pageable host-to-device batch copy, GEMMs
carrying ``Input Dims``/``Input type``, ``aten::item`` + ``cudaStreamSynchronize`` every step,
many short optimizer kernels, and optional checkpoint writes.

``stall_scenario``: two kernels with one injected host stall of known length between them, laid
out so that the device gap is exactly the stall plus a fixed launch latency; the trace's
``expected_idle_by_cause`` says what a correct attribution returns (ns per cause id).

Host work is modelled with a cursor: every range/launch advances the host clock ``t``; GPU work
on the stream starts at max(stream free, launch start + LAUNCH_TO_GPU_NS).
"""

from __future__ import annotations

import itertools
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from typing import Any

from synth import Injected, SynthTrace

LAUNCH_API_NS = 4_000  # duration of a cudaLaunchKernel call
LAUNCH_TO_GPU_NS = 6_000  # earliest GPU start after the launch call began
DISPATCH_NS = 7_000  # host time an aten op spends before its first launch
EPILOGUE_NS = 2_000  # host time an aten op spends after its last launch
GEMM_FLOP_PER_NS = 400_000  # 400 TFLOP/s nominal bf16 GEMM throughput
PAGEABLE_H2D_BYTES_PER_NS = 12  # ~12 GB/s pageable host-to-device
PAGEABLE_STAGING_BYTES_PER_NS = 20  # host staging memcpy into the pinned bounce buffer

GEMM_KERNEL = (
    "sm90_xmma_gemm_bf16bf16_bf16f32_f32_tn_n_tilesize128x128x64_warpgroupsize1x1x1"
    "_execute_segment_k_off_kernel__5x_cublas"
)
RELU_KERNEL = (
    "void at::native::vectorized_elementwise_kernel<4, at::native::clamp_min_scalar_kernel_cuda"
    ", std::array<char*, 2ul> >(int, at::native::clamp_min_scalar_kernel_cuda"
    ", std::array<char*, 2ul>)"
)
ADD_KERNEL = (
    "void at::native::vectorized_elementwise_kernel<4, at::native::CUDAFunctor_add<c10::BFloat16>"
    ", std::array<char*, 3ul> >(int, at::native::CUDAFunctor_add<c10::BFloat16>"
    ", std::array<char*, 3ul>)"
)
REDUCE_KERNEL = (
    "void at::native::reduce_kernel<512, 1, at::native::ReduceOp<float, at::native::MeanOps"
    "<float, float, float, float>, unsigned int, float, 4> >(at::native::ReduceOp<float, "
    "at::native::MeanOps<float, float, float, float>, unsigned int, float, 4>)"
)
DATALOADER_RANGE = "enumerate(DataLoader)#_SingleProcessDataLoaderIter.__next__"


class HostCursor:
    """Host-thread clock plus one GPU stream's free time, for laying out realistic timelines."""

    def __init__(self, tr: SynthTrace, *, tid: int = 1, stream: int = 7, t0: int = 0) -> None:
        self.tr, self.tid, self.stream = tr, tid, stream
        self.t = t0
        self.gpu_free = 0

    @contextmanager
    def range(
        self, name: str, kind: str = "cpu_op", args: dict[str, Any] | None = None
    ) -> Iterator[None]:
        start = self.t
        yield
        self.tr.cpu_range(name, start, self.t - start, kind=kind, tid=self.tid, args=args)

    def work(self, ns: int) -> None:
        self.t += ns

    def kernel(
        self,
        name: str,
        gpu_ns: int,
        *,
        grid: tuple[int, int, int] = (1, 1, 1),
        block: tuple[int, int, int] = (128, 1, 1),
    ) -> int:
        start = self.t
        gpu_start = max(self.gpu_free, start + LAUNCH_TO_GPU_NS)
        corr = self.tr.launch(
            name,
            start,
            LAUNCH_API_NS,
            gpu_start,
            gpu_ns,
            stream=self.stream,
            tid=self.tid,
            grid=grid,
            block=block,
        )
        self.gpu_free = gpu_start + gpu_ns
        self.t = start + LAUNCH_API_NS
        return corr

    def op(
        self,
        name: str,
        kernels: Sequence[tuple[str, int]],
        args: dict[str, Any] | None = None,
        *,
        grid: tuple[int, int, int] = (1, 1, 1),
    ) -> None:
        """An aten op: dispatch, its kernel launches, epilogue."""
        with self.range(name, args=args):
            self.work(DISPATCH_NS)
            for kname, kns in kernels:
                self.kernel(kname, kns, grid=grid)
                self.work(1_000)
            self.work(EPILOGUE_NS)

    def pageable_h2d(self, nbytes: int, stage_ns: int | None = None) -> None:
        """A pageable cudaMemcpyAsync: the host stages, then the DMA runs; the call returns
        after the DMA (effectively synchronous)."""
        start = self.t
        stage = nbytes // PAGEABLE_STAGING_BYTES_PER_NS if stage_ns is None else stage_ns
        dma_ns = nbytes // PAGEABLE_H2D_BYTES_PER_NS
        gpu_start = max(self.gpu_free, start + stage)
        end = gpu_start + dma_ns + 2_000
        self.tr.launch(
            "",
            start,
            end - start,
            gpu_start,
            dma_ns,
            kind="memcpy",
            api="cudaMemcpyAsync",
            stream=self.stream,
            tid=self.tid,
            copy_kind="h2d",
            src_mem="pageable",
            dst_mem="device",
            bytes=nbytes,
        )
        self.gpu_free = gpu_start + dma_ns
        self.t = end

    def item(self, after_sync_ns: int = 3_000) -> tuple[int, int]:
        """``aten::item``: D2H copy of 4 bytes + cudaStreamSynchronize. Returns the sync call's
        (start, end)."""
        with self.range("aten::item"), self.range("aten::_local_scalar_dense"):
            self.work(3_000)
            start = self.t
            gpu_start = max(self.gpu_free, start + LAUNCH_TO_GPU_NS)
            self.tr.launch(
                "",
                start,
                5_000,
                gpu_start,
                2_000,
                kind="memcpy",
                api="cudaMemcpyAsync",
                stream=self.stream,
                tid=self.tid,
                copy_kind="d2h",
                src_mem="device",
                dst_mem="pageable",
                bytes=4,
            )
            self.gpu_free = gpu_start + 2_000
            self.t = start + 5_000
            sync_start = self.t
            sync_end = max(self.t + 2_000, self.gpu_free + 1_000)
            corr = self.tr.new_correlation()
            self.tr.api(
                "cudaStreamSynchronize",
                sync_start,
                sync_end - sync_start,
                tid=self.tid,
                correlation=corr,
            )
            self.tr.gpu_sync(
                "Stream Sync",
                sync_start,
                sync_end - sync_start,
                stream=self.stream,
                correlation=corr,
            )
            self.t = sync_end + after_sync_ns
        return sync_start, sync_end


def _gemm_args(m: int, k: int, n: int, dtype: str) -> dict[str, Any]:
    return {
        "Input Dims": [[n], [m, k], [k, n], [], []],
        "Input type": [dtype, dtype, dtype, "Scalar", "Scalar"],
    }


def training_loop(
    steps: int = 6,
    *,
    first_step: int = 2,
    batch: int = 2048,
    dims: Sequence[int] = (1024, 4096, 4096, 1024),
    dtype: str = "c10::BFloat16",
    loader_ns: int = 150_000,
    loader_stall_ns: int = 3_000_000,
    loader_stall_steps: Sequence[int] = (1, 4),
    checkpoint_steps: Sequence[int] = (),
    checkpoint_ns: int = 2_000_000,
    device_name: str = "NVIDIA H100 80GB HBM3",
    sm_count: int = 132,
) -> SynthTrace:
    """A deterministic training loop; ``*_steps`` are 0-based indices into the recorded steps."""
    tr = SynthTrace(device_name=device_name, sm_count=sm_count)
    cur = HostCursor(tr, t0=20_000)
    layers = list(itertools.pairwise(dims))
    seq = 0
    for i in range(steps):
        with cur.range(f"ProfilerStep#{first_step + i}", kind="annotation"):
            cur.work(5_000)
            stall = loader_stall_ns if i in loader_stall_steps else 0
            load_start = cur.t
            with cur.range(DATALOADER_RANGE, kind="annotation"):
                cur.work(loader_ns - 40_000 + stall)
                with cur.range("aten::stack"):
                    cur.work(40_000)
            if stall:
                tr.injected.append(
                    Injected("data_loading", i, load_start, cur.t - load_start, "slow __next__")
                )
            with cur.range("aten::to"), cur.range("aten::_to_copy"), cur.range("aten::copy_"):
                cur.work(3_000)
                cur.pageable_h2d(batch * dims[0] * 2)
            # forward
            for fan_in, fan_out in layers:
                seq += 1
                flops = 2 * batch * fan_in * fan_out
                with cur.range("aten::linear"):
                    cur.op(
                        "aten::addmm",
                        [(GEMM_KERNEL, flops // GEMM_FLOP_PER_NS)],
                        {**_gemm_args(batch, fan_in, fan_out, dtype), "Sequence number": seq},
                        grid=(fan_out // 128, batch // 128, 1),
                    )
                cur.op("aten::relu", [(RELU_KERNEL, batch * fan_out // 4_000)])
            cur.op("aten::mse_loss", [(ADD_KERNEL, 3_000), (REDUCE_KERNEL, 5_000)])
            sync = cur.item()
            tr.injected.append(Injected("host_sync", i, sync[0], sync[1] - sync[0], "aten::item"))
            # backward
            for fan_in, fan_out in reversed(layers):
                flops = 2 * batch * fan_in * fan_out
                name = "autograd::engine::evaluate_function: AddmmBackward0"
                with cur.range(name), cur.range("AddmmBackward0"):
                    cur.op(
                        "aten::mm",
                        [(GEMM_KERNEL, flops // GEMM_FLOP_PER_NS)],
                        {
                            "Input Dims": [[batch, fan_out], [fan_out, fan_in]],
                            "Input type": [dtype, dtype],
                        },
                    )
                    cur.op(
                        "aten::mm",
                        [(GEMM_KERNEL, flops // GEMM_FLOP_PER_NS)],
                        {
                            "Input Dims": [[fan_out, batch], [batch, fan_in]],
                            "Input type": [dtype, dtype],
                        },
                    )
                    cur.op("aten::sum", [(REDUCE_KERNEL, 4_000)])
            # optimizer: one short add_ kernel per parameter tensor (launch-bound)
            with cur.range("Optimizer.step#SGD.step", kind="annotation"):
                for _ in range(len(layers) * 2):
                    cur.op("aten::add_", [(ADD_KERNEL, 2_000)])
            if i in checkpoint_steps:
                start = cur.t
                with cur.range("checkpoint", kind="annotation"):
                    cur.work(20_000)
                    tr.cpu_range("write", cur.t, checkpoint_ns, kind="os_call", tid=cur.tid)
                    cur.work(checkpoint_ns + 20_000)
                tr.injected.append(Injected("io", i, start, cur.t - start, "checkpoint write"))
            cur.work(10_000)
    return tr


def stall_scenario(cause: str, stall_ns: int = 2_000_000, *, tid: int = 1) -> SynthTrace:
    """K1, then a host stall of ``stall_ns`` typed ``cause``, then K2.

    ``tr.expected_idle_by_cause`` is the attribution a correct analysis gives for device 0.
    Supported causes: data_loading, host_sync, memcpy, io, memory_management, compilation,
    communication, cpu_compute, untraced.
    """
    tr = SynthTrace()
    k1_start, k1_ns = 20_000, 30_000
    k1_end = k1_start + k1_ns
    tr.launch("k1_kernel", 10_000, LAUNCH_API_NS, k1_start, k1_ns, tid=tid)
    resume = k1_end + stall_ns  # host launches K2 here
    gap_end = resume + LAUNCH_TO_GPU_NS
    expected = {cause: stall_ns, "launch_overhead": LAUNCH_TO_GPU_NS}
    stall_start = k1_end
    if cause == "data_loading":
        tr.cpu_range(DATALOADER_RANGE, k1_end, stall_ns, kind="annotation", tid=tid)
    elif cause == "host_sync":
        # D2H copy queued behind K1, sync returns right after it; the host then spends the
        # stall inside aten::item before launching K2. The gap starts when the copy ends.
        copy_ns = 2_000
        item_start = 14_000
        tr.cpu_range("aten::item", item_start, resume - item_start, tid=tid)
        tr.launch(
            "",
            15_000,
            3_000,
            k1_end,
            copy_ns,
            kind="memcpy",
            api="cudaMemcpyAsync",
            tid=tid,
            copy_kind="d2h",
            src_mem="device",
            dst_mem="pageable",
            bytes=4,
        )
        corr = tr.new_correlation()
        sync_end = k1_end + copy_ns + 1_000
        tr.api("cudaStreamSynchronize", 19_000, sync_end - 19_000, tid=tid, correlation=corr)
        tr.gpu_sync("Stream Sync", 19_000, sync_end - 19_000, correlation=corr)
        stall_start = k1_end + copy_ns
        resume = stall_start + stall_ns
        gap_end = resume + LAUNCH_TO_GPU_NS
    elif cause == "memcpy":
        # Pageable H2D copy: the host stages for stall_ns, then the DMA runs; it ends the gap.
        dma_ns = 50_000
        tr.cpu_range("aten::copy_", k1_end, stall_ns + dma_ns, tid=tid)
        tr.launch(
            "",
            k1_end,
            stall_ns + dma_ns,
            k1_end + stall_ns,
            dma_ns,
            kind="memcpy",
            api="cudaMemcpyAsync",
            tid=tid,
            copy_kind="h2d",
            src_mem="pageable",
            dst_mem="device",
            bytes=dma_ns * 12,
        )
        resume = k1_end + stall_ns + dma_ns
        gap_end = resume + LAUNCH_TO_GPU_NS
        expected = {"memcpy": stall_ns, "launch_overhead": LAUNCH_TO_GPU_NS}
    elif cause == "io":
        tr.cpu_range("checkpoint", k1_end, stall_ns, kind="annotation", tid=tid)
        tr.cpu_range("write", k1_end + 1_000, stall_ns - 2_000, kind="os_call", tid=tid)
    elif cause == "memory_management":
        tr.api("cudaFree", k1_end, stall_ns, tid=tid)
    elif cause == "compilation":
        tr.api("cuModuleLoadData", k1_end, stall_ns, tid=tid)
    elif cause == "communication":
        tr.cpu_range("nccl:all_reduce", k1_end, stall_ns, kind="annotation", tid=tid)
    elif cause == "cpu_compute":
        tr.cpu_range("aten::index", k1_end, stall_ns, tid=tid)
    elif cause != "untraced":
        raise ValueError(f"no stall scenario for cause {cause!r}")
    tr.launch("k2_kernel", resume, LAUNCH_API_NS, gap_end, 30_000, tid=tid)
    tr.injected.append(Injected(cause, 0, stall_start, stall_ns))
    tr.expected_idle_by_cause = expected
    return tr
