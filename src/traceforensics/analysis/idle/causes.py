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

import re
from collections.abc import Mapping, Sequence
from typing import Final

import numpy as np
import numpy.typing as npt
import polars as pl

from traceforensics.analysis.steps import STEP_MARKER_RE

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

#: Every cause id, in report order.
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
#: Sync-drain rule and its timeline: ``attribution.sync_drain``.
SYNC_DRAIN_SLACK_NS: Final = 20_000
#: After a drain, generic host work (CPU ops, dispatch, untraced time) counts as the host
#: catching up (``host_sync``) for at most this long after the sync returned; later time is
#: attributed by what the thread was doing, as in any other gap (timeline:
#: ``attribution.host_late``).
SYNC_CATCHUP_MAX_NS: Final = 1_000_000
#: Work already queued that starts at most this long after the GPU went idle, with no
#: dependency recorded, is GPU-side launch latency (``launch_overhead``); longer is ``untraced``.
#: HTA's launch-delay cutoff is 100 µs; a GPU picks queued work up within a few µs.
#: Queued-part outcomes and their timeline: ``attribution.queued_cause``.
QUEUED_LAUNCH_LATENCY_MAX_NS: Final = 50_000
#: Host time inside the operator that dispatches a launch counts as ``launch_overhead`` for at
#: most this long before the launch call; earlier time in that operator is CPU work
#: (``cpu_compute``). Framework dispatch of one op takes µs to a few hundred µs; a ``.to()``
#: that spends 30 s initialising CUDA is not dispatch overhead (timeline:
#: ``attribution.dispatch_start``).
DISPATCH_MAX_NS: Final = 1_000_000
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

_SYNC_API_RE: Final = r"(?i)synchronize"
_SYNC_OP_RE: Final = r"^(aten::item|aten::_local_scalar_dense|aten::cpu)$"
_MEMCPY_API_RE: Final = r"(?i)memcpy"
_MEMORY_API_RE: Final = (
    r"(?i)(malloc|free|hostalloc|hostregister|memalloc|memcreate|memmap|memunmap|"
    r"memaddressreserve|memaddressfree|mempool|memrelease)"
)
_MEMORY_RANGE_RE: Final = r"(?i)(empty_cache|cachingallocator|cudaMalloc|cudaFree)"
_COMPILE_API_RE: Final = r"(?i)(nvrtc|moduleload|libraryload|culink|modulegetfunction|jitlink)"
_COMPILE_RANGE_RE: Final = (
    # compile-time frames only: eval_frame.compile_wrapper, _compile.py inner, Torch-Compiled
    # Region and CompiledFunction run on every call of compiled code and are not compilation
    r"(?i)(nvrtc|^torch\.compile$|compile_fx|compile_inner|convert_frame|call_user_compiler|"
    r"aot_dispatcher|async_compile|codecache|inductor.*compile|triton.*compil|"
    r"nvfuser.*compile|fusion.*compile|compilefusion|jit.*compile|autotun|cuModuleLoad)"
)
_COMM_RE: Final = (
    r"(?i)(nccl|rccl|gloo|c10d|processgroup|record_param_comms|all_?reduce|all_?gather|"
    r"reduce_?scatter|all_?to_?all|broadcast|barrier)"
)
_IO_OS_RE: Final = (
    r"^(read|write|pread|pwrite|readv|writev|preadv|pwritev|fsync|fdatasync|sync|open|open64|"
    r"openat|openat64|close|fopen|fopen64|fclose|fread|fwrite|fflush|lseek|lseek64|stat|fstat|"
    r"lstat|sendfile|copy_file_range|unlink|rename)(64)?$"
)
_IO_RANGE_RE: Final = r"(?i)(^|[^a-z])(checkpoint|ckpt|save|serializ|torch\.save)"
_IO_RANGE_EXCLUDE_RE: Final = r"(?i)(checkpointfunction|checkpoint_wrapper|checkpointbackward)"
_OVERHEAD_RE: Final = r"(?i)(profiler.*(flush|overhead)|cupti|buffer flush|profiling data flush)"


def data_regex(patterns: Sequence[str]) -> str:
    """Regex for user data-loading words: each at a word start, case-insensitive."""
    words = "|".join(re.escape(p) for p in patterns if p)
    return rf"(?i)(^|[^a-z0-9])({words})" if words else r"$^"


def classify_host(
    host: pl.DataFrame,
    data_patterns: Sequence[str] = DEFAULT_DATA_PATTERNS,
    step_re: str = STEP_MARKER_RE,
) -> pl.Series:
    """Cause index (``CAUSE_INDEX``) of each host row, or -1 when it explains nothing.

    ``host`` needs columns ``kind``, ``name`` (str), ``is_comm`` and ``blocking_d2h`` (bool:
    a copy call whose GPU copy is device-to-host; it blocks until the queue drains, so it is
    ``host_sync`` rather than ``memcpy``).
    User ``data_patterns`` apply to annotations and to record_function ranges recorded as cpu_op
    (names without ``::`` and not autograd nodes), never to aten ops (``aten::batch_norm``).
    """
    name = pl.col("name")
    kind = pl.col("kind")
    is_api = kind == "cuda_api"
    is_range = kind.is_in(["cpu_op", "annotation", "python"])
    user_range = (kind == "annotation") | (
        (kind == "cpu_op") & ~name.str.contains("::") & ~name.str.contains(r"Backward\d*$")
    )
    d2h = pl.col("blocking_d2h").fill_null(False)
    idx = CAUSE_INDEX
    expr = (
        pl.when(name.str.contains(step_re))
        .then(pl.lit(-1))
        .when(kind == "overhead")
        .then(pl.lit(idx[PROFILER_OVERHEAD]))
        .when(
            is_api & (name.str.contains(_SYNC_API_RE) | (name.str.contains(_MEMCPY_API_RE) & d2h))
        )
        .then(pl.lit(idx[HOST_SYNC]))
        .when(is_api & name.str.contains(_MEMCPY_API_RE))
        .then(pl.lit(idx[MEMCPY]))
        .when(is_api & name.str.contains(_MEMORY_API_RE))
        .then(pl.lit(idx[MEMORY_MANAGEMENT]))
        .when(is_api & name.str.contains(_COMPILE_API_RE))
        .then(pl.lit(idx[COMPILATION]))
        .when(is_api & (pl.col("is_comm") | name.str.contains(_COMM_RE)))
        .then(pl.lit(idx[COMMUNICATION]))
        .when(is_api)
        .then(pl.lit(idx[LAUNCH_OVERHEAD]))
        .when(kind == "os_call")
        .then(
            pl.when(name.str.contains(_IO_OS_RE))
            .then(pl.lit(idx[IO]))
            .when(name.str.contains(_MEMORY_API_RE))
            .then(pl.lit(idx[MEMORY_MANAGEMENT]))
            .otherwise(pl.lit(-1))
        )
        .when(is_range & name.str.contains(_SYNC_OP_RE))
        .then(pl.lit(idx[HOST_SYNC]))
        .when(is_range & name.str.contains(_OVERHEAD_RE))
        .then(pl.lit(idx[PROFILER_OVERHEAD]))
        .when(is_range & name.str.contains(_MEMORY_RANGE_RE))
        .then(pl.lit(idx[MEMORY_MANAGEMENT]))
        .when(is_range & name.str.contains(_COMPILE_RANGE_RE))
        .then(pl.lit(idx[COMPILATION]))
        .when(is_range & (pl.col("is_comm") | name.str.contains(_COMM_RE)))
        .then(pl.lit(idx[COMMUNICATION]))
        .when(
            is_range
            & (
                name.str.contains(BUILTIN_DATA_RE)
                | (user_range & name.str.contains(data_regex(data_patterns)))
            )
        )
        .then(pl.lit(idx[DATA_LOADING]))
        .when(
            is_range
            & (user_range | (kind == "python"))
            & name.str.contains(_IO_RANGE_RE)
            & ~name.str.contains(_IO_RANGE_EXCLUDE_RE)
        )
        .then(pl.lit(idx[IO]))
        .when(is_range)
        .then(pl.lit(idx[CPU_COMPUTE]))
        .otherwise(pl.lit(-1))
    )
    # names repeat heavily (tens of thousands of rows, a few hundred names): run the regexes
    # once per distinct (kind, name, flags), deduplicated on the columns' own (categorical)
    # codes, and join the result back
    keys = ["kind", "name", "is_comm", "blocking_d2h"]
    flat = host.select(
        "kind",
        "name",
        pl.col("is_comm").fill_null(False),
        pl.col("blocking_d2h").fill_null(False),
    )
    uniq = flat.unique()
    cause = (
        uniq.with_columns(pl.col("kind").cast(pl.String), pl.col("name").cast(pl.String))
        .select(expr.cast(pl.Int8).alias("cause"))
        .get_column("cause")
    )
    return flat.join(
        uniq.with_columns(cause), on=keys, how="left", maintain_order="left"
    ).get_column("cause")


def launch_part_cause(api_names: pl.Series, call_ns: npt.NDArray[np.int64]) -> np.ndarray:
    """Cause of the launch part ``[tl, t2)`` of a gap (the host inside launch call L), by L's
    name and ``call_ns`` (its duration, ns): a copy call (``cudaMemcpy*``: pageable copies
    stage on the host inside the call) is ``memcpy``; another launch lasting over
    ``SLOW_LAUNCH_CALL_MIN_NS`` (1 000 000 ns) is ``compilation`` (lazy module loading / JIT:
    a launch cannot block on a full queue while the GPU idles); any other launch (kernel,
    memset, graph) is ``launch_overhead``::

        GPU   ==k1==|.............. gap ...............|==k2==
        host  [cudaLaunchKernel ........ 4 ms ........]
              tl                                      t2
              [tl, t2) compilation (call > 1 000 000 ns; a 5 µs call: launch_overhead)
    """
    names = api_names.cast(pl.String).fill_null("")
    uniq = names.unique()
    is_copy = names.is_in(uniq.filter(uniq.str.contains(_MEMCPY_API_RE)).implode()).to_numpy()
    slow = call_ns > SLOW_LAUNCH_CALL_MIN_NS
    return np.where(
        is_copy,
        CAUSE_INDEX[MEMCPY],
        np.where(slow, CAUSE_INDEX[COMPILATION], CAUSE_INDEX[LAUNCH_OVERHEAD]),
    ).astype(np.int64)


#: Number of causes (columns of attribution matrices).
N_CAUSES: Final = len(CAUSES)


def slow_api_is_compilation(
    cause: pl.Series, is_api: npt.NDArray[np.bool_], dur_ns: npt.NDArray[np.int64]
) -> pl.Series:
    """Host class of each row, with generic CUDA API calls (class ``launch_overhead``) longer
    than ``SLOW_LAUNCH_CALL_MIN_NS`` (1 000 000 ns; ``dur_ns`` in ns) turned into
    ``compilation`` (``is_api``: the row is a ``cuda_api`` call): such a call is the first CUDA
    call initialising the context and loading modules (or JIT-compiling PTX), not dispatch::

        GPU   |................ gap ..................|==k1==
        host  [cudaDeviceGetStreamPriorityRange 30 ms] [L]
              class compilation (> 1 000 000 ns)       launch_overhead
    """
    c = cause.to_numpy().copy()
    slow = (c == CAUSE_INDEX[LAUNCH_OVERHEAD]) & is_api & (dur_ns > SLOW_LAUNCH_CALL_MIN_NS)
    c[slow] = CAUSE_INDEX[COMPILATION]
    return pl.Series("cause", c, dtype=pl.Int8)


def ranked_causes(idle_by_cause: Mapping[str, int]) -> list[tuple[str, int]]:
    """Causes with idle time, largest first; ties in the stable ``CAUSES`` order. The one cause
    ranking every renderer and ``top_cause`` use."""
    nonzero = [(c, int(ns)) for c, ns in idle_by_cause.items() if ns > 0]
    return sorted(nonzero, key=lambda cn: (-cn[1], CAUSE_INDEX.get(cn[0], N_CAUSES)))
