"""Kineto ``cat`` -> unified ``kind``, for every category spelling seen since PyTorch 1.8.

Rows are classified by ``cat`` (and ``ph`` for instants), never by ``pid``: the Python tracer
writes ``python_function`` events with ``pid 0``/``tid 0``, which collide with GPU 0.

Skipped from the event table (their content is still used elsewhere): ``ph`` ``M`` (metadata ->
device labels), ``s``/``t``/``f`` (flows -> correlation fallback), ``C`` (counters) and the
``Trace`` span (``cat: "Trace"``, the profiler's own window).
"""

from __future__ import annotations

from collections.abc import Container
from typing import Final

from traceforensics.model.memory_args import MEMORY_ARG_KEYS

#: ``ph`` values that become rows. ``X`` = complete event; ``i``/``I`` = instant (``marker``).
ROW_PHASES: Final[frozenset[str]] = frozenset({"X", "i", "I"})
SKIPPED_CATEGORIES: Final[frozenset[str]] = frozenset({"Trace"})

KIND_BY_CAT: Final[dict[str, str]] = {
    # PyTorch >= 1.10 (kineto ActivityType names)
    "kernel": "kernel",
    "gpu_memcpy": "memcpy",
    "gpu_memset": "memset",
    "cuda_sync": "gpu_sync",
    "xpu_sync": "gpu_sync",
    "gpu_user_annotation": "gpu_annotation",
    "gpu_user_Annotation": "gpu_annotation",  # typo fixed in kineto 3db5c597 (2022)
    "cuda_runtime": "cuda_api",
    "cuda_driver": "cuda_api",
    "xpu_runtime": "cuda_api",
    "xpu_driver": "cuda_api",
    "mtia_runtime": "cuda_api",
    "privateuse1_runtime": "cuda_api",
    "privateuse1_driver": "cuda_api",
    "cpu_op": "cpu_op",
    "user_annotation": "annotation",
    "python_function": "python",
    "overhead": "overhead",
    "cpu_instant_event": "marker",
    # PyTorch 1.8/1.9 capitalised categories
    "Kernel": "kernel",
    "Memcpy": "memcpy",
    "Memset": "memset",
    "Runtime": "cuda_api",
    "Operator": "cpu_op",
}
#: Categories that only PyTorch 1.8/1.9 wrote (format-era hint).
LEGACY_CATEGORIES: Final[frozenset[str]] = frozenset(
    {"Kernel", "Memcpy", "Memset", "Runtime", "Operator"}
)
#: Kind for an ``X`` event whose category is unknown (``collective_comm``, ``cuda_profiler_range``,
#: hand-made traces): a host-side range, reported in ``meta.warnings``.
UNKNOWN_KIND: Final = "annotation"

#: Kinds that live on a GPU (device + stream, no OS thread).
GPU_ROW_KINDS: Final[frozenset[str]] = frozenset(
    {"kernel", "memcpy", "memset", "gpu_sync", "gpu_annotation"}
)
#: GPU work kinds: they make a device busy and must carry a device index.
WORK_KINDS: Final[frozenset[str]] = frozenset({"kernel", "memcpy", "memset"})
#: Kinds that carry a CUPTI/roctracer correlation id.
CORRELATED_KINDS: Final[frozenset[str]] = frozenset(
    {"kernel", "memcpy", "memset", "gpu_sync", "cuda_api"}
)
#: Host kinds whose names may mark a collective (``nccl:all_reduce``, ``record_param_comms``).
HOST_COMM_KINDS: Final[frozenset[str]] = frozenset({"cpu_op", "annotation", "python"})
#: Kinds whose selected args go to the args side table (``marker``: the ``[memory]`` instants
#: of ``profile_memory=True``, read by ``analysis.memory``).
ARGS_KINDS: Final[frozenset[str]] = frozenset({"cpu_op", "annotation", "kernel", "marker"})

#: Flow categories that link a launch to its GPU activity (``id`` = correlation).
LAUNCH_FLOW_CATS: Final[frozenset[str]] = frozenset(
    {"ac2g", "async", "async_cpu_to_gpu", "async_gpu"}
)

#: Arg keys kept in the side table (shapes, dtypes, stacks, autograd links, collectives,
#: kernel occupancy). Everything else is dropped to keep the table small.
KEPT_ARG_KEYS: Final[frozenset[str]] = frozenset(
    {
        "Input Dims",
        "Input type",
        "Concrete Inputs",
        "Input Strides",
        "Call stack",
        "Sequence number",
        "Fwd thread id",
        "Record function id",
        "Collective name",
        "In msg nelems",
        "Out msg nelems",
        "Group size",
        "dtype",
        "In split size",
        "Out split size",
        "Process Group Name",
        "Process Group Ranks",
        "registers per thread",
        "shared memory",
        "blocks per SM",
        "warps per SM",
        "est. achieved occupancy %",
        # ``[memory]`` instants (cpu_instant_event): ``model.memory_args``
        *MEMORY_ARG_KEYS,
    }
)


def is_str_in(value: object, names: Container[str]) -> bool:
    """``value in names`` for a field that may hold any JSON value (a list ``ph`` or ``cat`` is
    unhashable and must cost that event, not the trace)."""
    return isinstance(value, str) and value in names


#: What a decoded event is (``class_of``).
DROP, ROW, META, FLOW = 0, 1, 2, 3
_FLOW_PHASES: Final = frozenset({"s", "t", "f"})


def class_of(ph: object, cat: object) -> int:
    """``ROW`` (``X``/``i``/``I`` but not a skipped category), ``META`` (``M``), ``FLOW`` (an
    ``s``/``t``/``f`` endpoint of a launch-flow category) or ``DROP``, for an event's phase and
    category (any JSON values: a damaged one is never a string, so it is dropped or classed by
    the other)."""
    if type(ph) is not str:
        return DROP
    if ph in ROW_PHASES:
        return DROP if type(cat) is str and cat in SKIPPED_CATEGORIES else ROW
    if ph == "M":
        return META
    if ph in _FLOW_PHASES and type(cat) is str and cat in LAUNCH_FLOW_CATS:
        return FLOW
    return DROP


def kind_of(cat: object) -> str:
    """The kind of an ``X`` row of category ``cat`` (``UNKNOWN_KIND`` for any other value)."""
    return KIND_BY_CAT.get(cat, UNKNOWN_KIND) if isinstance(cat, str) else UNKNOWN_KIND


def unknown_name(cat: object) -> str | None:
    """How an ``X`` row's category is counted as unknown (``str`` of a non-string), or None
    when it is a known one."""
    if is_str_in(cat, KIND_BY_CAT):
        return None
    return cat if isinstance(cat, str) else str(cat)


#: Kinds whose rule args are read (GPU placement and payload, runtime copy sizes).
RULE_KINDS: Final[frozenset[str]] = GPU_ROW_KINDS | {"cuda_api"}
