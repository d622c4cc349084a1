"""Idle-cause taxonomy and the classification of host events into causes.

Cause ids are a stable contract (JSON, docs/causes.md): never rename, only add.

Every host row (cpu_op, annotation, python, os_call, cuda_api, overhead) gets at most one
*class* (a cause id) from its kind and name. When several classified ranges of one thread cover
the same instant, the one with the highest ``PRIORITY`` wins: blocking calls (sync, copy,
allocator) beat the context they run in (compilation, communication, data loading, I/O), which
beats generic work (launch API calls, other named CPU work). Step markers (``ProfilerStep#N``)
are never classified: they enclose everything and explain nothing.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Final

DATA_LOADING: Final = "data_loading"
HOST_SYNC: Final = "host_sync"
MEMCPY: Final = "memcpy"
LAUNCH_OVERHEAD: Final = "launch_overhead"
MEMORY_MANAGEMENT: Final = "memory_management"
COMPILATION: Final = "compilation"
COMMUNICATION: Final = "communication"
IO: Final = "io"
CROSS_STREAM_WAIT: Final = "cross_stream_wait"
CPU_COMPUTE: Final = "cpu_compute"
PROFILER_OVERHEAD: Final = "profiler_overhead"
UNTRACED: Final = "untraced"
#: Queued work the GPU started after a short pick-up latency, its launch call having returned
#: before the gap began (it did not wait for a launch): ``queued.queued_cause``.
GPU_PICKUP: Final = "gpu_pickup"

#: Every cause id, in report order (ids added later go at the end: the order is a tie-break
#: of reports and ``findings.results.CATEGORIES``, never a rename).
CAUSES: Final[tuple[str, ...]] = (
    DATA_LOADING,
    HOST_SYNC,
    MEMCPY,
    LAUNCH_OVERHEAD,
    MEMORY_MANAGEMENT,
    COMPILATION,
    COMMUNICATION,
    IO,
    CROSS_STREAM_WAIT,
    CPU_COMPUTE,
    PROFILER_OVERHEAD,
    UNTRACED,
    GPU_PICKUP,
)
CAUSE_INDEX: Final[dict[str, int]] = {c: i for i, c in enumerate(CAUSES)}
#: Host-range classes, highest priority first (an instant takes the first class covering it).
PRIORITY: Final[tuple[str, ...]] = (
    HOST_SYNC,
    MEMCPY,
    MEMORY_MANAGEMENT,
    PROFILER_OVERHEAD,
    COMPILATION,
    COMMUNICATION,
    DATA_LOADING,
    IO,
    LAUNCH_OVERHEAD,
    CPU_COMPUTE,
)

# ---------------------------------------------------------------- thresholds (units in names)
#: A synchronizing call that returned at most this long before a gap began still drained the
#: queue that ran dry at the gap start (the sync returns a few µs after the GPU finishes).
#: Sync-drain rule and its timeline: ``late.sync_drain``.
SYNC_DRAIN_SLACK_NS: Final = 20_000
#: After a drain, generic host work (CPU ops, dispatch, untraced time), the launch call of the
#: work ending the gap and its pick-up latency (the host relaunching into the queue the sync
#: emptied) count as the host catching up (``host_sync``) for at most this long after the sync
#: returned; only in the gap the sync drained: later time, and later gaps, are attributed by
#: what the thread was doing, as in any other gap (timeline: ``late.host_late``).
SYNC_CATCHUP_MAX_NS: Final = 1_000_000
#: Queued work that starts at most this long after the GPU went idle, with no dependency
#: recorded, is GPU-side pick-up latency: ``gpu_pickup`` when its launch call had returned
#: before the gap began (it was queued all along), ``launch_overhead`` when the GPU waited
#: for that launch call first; longer is ``untraced``. HTA's launch-delay cutoff is 100 µs; a
#: GPU picks queued work up within a few µs. Queued-part outcomes: ``queued.queued_split``.
QUEUED_LAUNCH_LATENCY_MAX_NS: Final = 50_000
#: Sanity bound on a dispatch window (the launching operator's own time from its start, or
#: from the end of its last child that did other work, to its launch call;
#: ``late.dispatch_window_start``). The split comes from the recorded operator and its children,
#: not from this number: real dispatch takes µs to a few ms (the longest seen on the real traces
#: is a 2.4 ms ``aten::addmm`` on a B200), so the bound only acts on operators that run longer
#: than this with no child recorded (cuDNN building plans inside ``aten::cudnn_convolution``,
#: sampled traces that dropped the children); their excess stays CPU work (``cpu_compute``).
DISPATCH_MAX_NS: Final = 10_000_000
#: A kernel launch call (not a copy) longer than this while the GPU idles is loading the kernel's
#: module (CUDA lazy loading) or JIT-compiling PTX: ``compilation``. A full launch queue cannot
#: be the reason, since the GPU is idle; plain launches take 2-50 µs (timeline:
#: ``launch_part_cause``).
SLOW_LAUNCH_CALL_MIN_NS: Final = 1_000_000
#: A step is an outlier when it is this much longer than the median step (fraction) ...
OUTLIER_MIN_EXCESS_FRACTION: Final = 0.2
#: ... and more than this many robust standard deviations (1.4826·MAD) above the median.
OUTLIER_MAD_SIGMAS: Final = 3.0

# ---------------------------------------------------------------- name patterns
#: Default user-range words for data loading (``IdleOptions.data_patterns``); matched as words
#: at a word start (``load_batch``, ``## data ##``, ``DataLoader``), case-insensitively.
DEFAULT_DATA_PATTERNS: Final[tuple[str, ...]] = ("data", "batch", "load", "prefetch")
#: PyTorch's own data-fetch ranges, matched on every host kind.
BUILTIN_DATA_RE: Final = r"enumerate\(DataLoader\)|DataLoaderIter|DataPipe|torch/utils/data/"

#: Number of causes (columns of attribution matrices).
N_CAUSES: Final = len(CAUSES)


def ranked_causes(idle_by_cause: Mapping[str, int]) -> list[tuple[str, int]]:
    """Causes with idle time, largest first; ties in the stable ``CAUSES`` order. The one cause
    ranking every renderer and ``top_cause`` use."""
    nonzero = [(c, int(ns)) for c, ns in idle_by_cause.items() if ns > 0]
    return sorted(nonzero, key=lambda cn: (-cn[1], CAUSE_INDEX.get(cn[0], N_CAUSES)))
