"""What each finding category means and how it is detected, in one place (``tf explain``).

One entry per id of ``results.CATEGORIES``: ``meaning`` (what the GPU or the host was doing)
and ``detection`` (the rule, in words; the details are in docs/causes.md and docs/findings.md).
What to do comes from ``remedies`` in the program's terms. The diagnostic codes
(``analysis.diagnostics``: what a trace is or cannot show) have their own entries, with what to
do, in ``DIAGNOSTIC_GLOSSARY``.
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
        "the host waited for the GPU to drain (a synchronizing call), then caught up: the "
        "relaunch into the emptied queue is the sync's cost",
        "a synchronizing call (cudaStreamSynchronize, .item(), cudaEventSynchronize, a "
        "blocking D2H copy) returned just after the GPU went idle; in that gap, for 1 ms after "
        "it returns, the host's generic work, the launch call and the pick-up latency of the "
        "relaunched work count too",
    ),
    "memcpy": Entry(
        "the host was blocked inside a copy call",
        "the launching thread was inside a pageable cudaMemcpy*/H2D staging call during the gap",
    ),
    "launch_overhead": Entry(
        "the host was issuing this very work: operator dispatch and the launch API",
        "the time from the launching op's last child that did other work to its launch call, "
        "and the GPU's short pick-up latency (<= 50 us) after a launch call it waited for "
        "(work queued before the gap began is gpu_pickup)",
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
    "gpu_pickup": Entry(
        "work was already queued (launched before the gap began) and the GPU took a few µs to "
        "start it: the time between back-to-back kernels, not a wait for a launch",
        "the launch call of the work ending the gap had returned before the gap began, nothing "
        "recorded held it back (no stream wait, not a collective) and it started at most 50 us "
        "after the GPU went idle; large only where many tiny kernels run back to back",
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
    "fp32_matmul": Entry(
        "GEMM/convolution kernels ran in plain FP32, leaving the tensor (matrix) cores idle",
        "kernel names that say FP32 without tensor cores (sgemm, scudnn, simt, Tensile _SB_) "
        "on a GPU that has tensor cores; no shapes needed (nsys exports too)",
    ),
    "layout_conversion": Entry(
        "the convolution library converted tensors between NCHW and NHWC around each layer",
        "cuDNN nchwToNhwc/nhwcToNchw and MIOpen transpose kernels by name; channels_last "
        "removes the conversions between layers",
    ),
    "zero_grad": Entry(
        "optimizer.zero_grad() zeroed every gradient with its own fill kernel",
        "fill kernels and memsets launched inside Optimizer.zero_grad ranges, plus the GPU idle "
        "inside those ranges (set_to_none=True launches none)",
    ),
}


class CodeEntry(NamedTuple):
    meaning: str
    detection: str
    todo: str


#: What each diagnostic code (``analysis.diagnostics.CODES``) means, how it is found and what
#: to change (``tf explain CODE``; docs/json-output.md lists them too).
DIAGNOSTIC_GLOSSARY: Final[dict[str, CodeEntry]] = {
    "gpu_activity_missing": CodeEntry(
        "GPU launch calls were recorded but no GPU activity record: the trace cannot show "
        "what the GPU did",
        "launch API rows (cudaLaunchKernel, cuLaunchKernel, hipLaunchKernel, cudaGraphLaunch, "
        "...) and not one kernel, copy, memset or graph row",
        "record with CUDA activity on: torch.profiler(activities=[ProfilerActivity.CPU, "
        "ProfilerActivity.CUDA]) and let the profiler stop cleanly (the device buffer is "
        "written at the end; a killed run loses it); with nsys, `nsys profile -t cuda`",
    ),
    "cuda_tables_missing": CodeEntry(
        "the Nsight Systems export has no CUDA table: CUDA tracing was off, so neither the "
        "CUDA API calls nor the GPU work were recorded (not a CPU-only program)",
        "none of CUPTI_ACTIVITY_KIND_KERNEL, _MEMCPY, _MEMSET, _SYNCHRONIZATION, _GRAPH_TRACE, "
        "_RUNTIME in the export",
        "record again with `nsys profile -t cuda,nvtx,osrt ...` (the `-t cuda` flag), then "
        "`nsys export --type sqlite`",
    ),
    "cpu_only": CodeEntry(
        "the trace has no GPU activity and no GPU launch call: a CPU-only capture",
        "no GPU work row and no launch API row; the host time of its steps is split by phase "
        "(the host section)",
        "nothing, when the program runs on the CPU; to profile a GPU run, record it on a "
        "machine with the GPU and CUDA activity on",
    ),
    "analysis_failed": CodeEntry(
        "one part of the analysis raised on this trace; that part is empty, the rest stands",
        "an exception in an analysis pass (its name is in the message)",
        "report it with the trace (a bug in traceforensics); the other sections still hold",
    ),
    "monitor_unaligned": CodeEntry(
        "the monitoring log could not be put on the trace's clock",
        "the log has no sample inside the trace's wall-clock window, or the trace records no "
        "wall clock",
        "record the log during the traced run, with wall-clock timestamps",
    ),
    "nsys_data_lost": CodeEntry(
        "nsys recorded that it lost or dropped events: some GPU or API rows are missing",
        "a warning or error in the export's DIAGNOSTIC_EVENT table about lost data",
        "record a shorter window or give nsys larger buffers (see the nsys message)",
    ),
    "rows_dropped": CodeEntry(
        "rows that could not be placed were dropped (no start time, or GPU work without a device)",
        "NULL or non-numeric start, NULL deviceId on GPU work rows",
        "re-export the report with `nsys export --type sqlite`",
    ),
    "schema_newer": CodeEntry(
        "the export schema is newer than the tested ones; tables were read by feature detection",
        "EXPORT_SCHEMA_VERSION's major number above the tested one",
        "check the figures against nsys's own view; report a difference",
    ),
    "names_missing": CodeEntry(
        "kernel, API and range names are unknown (no StringIds table)",
        "the export has rows but no StringIds table",
        "re-export it with `nsys export --type sqlite`",
    ),
    "nvtx_ranges_open": CodeEntry(
        "NVTX ranges that were never ended were dropped",
        "NVTX push/start rows without an end",
        "end every NVTX range before the capture stops",
    ),
    "trace_truncated": CodeEntry(
        "the trace file was cut off mid-write: the end of the run is missing",
        "a Kineto JSON file (or its gzip stream) that ends inside the event list; the events "
        "before the cut are analysed",
        "let the profiler finish writing (a job killed during export, a full disk); compare "
        "only the steps both runs hold",
    ),
    "warning": CodeEntry(
        "any other warning of the trace or its analysis (the message says what)",
        "the loader's or the analysis's checks",
        "what the message says",
    ),
}
