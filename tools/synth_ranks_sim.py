"""Per-rank timeline model of a data-parallel training step, for ``synth_ranks``.

One ``RankSim`` lays out one rank's host thread, its compute stream and its NCCL stream in a
``synth.SynthTrace`` (integer ns in the reference clock). A step (``RankSim.step``) is a
generator because ranks meet only in their collectives: it yields a ``Pending`` at each
collective launch and is sent back the kernel's (start, end), which the job decides from every
rank's arrival (start = max(arrival, NCCL stream free), end = max over ranks of start +
transfer); the kernel is written then and the step goes on:

- ProfilerStep opens, dataloader ``__next__`` (GPU idle);
- with ``all_to_all`` in ``JobSpec.collectives`` (a DLRM-style embedding exchange): the host
  issues ``c10d::alltoall_base_`` > ``record_param_comms`` > ``nccl:all_to_all`` >
  ``cudaLaunchKernelExC`` of ``A2A_KERNEL`` (NCCL runs an all-to-all as grouped send/recv:
  a ``SendRecv`` kernel); the compute stream waits for it (the forward reads its output);
- forward, loss, backward on the compute stream; with ``all_reduce`` (the default), after each
  gradient bucket the host issues ``c10d::allreduce_`` > ``record_param_comms`` >
  ``cudaEventRecord`` + ``cudaStreamWaitEvent`` (the NCCL stream waits on the compute stream)
  > ``nccl:all_reduce`` > ``cudaLaunchKernelExC``; nothing waits for these until the optimizer.
  A collective's *arrival* is ``max(launch + LAUNCH_TO_GPU_NS, compute stream free at the
  event record)``;
- ``Optimizer.step#SGD.step`` (the compute stream waits on the NCCL stream), a blocking
  ``cudaDeviceSynchronize`` and the end of the step.

Causes (only on the straggler): ``data_loading`` adds ``loader_extra_ns`` inside the dataloader
range; ``host_sync`` puts a blocking ``cudaStreamSynchronize`` on the compute stream after every
forward/backward op (per-layer timing or NaN checks) and ``sync_host_ns`` of host work after it,
so the GPU drains and waits for each next launch; ``slow_gpu`` multiplies the compute kernels'
durations by ``slow_gpu_factor``.
"""

from __future__ import annotations

import itertools
import random
from collections.abc import Generator, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any

from synth import SynthTrace
from synth_scenarios import (
    ADD_KERNEL,
    DATALOADER_RANGE,
    GEMM_KERNEL,
    LAUNCH_API_NS,
    LAUNCH_TO_GPU_NS,
    REDUCE_KERNEL,
    RELU_KERNEL,
)

NCCL_KERNEL = "ncclKernel_AllReduce_RING_LL_Sum_float(ncclDevComm*, unsigned long, ncclWork*)"
COMPUTE_STREAM = 7
COMM_STREAM = 40  # the NCCL stream id of the real DDP trace (ddp_nccl_a100_rank0)
#: The all-to-all kernel: NCCL runs ``alltoall_base`` as grouped send/recv (the DLRM job of
#: issue 44, NCCL 2.10 on V100).
A2A_KERNEL = "ncclKernel_SendRecv_RING_SIMPLE_Sum_int8_t(ncclWorkElem)"
CAUSES = ("data_loading", "host_sync", "slow_gpu")
#: Collective kinds a job can run (``JobSpec.collectives``).
COLLECTIVES = ("all_reduce", "all_to_all")
#: Per kind: the c10d op, the NCCL record function, ``Collective name``, the kernel.
_KIND = {
    "all_reduce": ("c10d::allreduce_", "nccl:all_reduce", "allreduce", NCCL_KERNEL),
    "all_to_all": ("c10d::alltoall_base_", "nccl:all_to_all", "all_to_all", A2A_KERNEL),
}
BWD_RANGE = "autograd::engine::evaluate_function: AddmmBackward0"


def ranks_text(world: int) -> str:
    """The ranks of a ``world``-rank group as kineto writes them: a quoted list, ``[0, 1]``."""
    return "[" + ", ".join(str(r) for r in range(world)) + "]"


@dataclass(frozen=True)
class JobSpec:
    """The model's knobs (the defaults give ~15 ms steps on every rank)."""

    dims: tuple[int, ...] = (1024, 4096, 4096, 4096, 1024)
    batch: int = 4096
    buckets: int = 2  # all-reduces per step (DDP gradient buckets)
    gemm_flop_per_ns: int = 150_000
    loader_ns: int = 2_000_000
    dispatch_ns: int = 30_000  # host time of an op before its launch
    jitter: float = 0.02  # +-2 % on kernels, +-5x that on host times
    loader_extra_ns: int = 30_000_000  # data_loading straggler
    sync_host_ns: int = 120_000  # host_sync straggler: host work after each sync
    slow_gpu_factor: float = 1.3  # slow_gpu straggler
    bus_bytes_per_ns: int = 100  # ring all-reduce bus bandwidth (100 GB/s)
    nccl_latency_ns: int = 20_000
    #: collective kinds run each step (``COLLECTIVES``): all-to-all first, after the loader
    collectives: tuple[str, ...] = ("all_reduce",)
    a2a_nelems: int = 2_097_152  # floats each rank exchanges in its all-to-all (8 MB)

    def layers(self) -> list[tuple[int, int]]:
        return list(itertools.pairwise(self.dims))

    def bucket_of_layers(self) -> list[list[int]]:
        """Backward order (last layer first) split into ``buckets`` consecutive groups."""
        order = list(range(len(self.layers()) - 1, -1, -1))
        n = max(1, min(self.buckets, len(order)))
        size = -(-len(order) // n)
        return [order[i : i + size] for i in range(0, len(order), size)]

    def bucket_nelems(self) -> list[int]:
        layers = self.layers()
        return [
            sum(layers[i][0] * layers[i][1] + layers[i][1] for i in b)
            for b in self.bucket_of_layers()
        ]

    def transfer_ns(self, nelems: int, world: int) -> int:
        """Ring all-reduce time of ``nelems`` floats: 2(W-1)/W x bytes / bus bandwidth."""
        moved = 2 * (world - 1) * nelems * 4 // world
        return self.nccl_latency_ns + moved // self.bus_bytes_per_ns

    def plan(self, world: int) -> list[tuple[str, int, int]]:
        """The step's collectives in issue order: ``(kind, nelems, transfer_ns)``. An
        all-to-all sends (W-1)/W of its buffer, at the same bus bandwidth."""
        unknown = set(self.collectives) - set(COLLECTIVES)
        if unknown or not self.collectives:
            raise ValueError(f"collectives must be some of {COLLECTIVES}, not {self.collectives}")
        out = []
        if "all_to_all" in self.collectives:
            moved = (world - 1) * self.a2a_nelems * 4 // world
            out.append(
                (
                    "all_to_all",
                    self.a2a_nelems,
                    self.nccl_latency_ns + moved // self.bus_bytes_per_ns,
                )
            )
        if "all_reduce" in self.collectives:
            out += [("all_reduce", n, self.transfer_ns(n, world)) for n in self.bucket_nelems()]
        return out


@dataclass
class Pending:
    """A collective launched in phase A whose kernel is written in phase B."""

    index: int  # collective index inside the step
    seq: int
    launch_ns: int  # host start of cudaLaunchKernelExC
    arrival_ns: int  # when this rank's kernel could start (NCCL stream free aside)
    external_id: int | None
    args: dict[str, Any]
    kind: str = "all_reduce"


@dataclass
class StepDraws:
    """One rank-step's jitter factors, drawn up front (the counterfactual reuses them)."""

    kernel: list[float]
    host: list[float]
    loader: float

    @classmethod
    def draw(cls, rng: random.Random, spec: JobSpec, n: int = 64) -> StepDraws:
        j = spec.jitter
        return cls(
            kernel=[rng.uniform(1 - j, 1 + j) for _ in range(n)],
            host=[rng.uniform(1 - 5 * j, 1 + 5 * j) for _ in range(n)],
            loader=rng.uniform(1 - 5 * j, 1 + 5 * j),
        )


@dataclass
class RankSim:
    """One rank's cursor: host clock ``t``, compute stream free ``s7``, NCCL stream free."""

    tr: SynthTrace
    rank: int
    world: int
    spec: JobSpec
    cause: str | None = None  # the straggler's cause, None on healthy ranks
    tid: int = 1
    device: int = 0
    t: int = 0
    s7: int = 0
    comm_free: int = 0
    stack: list[int] = field(default_factory=list)
    #: NCCL's own NVTX ranges (nsys): (start, end, text)
    nccl_api_spans: list[tuple[int, int, str]] = field(default_factory=list)
    _draws: StepDraws | None = None
    _ki: int = 0
    _hi: int = 0

    # ------------------------------------------------------------ primitives
    def open(self, name: str, kind: str = "cpu_op", args: dict[str, Any] | None = None) -> int:
        idx = self.tr.cpu_range(name, self.t, 0, kind=kind, tid=self.tid, args=args)
        self.stack.append(idx)
        return idx

    def close(self, idx: int) -> None:
        ev = self.tr.events[idx]
        ev.dur_ns = self.t - ev.start_ns
        self.stack.remove(idx)

    @contextmanager
    def range(
        self, name: str, kind: str = "cpu_op", args: dict[str, Any] | None = None
    ) -> Iterator[int]:
        idx = self.open(name, kind, args)
        yield idx
        self.close(idx)

    def ext(self) -> int | None:
        """External id of the innermost open range (what kineto gives a launch inside it)."""
        return self.tr.events[self.stack[-1]].external_id if self.stack else None

    def kjit(self) -> float:
        assert self._draws is not None
        self._ki += 1
        return self._draws.kernel[(self._ki - 1) % len(self._draws.kernel)]

    def hjit(self, ns: int) -> int:
        assert self._draws is not None
        self._hi += 1
        return int(ns * self._draws.host[(self._hi - 1) % len(self._draws.host)])

    def work(self, ns: int) -> None:
        self.t += ns

    def kernel(
        self, name: str, gpu_ns: int, *, grid: tuple[int, int, int] = (1, 1, 1), after_ns: int = 0
    ) -> None:
        """Launch a compute kernel now; it starts when the stream is free (and not before
        ``after_ns``)."""
        dur = int(gpu_ns * self.kjit())
        if self.cause == "slow_gpu":
            dur = int(dur * self.spec.slow_gpu_factor)
        start = max(self.s7, self.t + LAUNCH_TO_GPU_NS, after_ns)
        self.tr.launch(
            name,
            self.t,
            LAUNCH_API_NS,
            start,
            dur,
            stream=COMPUTE_STREAM,
            device=self.device,
            tid=self.tid,
            external_id=self.ext(),
            grid=grid,
            block=(256, 1, 1),
        )
        self.s7 = start + dur
        self.t += LAUNCH_API_NS

    def op(
        self,
        name: str,
        kernels: list[tuple[str, int]],
        args: dict[str, Any] | None = None,
        *,
        grid: tuple[int, int, int] = (1, 1, 1),
        after_ns: int = 0,
    ) -> None:
        """An aten op: dispatch, its launches, epilogue; then the host_sync straggler's sync."""
        with self.range(name, args=args):
            self.work(self.hjit(self.spec.dispatch_ns))
            for kname, kns in kernels:
                self.kernel(kname, kns, grid=grid, after_ns=after_ns)
                self.work(1_000)
            self.work(2_000)
        if self.cause == "host_sync":
            self.stream_sync()
            self.work(self.spec.sync_host_ns)

    def stream_sync(self) -> None:
        """``cudaStreamSynchronize`` on the compute stream: returns when it has drained."""
        self._sync("cudaStreamSynchronize", "Stream Sync", max(self.t + 3_000, self.s7 + 2_000))

    def device_sync(self) -> None:
        """``cudaDeviceSynchronize``: returns when every stream (NCCL too) has drained."""
        end = max(self.t + 3_000, self.s7 + 3_000, self.comm_free + 3_000)
        self._sync("cudaDeviceSynchronize", "Context Sync", end)

    def _sync(self, api: str, record: str, end: int) -> None:
        """A blocking sync call from now to ``end`` and its GPU sync record."""
        corr = self.tr.new_correlation()
        self.tr.api(
            api, self.t, end - self.t, tid=self.tid, correlation=corr, external_id=self.ext()
        )
        self.tr.gpu_sync(
            record,
            self.t,
            end - self.t,
            stream=COMPUTE_STREAM,
            device=self.device,
            correlation=corr,
        )
        self.t = end

    def api(self, name: str, dur_ns: int) -> None:
        self.tr.api(name, self.t, dur_ns, tid=self.tid, external_id=self.ext())
        self.t += dur_ns

    # ------------------------------------------------------------ the model
    def gemm_ns(self, fan_in: int, fan_out: int) -> int:
        return 2 * self.spec.batch * fan_in * fan_out // self.spec.gemm_flop_per_ns

    def comm_args(self, nelems: int, kind: str = "all_reduce") -> dict[str, Any]:
        """The collective args kineto puts on ``record_param_comms`` and the NCCL kernel."""
        return {
            "Collective name": _KIND[kind][2],
            "dtype": "Float",
            "In msg nelems": nelems,
            "Out msg nelems": nelems,
            "In split size": "[]",
            "Out split size": "[]",
            "Group size": self.world,
            "Process Group Name": "0",
            "Process Group Description": "default_pg",
            "Process Group Ranks": ranks_text(self.world),
        }

    def collective(self, index: int, seq: int, nelems: int, kind: str = "all_reduce") -> Pending:
        """The host side of a collective (``c10d::...`` op); its kernel is written once the job
        has sent back its start and end (``write_collective``)."""
        args = self.comm_args(nelems, kind)
        rpc = {
            **args,
            "Global rank start": 0,
            "Global rank stride": 1,
            "Rank": self.rank,
            "Seq": seq,
        }
        c10d, record, _, _ = _KIND[kind]
        with self.range(c10d):
            self.work(self.hjit(25_000))
            with self.range("record_param_comms", args=rpc) as rpc_idx:
                self.work(3_000)
                ready = self.s7  # cudaEventRecord on the compute stream marks this point
                self.api("cudaEventRecord", 2_000)
                self.api("cudaStreamWaitEvent", 1_500)
                with self.range(record, kind="annotation"):
                    self.work(self.hjit(20_000))
                    launch = self.t
                    self._nccl_ranges(kind, launch)
                    self.work(10_000)  # cudaLaunchKernelExC, written by write_collective
                    self.work(5_000)
                self.work(4_000)
            self.work(3_000)
        ext = self.tr.events[rpc_idx].external_id
        arrival = max(launch + LAUNCH_TO_GPU_NS, ready)
        return Pending(index, seq, launch, arrival, ext, args, kind)

    def _nccl_ranges(self, kind: str, launch: int) -> None:
        """NCCL's NVTX ranges around the launch (nsys): ``ncclAllReduce``; an all-to-all is
        ``ncclGroupStart``, one ``ncclSend`` + ``ncclRecv`` per peer, ``ncclGroupEnd`` (which
        launches the kernel): nothing in NCCL's own ranges says "all-to-all"."""
        if kind == "all_reduce":
            self.nccl_api_spans.append((launch - 2_000, launch + 12_000, "ncclAllReduce"))
            return
        t = launch - 2_000 - 400 * self.world - 300
        self.nccl_api_spans.append((t, t + 200, "ncclGroupStart"))
        for peer in range(self.world):
            t += 400
            self.nccl_api_spans.append((t - 150, t - 100, f"ncclSend peer {peer}"))
            self.nccl_api_spans.append((t - 80, t - 30, f"ncclRecv peer {peer}"))
        self.nccl_api_spans.append((launch - 2_000, launch + 12_000, "ncclGroupEnd"))

    def write_collective(self, p: Pending, start: int, end: int) -> None:
        """The collective's kernel on the NCCL stream, launched at ``p.launch_ns``."""
        self.tr.launch(
            _KIND[p.kind][3],
            p.launch_ns,
            10_000,
            start,
            end - start,
            stream=COMM_STREAM,
            device=self.device,
            api="cudaLaunchKernelExC",
            tid=self.tid,
            external_id=p.external_id,
            grid=(8, 1, 1),
            block=(544, 1, 1),
            args=p.args,
        )
        self.comm_free = max(self.comm_free, end)

    def step(
        self, step_name: str, draws: StepDraws, first_seq: int
    ) -> Generator[Pending, tuple[int, int], int]:
        """One step (module docstring): yields each collective's ``Pending`` and is sent its
        kernel's (start, end). Returns the ProfilerStep's event index."""
        self._draws, self._ki, self._hi = draws, 0, 0
        spec = self.spec
        step_idx = self.open(step_name, kind="annotation")
        self.work(5_000)
        with self.range(DATALOADER_RANGE, kind="annotation"):
            loader = int(spec.loader_ns * draws.loader) - 40_000
            self.work(loader + (spec.loader_extra_ns if self.cause == "data_loading" else 0))
            with self.range("aten::stack"):
                self.work(40_000)
        seq = first_seq
        if "all_to_all" in spec.collectives:
            p = self.collective(0, seq, spec.a2a_nelems, "all_to_all")
            start, end = yield p
            self.write_collective(p, start, end)
            self.s7 = max(self.s7, end)  # the forward reads the exchanged embeddings
            seq += 1
        layers = spec.layers()
        with self.range("DistributedDataParallel.forward", kind="annotation"):
            for fan_in, fan_out in layers:
                grid = (fan_out // 128, spec.batch // 128, 1)
                with self.range("aten::linear"):
                    self.op(
                        "aten::addmm", [(GEMM_KERNEL, self.gemm_ns(fan_in, fan_out))], grid=grid
                    )
                self.op("aten::relu", [(RELU_KERNEL, spec.batch * fan_out // 750)])
        self.op("aten::mse_loss", [(ADD_KERNEL, 6_000), (REDUCE_KERNEL, 9_000)])
        nelems = spec.bucket_nelems()
        for b, bucket in enumerate(spec.bucket_of_layers()):
            for i in bucket:
                fan_in, fan_out = layers[i]
                with self.range(BWD_RANGE), self.range("AddmmBackward0"):
                    self.op("aten::mm", [(GEMM_KERNEL, self.gemm_ns(fan_in, fan_out))])
                    self.op("aten::mm", [(GEMM_KERNEL, self.gemm_ns(fan_in, fan_out))])
                    self.op("aten::sum", [(REDUCE_KERNEL, spec.batch * fan_out // 1_500)])
            if "all_reduce" in spec.collectives:
                p = self.collective(b, seq, nelems[b])
                start, end = yield p
                self.write_collective(p, start, end)
                seq += 1
        cause, self.cause = self.cause, None  # the optimizer is the same on every rank
        with self.range("Optimizer.step#SGD.step", kind="annotation"):
            self.api("cudaStreamWaitEvent", 1_500)
            for fan_in, fan_out in self.spec.layers():
                for n in (fan_in * fan_out, fan_out):
                    self.op("aten::add_", [(ADD_KERNEL, 3_000 + n // 250)], after_ns=self.comm_free)
        self.cause = cause
        self.device_sync()
        self.work(self.hjit(10_000))
        self.close(step_idx)
        return step_idx
