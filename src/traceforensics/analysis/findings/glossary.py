"""What each finding category means and how it is detected, in one place (``tf explain``).

One entry per id of ``results.CATEGORIES``: ``meaning`` (what the GPU or the host was doing)
and ``detection`` (the rule, in words; the details are in docs/causes.md and docs/findings.md).
The idle causes' entries come from their rows in ``analysis.cause_table``; the other
categories' are here. What to do comes from ``remedies`` in the program's terms. The diagnostic
codes (``analysis.diagnostics``: what a trace is or cannot show) have their own entries, with
what to do, in ``DIAGNOSTIC_GLOSSARY``.
"""

from __future__ import annotations

from typing import Final, NamedTuple

from traceforensics.analysis.cause_table import CAUSE_TABLE


class Entry(NamedTuple):
    meaning: str
    detection: str


#: The categories that are not idle causes, in ``results.CATEGORIES`` order.
_OTHER: Final[dict[str, Entry]] = {
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
    "optimizer_step": Entry(
        "the optimizer's update (optimizer.step) took a large share of the window",
        "kernels launched inside Optimizer.step ranges (or ranges saying optimizer) plus the GPU "
        "idle inside them, from 10 % of the window; fused/foreach kernels by name decide the "
        "remedy",
    ),
    "serving_scheduler_gap": Entry(
        "an inference server's host work between iterations (scheduling, sampling, "
        "detokenisation) left the GPU idle",
        "the idle between the engine's iterations, split by the host ranges inside it "
        "(docs/serving.md)",
    ),
    "serving_eager_decode": Entry(
        "decode iterations ran eagerly (kernel by kernel) for batch sizes without a captured graph",
        "decode iterations without a graph launch beside ones with it (docs/serving.md)",
    ),
    "allocator_churn": Entry(
        "device memory allocated and freed in the loop (cudaMalloc/cudaFree, empty_cache) "
        "left the GPU idle",
        "allocator calls and their idle (the memory_management cause), allocation churn per "
        "step from the memory events (docs/memory.md)",
    ),
    "reserved_unused": Entry(
        "the caching allocator reserved far more than was allocated at the peak",
        "reserved - allocated at the peak of the memory timeline (docs/memory.md)",
    ),
    "memory_near_capacity": Entry(
        "the memory peak came near the device's capacity",
        "peak reserved against the device's memory (docs/memory.md)",
    ),
}

#: Every category id (``results.CATEGORIES`` order: the idle causes first) -> its entry.
GLOSSARY: Final[dict[str, Entry]] = {
    **{c.id: Entry(c.meaning, c.detection) for c in CAUSE_TABLE},
    **_OTHER,
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
