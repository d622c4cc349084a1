"""Host rows into causes: the name and kind rules that give each host row its class.

Every host row (cpu_op, annotation, python, os_call, cuda_api, overhead) gets at most one
*class* (a cause id, ``causes.CAUSES``) from its kind and name. The classes' ``priority`` in
``analysis.cause_table`` decides between classes covering the same instant and, here, between
rules that match the same row (``_first``: one order for both). Also the class of the time
inside a launch call (``launch_part_cause``) and the slow-API-call rule
(``slow_api_is_compilation``).
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from typing import Final

import numpy as np
import numpy.typing as npt
import polars as pl

from traceforensics.analysis.cause_table import (
    CAUSE_INDEX,
    COMMUNICATION,
    COMPILATION,
    CPU_COMPUTE,
    DATA_LOADING,
    HOST_SYNC,
    IO,
    LAUNCH_OVERHEAD,
    MEMCPY,
    MEMORY_MANAGEMENT,
    PROFILER_OVERHEAD,
    in_priority,
)
from traceforensics.analysis.names import BUILTIN_DATA_RE, DEFAULT_DATA_PATTERNS
from traceforensics.analysis.steps import STEP_MARKER_RE

#: A kernel launch call (not a copy) longer than this while the GPU idles is loading the kernel's
#: module (CUDA lazy loading) or JIT-compiling PTX: ``compilation``. A full launch queue cannot
#: be the reason, since the GPU is idle; plain launches take 2-50 µs (timeline:
#: ``launch_part_cause``).
SLOW_LAUNCH_CALL_MIN_NS: Final = 1_000_000
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

    ``host`` needs columns ``kind``, ``name`` (str or categorical), ``is_comm`` and
    ``blocking_d2h`` (bool: a copy call whose GPU copy is device-to-host; it blocks until the
    queue drains, so it is ``host_sync`` rather than ``memcpy``). Step markers explain nothing;
    then the rules of ``_api_class`` (CUDA API calls), ``_os_class`` (OS calls) and
    ``_range_class`` (operators, annotations, Python frames), first match wins.
    """
    name, kind = pl.col("name"), pl.col("kind")
    expr = (
        pl.when(name.str.contains(step_re))
        .then(pl.lit(-1))
        .when(kind == "overhead")
        .then(pl.lit(CAUSE_INDEX[PROFILER_OVERHEAD]))
        .when(kind == "cuda_api")
        .then(_api_class())
        .when(kind == "os_call")
        .then(_os_class())
        .when(kind.is_in(["cpu_op", "annotation", "python"]))
        .then(_range_class(data_patterns))
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


def _first(rules: Mapping[str, pl.Expr], otherwise: pl.Expr) -> pl.Expr:
    """Cause index of the first rule (keyed by cause id) that holds, tried in the classes'
    priority order (``cause_table.in_priority``), else ``otherwise``: a row that matches
    several rules takes the class that would win an instant both cover."""
    out = otherwise
    for idx, cond in reversed(in_priority(rules)):
        out = pl.when(cond).then(pl.lit(idx)).otherwise(out)
    return out


def _api_class() -> pl.Expr:
    """A CUDA/HIP API call: sync (or blocking D2H copy), copy, allocator, module loading,
    communication; any other call is launch overhead."""
    name = pl.col("name")
    d2h = pl.col("blocking_d2h").fill_null(False)
    rules = {
        HOST_SYNC: name.str.contains(_SYNC_API_RE) | (name.str.contains(_MEMCPY_API_RE) & d2h),
        MEMCPY: name.str.contains(_MEMCPY_API_RE),
        MEMORY_MANAGEMENT: name.str.contains(_MEMORY_API_RE),
        COMPILATION: name.str.contains(_COMPILE_API_RE),
        COMMUNICATION: pl.col("is_comm") | name.str.contains(_COMM_RE),
    }
    return _first(rules, pl.lit(CAUSE_INDEX[LAUNCH_OVERHEAD]))


def _os_class() -> pl.Expr:
    """An OS runtime call: file I/O or memory mapping/allocation, else nothing."""
    name = pl.col("name")
    rules = {IO: name.str.contains(_IO_OS_RE), MEMORY_MANAGEMENT: name.str.contains(_MEMORY_API_RE)}
    return _first(rules, pl.lit(-1))


def _range_class(data_patterns: Sequence[str]) -> pl.Expr:
    """An operator, annotation or Python frame: sync op, allocator, profiler overhead,
    compilation, communication, data loading, I/O; any other is CPU work.

    User ``data_patterns`` apply to annotations and to record_function ranges recorded as cpu_op
    (names without ``::`` and not autograd nodes), never to aten ops (``aten::batch_norm``)."""
    name, kind = pl.col("name"), pl.col("kind")
    user_range = (kind == "annotation") | (
        (kind == "cpu_op") & ~name.str.contains("::") & ~name.str.contains(r"Backward\d*$")
    )
    data = name.str.contains(BUILTIN_DATA_RE) | (
        user_range & name.str.contains(data_regex(data_patterns))
    )
    io = (
        (user_range | (kind == "python"))
        & name.str.contains(_IO_RANGE_RE)
        & ~name.str.contains(_IO_RANGE_EXCLUDE_RE)
    )
    rules = {
        HOST_SYNC: name.str.contains(_SYNC_OP_RE),
        PROFILER_OVERHEAD: name.str.contains(_OVERHEAD_RE),
        MEMORY_MANAGEMENT: name.str.contains(_MEMORY_RANGE_RE),
        COMPILATION: name.str.contains(_COMPILE_RANGE_RE),
        COMMUNICATION: pl.col("is_comm") | name.str.contains(_COMM_RE),
        DATA_LOADING: data,
        IO: io,
    }
    return _first(rules, pl.lit(CAUSE_INDEX[CPU_COMPUTE]))


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
    # the regex runs on the distinct names only; the rows are then matched by their codes
    uniq = api_names.drop_nulls().unique()
    copies = uniq.filter(uniq.cast(pl.String).str.contains(_MEMCPY_API_RE))
    is_copy = api_names.is_in(copies.implode()).fill_null(False).to_numpy()
    slow = call_ns > SLOW_LAUNCH_CALL_MIN_NS
    return np.where(  # int8: one byte per GPU op (causes are < 128)
        is_copy,
        CAUSE_INDEX[MEMCPY],
        np.where(slow, CAUSE_INDEX[COMPILATION], CAUSE_INDEX[LAUNCH_OVERHEAD]),
    ).astype(np.int8)


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
