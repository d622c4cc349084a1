"""What to change first, per idle cause: one line of advice a reader can act on.

``ranked_causes`` (the one cause ranking) lives in ``analysis.idle.causes``; re-exported here.
"""

from __future__ import annotations

from typing import Final

from traceforensics.analysis.idle.causes import ranked_causes

CAUSE_ADVICE: Final[dict[str, str]] = {
    "data_loading": "feed the GPU faster: DataLoader(num_workers>0, pin_memory=True, "
    "persistent_workers=True, prefetch_factor), move decoding/augmentation off the main thread",
    "host_sync": "remove host syncs from the step: avoid .item()/.cpu()/print of GPU tensors, "
    "torch.cuda.synchronize and blocking D2H copies; log metrics every N steps",
    "memcpy": "pin host buffers (pin_memory=True) and copy with non_blocking=True so copies "
    "overlap compute instead of blocking the host",
    "launch_overhead": "launch fewer, larger kernels: torch.compile / fusion, CUDA graphs, "
    "fused/foreach optimizers, larger batch",
    "memory_management": "stop allocator churn: avoid empty_cache(), reuse buffers, let the "
    "caching allocator warm up (cudaMalloc/cudaFree synchronize)",
    "compilation": "compile once: warm up before profiling, avoid recompiles (dynamic shapes, "
    "guards), cache kernels",
    "communication": "overlap communication with compute (bucketing, async collectives), check "
    "for stragglers on other ranks",
    "io": "move checkpoint/logging I/O off the training thread (async checkpointing) or do it "
    "less often",
    "cross_stream_wait": "check stream dependencies: work was queued but waited on another "
    "stream's event",
    "cpu_compute": "the launching thread was busy with other CPU work: move it off the step's "
    "critical path or overlap it with GPU work",
    "profiler_overhead": "profiler overhead: compare with a run that records less "
    "(no with_stack/record_shapes) before acting",
    "untraced": "nothing recorded explains this idle: profile with more host detail (nsys "
    "--trace=cuda,nvtx,osrt, or record_shapes/with_stack) to see what the host did",
}


__all__ = ["CAUSE_ADVICE", "ranked_causes"]
