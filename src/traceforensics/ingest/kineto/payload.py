"""What rows carry beyond the common columns: GPU placement (device/stream), bytes, memcpy
kinds, kernel grid/block, ``is_comm``.

These loops touch only the rows of the kinds concerned (GPU rows are ~15 % of a typical trace);
value-dependent rules (names, pids) are evaluated once per distinct value. Nothing here imports
polars (``rows``: the early-scan child runs these rules too).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from itertools import chain, compress
from typing import Any

import numpy as np
import numpy.typing as npt

from traceforensics.ingest.kineto import categories as cats
from traceforensics.ingest.kineto import gpu
from traceforensics.model.units import MAX_INDEX


@dataclass
class Payload:
    """Columns filled for GPU rows (``is_comm`` also for host ops), as sparse parts: the copy
    columns are null and ``is_comm`` False on every row not listed (most rows: a list per
    column of every row cost 8 bytes a row each, and the early-scan child sends these)."""

    #: memcpy/memset row positions, and per such row (aligned): its bytes, copy kind, source
    #: and destination memory (None where unknown)
    mem_rows: list[int] = field(default_factory=list)
    nbytes: list[int | None] = field(default_factory=list)
    copy_kind: list[str | None] = field(default_factory=list)
    src_mem: list[str | None] = field(default_factory=list)
    dst_mem: list[str | None] = field(default_factory=list)
    #: positions of the rows whose ``is_comm`` is True, ascending
    comm_rows: list[int] = field(default_factory=list)
    #: ``grid``/``block`` -> (int64 row positions, int32 [k, 3] block of their [x, y, z])
    dims: dict[str, Dims] = field(default_factory=dict)


#: A kernel dim column's values: (row positions, their [x, y, z] as one int32 [k, 3] block).
Dims = tuple[npt.NDArray[np.int64], npt.NDArray[np.int32]]


def _dim3(value: Any) -> list[int] | None:
    """A kernel ``grid``/``block`` ``[x, y, z]`` of int32s, else None."""
    if (
        type(value) is list
        and len(value) == 3
        and all(type(v) is int and _INT32_MIN <= v <= _INT32_MAX for v in value)
    ):
        return value
    return None


_INT32_MIN, _INT32_MAX = -(2**31), 2**31 - 1


def _dims(positions: list[int], values: list[list[int]]) -> Dims:
    """``(positions, values)`` as arrays (``values``: checked [x, y, z] lists of int32s).

    One block, not thousands of small lists: the table's column is built from it
    (``events.dim_series``), and the early-scan child sends it (a list of lists costs ~100x
    more to convert, and ~1 µs a list to unpickle)."""
    # flattened ints through fromiter: ~3x faster than converting thousands of lists
    flat = np.fromiter(chain.from_iterable(values), dtype=np.int32, count=3 * len(values))
    return np.asarray(positions, dtype=np.int64), flat.reshape(-1, 3)


def place_gpu_rows(
    gpu_idx: list[int],
    args: list[dict[str, Any]],
    *,
    pid_raw: list[Any],
    tid_raw: list[Any],
    labels: dict[Any, int],
    host_pid: int | None,
    pid: list[int | None],
    tid: list[int | None],
) -> tuple[list[int | None], list[int | None]]:
    """``(device, stream)`` columns; GPU rows get ``pid`` = the recording process and no tid.

    Device: ``args.device``, else the pid's ``GPU n`` label, else the numeric pid. Stream:
    ``args.stream`` (int), else the tid (``7``, ``"stream 7"``, ``"stream 7 (sync)"``).
    """
    n = len(args)
    device: list[int | None] = [None] * n
    stream: list[int | None] = [None] * n
    # the pid's device, once per distinct pid, only for rows without args.device (most have it)
    by_pid: dict[Any, int | None] = {}
    for i in gpu_idx:
        a = args[i]
        dev = a.get("device")
        if type(dev) is not int or not 0 <= dev < MAX_INDEX:  # the common case: no call
            dev = gpu.parse_index(dev)
        if dev is None:
            key = gpu.key_of(pid_raw[i])
            if key not in by_pid:
                by_pid[key] = gpu.device_from_pid(key, labels)
            dev = by_pid[key]
        device[i] = dev
        st = a.get("stream")
        # none, or beyond int64: the tid's (the range test inline: ~9k rows of a 1x trace)
        if type(st) is not int or not gpu.INT64_MIN <= st <= gpu.INT64_MAX:
            st = gpu.parse_stream(tid_raw[i])
        stream[i] = st
        pid[i] = host_pid
        tid[i] = None
    return device, stream


def runtime_bytes(
    kind: list[str], args: list[dict[str, Any]], correlation: list[int | None]
) -> dict[int, int]:
    """Copy sizes from the launching API (ROCm ``hipMemcpy*`` args ``size``/``bytes``) by
    correlation, for GPU memcpy rows that carry no ``bytes`` themselves."""
    out: dict[int, int] = {}
    for i, k in enumerate(kind):
        corr = correlation[i]
        if k == "cuda_api" and corr is not None:
            a = args[i]
            if "size" in a or "bytes" in a:
                size = gpu.parse_int(a.get("bytes", a.get("size")))
                if size is not None:
                    out[corr] = size
    return out


def _kernel_dims(kernel_idx: list[int], args: list[dict[str, Any]]) -> dict[str, Dims]:
    """``grid``/``block`` -> (kernel row positions, their ``[x, y, z]``), in row order; a
    kernel whose value is not three ints is left out (null in the column)."""
    dims: dict[str, Dims] = {}
    kernel_args = [args[i] for i in kernel_idx]
    for prefix in ("grid", "block"):
        values: list[Any] = [a.get(prefix) for a in kernel_args]
        positions = kernel_idx
        if None in values:
            has = [v is not None for v in values]
            positions, values = list(compress(kernel_idx, has)), list(compress(values, has))
        clean = (
            set(map(type, values)) <= {list}
            and set(map(len, values)) <= {3}
            and set(map(type, chain.from_iterable(values))) <= {int}
        )
        if clean and values:  # the column is Int32: a larger value (damaged) is no value
            flat = list(chain.from_iterable(values))
            clean = min(flat) >= _INT32_MIN and max(flat) <= _INT32_MAX
        if not clean:  # a damaged value somewhere: the per-value rule keeps the good ones
            found = [(i, v) for i, v in zip(positions, values, strict=True) if _dim3(v) is not None]
            positions, values = [i for i, _ in found], [v for _, v in found]
        dims[prefix] = _dims(positions, values)
    return dims


def _fill_memory_rows(
    pay: Payload,
    mem_idx: list[int],
    kind: list[str],
    name: list[str],
    args: list[dict[str, Any]],
    correlation: list[int | None],
) -> None:
    """Add the memcpy/memset rows ``mem_idx`` to ``pay``: ``bytes`` of each, ``copy_kind``/
    ``src_mem``/``dst_mem`` of memcpy rows, ``dst_mem`` of memset rows (else None).

    ``bytes`` is ``args.bytes`` (never ``memory bandwidth (GB/s)``), else the size the
    launching runtime call carries (``runtime_bytes``, built only when first needed: most
    traces have ``bytes`` on every copy). Copy kinds are parsed once per (name, args.kind).
    """
    api_bytes: dict[int, int] | None = None
    copy_cache: dict[tuple[str, Any], tuple[str, str | None, str | None]] = {}
    for i in mem_idx:
        a = args[i]
        size = gpu.parse_int(a.get("bytes"))
        corr = correlation[i]
        if size is None and corr is not None:
            if api_bytes is None:
                api_bytes = runtime_bytes(kind, args, correlation)
            size = api_bytes.get(corr)
        pay.mem_rows.append(i)
        pay.nbytes.append(size)
        copy_kind: str | None = None
        src: str | None = None
        if kind[i] == "memcpy":
            key = (name[i], a.get("kind"))
            if key not in copy_cache:
                copy_cache[key] = gpu.memcpy_kinds(name[i], a.get("kind"))
            copy_kind, src, dst = copy_cache[key]
        else:
            dst = gpu.memset_dst(name[i])
        pay.copy_kind.append(copy_kind)
        pay.src_mem.append(src)
        pay.dst_mem.append(dst)


def _comm_rows(
    kernel_idx: list[int],
    kind: list[str],
    name: list[str],
    args: list[dict[str, Any]],
) -> list[int]:
    """Positions of the rows whose ``is_comm`` is True, ascending: kernels whose name is
    communication (``model.comm``) or that carry ``Collective name``; host ops
    (``HOST_COMM_KINDS``) whose name is a collective (``nccl:*``, ``c10d::*``, ``gloo*``,
    ``record_param_comms``). Names are tested once each."""
    # the kernel rule is a regex: run it on the few distinct names, not on every row
    comm_kernels = {v for v in {name[i] for i in kernel_idx} if gpu.is_comm_kernel(v)}
    rows = [i for i in kernel_idx if name[i] in comm_kernels or "Collective name" in args[i]]
    comm_names = {v for v in set(name) if gpu.is_comm_host(v)}
    if comm_names:
        rows += [
            i for i, k in enumerate(kind) if k in cats.HOST_COMM_KINDS and name[i] in comm_names
        ]
    return sorted(set(rows))


def gpu_payload(
    kind: list[str],
    name: list[str],
    args: list[dict[str, Any]],
    gpu_idx: list[int],
    correlation: list[int | None],
) -> Payload:
    """bytes, copy_kind, src_mem, dst_mem, is_comm and grid/block component columns.

    ``bytes`` is ``args.bytes`` (never ``memory bandwidth (GB/s)``), else the launching API's
    size. ``is_comm``: communication kernel names (``model.comm``: NCCL, RCCL, custom
    all-reduce...) or kernels carrying ``Collective name``; host ops named ``nccl:*``,
    ``c10d::*``, ``gloo*``, ``record_param_comms``.
    """
    # each rule runs over the GPU rows of its own kinds only; every cell is written by one
    # rule, so the order of the passes does not change the result
    kernel_idx = [i for i in gpu_idx if kind[i] == "kernel"]
    mem_idx = [i for i in gpu_idx if kind[i] in ("memcpy", "memset")]
    pay = Payload(dims=_kernel_dims(kernel_idx, args))
    _fill_memory_rows(pay, mem_idx, kind, name, args, correlation)
    pay.comm_rows = _comm_rows(kernel_idx, kind, name, args)
    return pay
