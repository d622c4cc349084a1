"""What each finding category means and how it is detected, in one place (``tf explain``).

One entry per id of ``results.CATEGORIES``: ``meaning`` (what the GPU or the host was doing)
and ``detection`` (the rule, in words; the details are in docs/causes.md and docs/findings.md).
What to do comes from ``remedies`` in the program's terms.
"""

from __future__ import annotations

from typing import Final, NamedTuple


class Entry(NamedTuple):
    meaning: str
    detection: str


GLOSSARY: Final[dict[str, Entry]] = {
    "data_loading": Entry(
        "the GPU waited while the host fetched or prepared the next batch",
        "the launching thread was inside a data-fetch range (DataLoader __next__, names with "
        "data/batch/load/prefetch) during the gap",
    ),
    "host_sync": Entry(
        "the host waited for the GPU to drain (a synchronizing call), then caught up",
        "a synchronizing call (cudaStreamSynchronize, .item(), cudaEventSynchronize, a "
        "blocking D2H copy) returned just after the GPU went idle",
    ),
    "memcpy": Entry(
        "the host was blocked inside a copy call",
        "the launching thread was inside a pageable cudaMemcpy*/H2D staging call during the gap",
    ),
    "launch_overhead": Entry(
        "the host was issuing this very work: operator dispatch and the launch API",
        "the time from the launching op's last child that did other work to its launch call, "
        "or a short GPU pick-up latency of queued work (<= 50 us)",
    ),
    "memory_management": Entry(
        "allocator calls held the host (cudaMalloc/cudaFree synchronize the device)",
        "cudaMalloc/cudaFree/empty_cache/allocator ranges on the launching thread",
    ),
    "compilation": Entry(
        "code was being compiled or loaded: JIT, module load, torch.compile, autotuning",
        "compile/JIT/module-load ranges, or a launch or CUDA call lasting > 1 ms on an idle GPU "
        "(lazy module loading, context initialisation)",
    ),
    "communication": Entry(
        "the host was inside a collective, or queued work was a collective",
        "the launching thread was in an NCCL/RCCL/gloo/c10d range, or the next GPU op is a "
        "communication kernel that followed one",
    ),
    "io": Entry(
        "file I/O held the host: checkpoints, logging, reading data files",
        "OS read/write/fsync calls or checkpoint/save ranges on the launching thread",
    ),
    "cross_stream_wait": Entry(
        "work was queued in time but its stream waited on another stream's event",
        "a cudaStreamWaitEvent/hipStreamWaitEvent (or a Stream Wait Event record) before the "
        "launch, on an event recorded after work of another stream still running",
    ),
    "cpu_compute": Entry(
        "the launching thread ran other CPU work (ops, Python, user ranges)",
        "named CPU ranges covering the gap that are not dispatch of the launch itself",
    ),
    "profiler_overhead": Entry(
        "the profiler itself (buffer flushes, start-up)",
        "profiler overhead intervals recorded in the trace",
    ),
    "untraced": Entry(
        "nothing recorded explains the idle time",
        "no classified host range, sync, wait or collective covers the gap",
    ),
    "exposed_communication": Entry(
        "collective/peer kernels ran while no compute ran: communication not hidden",
        "|communication ∪ compute| - |compute| inside the window (communication kernels by name: "
        "NCCL, RCCL, custom all-reduce)",
    ),
    "transfer_bound": Entry(
        "copies took GPU time that no compute overlapped, slower than the link allows",
        "memcpy/memset time not overlapped by kernels, compared with the bandwidth the link "
        "reaches with pinned memory (PCIe generation from the compute capability)",
    ),
    "kernel_efficiency": Entry(
        "kernels ran far below what the chip can do",
        "roofline per op with a FLOP/byte model: compute-bound ops against 75 % of the dtype's "
        "peak, memory-bound ones against 80 % of the memory bandwidth; S x S softmax = "
        "materialised attention",
    ),
    "one_off": Entry(
        "idle outside the steps: start-up before the first step and the tail after the last",
        "the device's idle minus the idle inside its detected steps (ProfilerStep#N or "
        "step-like ranges)",
    ),
    "straggler_wait": Entry(
        "a rank waited inside collectives for the job's straggler (the rank that arrives last)",
        "collectives matched across ranks; each rank's wait = the last rank's start minus its "
        "own (clock offsets removed), at most the kernel's duration",
    ),
}
