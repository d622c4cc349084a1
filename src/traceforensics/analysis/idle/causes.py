"""Thresholds and name patterns of the idle attribution; the cause ids and their order.

The causes themselves (ids, report order, host-class priority, colours, glossary text,
remedies, estimate confidence) are one table, ``analysis.cause_table``; this module re-exports
its ids and orders for the idle pass. Cause ids are a stable contract (JSON, docs/causes.md):
never rename, only add.

Every host row (cpu_op, annotation, python, os_call, cuda_api, overhead) gets at most one
*class* (a cause id) from its kind and name. When several classified ranges of one thread cover
the same instant, the one with the highest ``PRIORITY`` wins: blocking calls (sync, copy,
allocator) beat the context they run in (compilation, communication, data loading, I/O), which
beats generic work (launch API calls, other named CPU work). Step markers (``ProfilerStep#N``)
are never classified: they enclose everything and explain nothing.
"""

from __future__ import annotations

from typing import Final

from traceforensics.analysis.cause_table import (
    CAUSE_INDEX,
    CAUSES,
    COMMUNICATION,
    COMPILATION,
    CPU_COMPUTE,
    CROSS_STREAM_WAIT,
    DATA_LOADING,
    GPU_PICKUP,
    HOST_SYNC,
    IO,
    LAUNCH_OVERHEAD,
    MEMCPY,
    MEMORY_MANAGEMENT,
    N_CAUSES,
    PRIORITY,
    PROFILER_OVERHEAD,
    UNTRACED,
    ranked_causes,
)
from traceforensics.analysis.classify import SLOW_LAUNCH_CALL_MIN_NS
from traceforensics.analysis.names import BUILTIN_DATA_RE, DEFAULT_DATA_PATTERNS

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
#: A step is an outlier when it is this much longer than the median step (fraction) ...
OUTLIER_MIN_EXCESS_FRACTION: Final = 0.2
#: ... and more than this many robust standard deviations (1.4826·MAD) above the median.
OUTLIER_MAD_SIGMAS: Final = 3.0

__all__ = [
    "BUILTIN_DATA_RE",
    "CAUSES",
    "CAUSE_INDEX",
    "COMMUNICATION",
    "COMPILATION",
    "CPU_COMPUTE",
    "CROSS_STREAM_WAIT",
    "DATA_LOADING",
    "DEFAULT_DATA_PATTERNS",
    "DISPATCH_MAX_NS",
    "GPU_PICKUP",
    "HOST_SYNC",
    "IO",
    "LAUNCH_OVERHEAD",
    "MEMCPY",
    "MEMORY_MANAGEMENT",
    "N_CAUSES",
    "OUTLIER_MAD_SIGMAS",
    "OUTLIER_MIN_EXCESS_FRACTION",
    "PRIORITY",
    "PROFILER_OVERHEAD",
    "QUEUED_LAUNCH_LATENCY_MAX_NS",
    "SLOW_LAUNCH_CALL_MIN_NS",
    "SYNC_CATCHUP_MAX_NS",
    "SYNC_DRAIN_SLACK_NS",
    "UNTRACED",
    "ranked_causes",
]
