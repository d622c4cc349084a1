"""Per-row GPU and link columns of one file: device/stream/pid/tid of GPU rows, correlation,
bytes, memcpy kinds, kernel grid/block, ``is_comm``.

These loops touch only the rows of the kinds concerned (GPU rows are ~15 % of a typical trace);
value-dependent rules (names, pids) are evaluated once per distinct value.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import polars as pl

from traceforensics.ingest.kineto import categories as cats
from traceforensics.ingest.kineto import gpu

DIM_COLUMNS = tuple(f"{p}_{a}" for p in ("grid", "block") for a in "xyz")


@dataclass
class Payload:
    """Columns filled for GPU rows (``is_comm`` also for host ops); None/False elsewhere."""

    nbytes: list[int | None]
    copy_kind: list[str | None]
    src_mem: list[str | None]
    dst_mem: list[str | None]
    is_comm: list[bool]
    dims: dict[str, list[int | None]] = field(default_factory=dict)


def _dim3(value: Any) -> list[int] | None:
    """A kernel ``grid``/``block`` ``[x, y, z]`` of ints, else None."""
    if type(value) is list and len(value) == 3 and all(type(v) is int for v in value):
        return value
    return None


def dim_list(prefix: str) -> pl.Expr:
    """``[x, y, z]`` list column from the three int columns ``<prefix>_x|y|z``; null where x is
    null. Built column-wise: a Series of 9k small Python lists costs more than the whole parse."""
    cols = [pl.col(f"{prefix}_{a}") for a in "xyz"]
    return pl.when(cols[0].is_not_null()).then(pl.concat_list(cols)).otherwise(None).alias(prefix)


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
    by_pid = {p: gpu.device_from_pid(p, labels) for p in {pid_raw[i] for i in gpu_idx}}
    for i in gpu_idx:
        a = args[i]
        dev = a.get("device")
        if type(dev) is not int:
            dev = gpu.parse_int(dev) if dev is not None else None
        device[i] = by_pid[pid_raw[i]] if dev is None else dev
        st = a.get("stream")
        stream[i] = st if type(st) is int else gpu.parse_stream(tid_raw[i])
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


def gpu_payload(
    kind: list[str],
    name: list[str],
    args: list[dict[str, Any]],
    gpu_idx: list[int],
    correlation: list[int | None],
) -> Payload:
    """bytes, copy_kind, src_mem, dst_mem, is_comm and grid/block component columns.

    ``bytes`` is ``args.bytes`` (never ``memory bandwidth (GB/s)``), else the launching API's
    size. ``is_comm``: NCCL/RCCL kernel names or kernels carrying ``Collective name``; host
    ops named ``nccl:*``, ``c10d::*``, ``gloo*``, ``record_param_comms``.
    """
    n = len(kind)
    nbytes: list[int | None] = [None] * n
    copy_kind: list[str | None] = [None] * n
    src_mem: list[str | None] = [None] * n
    dst_mem: list[str | None] = [None] * n
    is_comm = [False] * n
    dims: dict[str, list[int | None]] = {c: [None] * n for c in DIM_COLUMNS}
    api_bytes: dict[int, int] | None = None
    copy_cache: dict[tuple[str, Any], tuple[str, str | None, str | None]] = {}
    for i in gpu_idx:
        k = kind[i]
        a = args[i]
        if k == "kernel":
            for prefix in ("grid", "block"):
                xyz = _dim3(a.get(prefix))
                if xyz is not None:
                    dims[f"{prefix}_x"][i], dims[f"{prefix}_y"][i], dims[f"{prefix}_z"][i] = xyz
            is_comm[i] = gpu.is_comm_kernel(name[i]) or "Collective name" in a
        elif k in ("memcpy", "memset"):
            size = gpu.parse_int(a.get("bytes"))
            corr = correlation[i]
            if size is None and corr is not None:
                if api_bytes is None:
                    api_bytes = runtime_bytes(kind, args, correlation)
                size = api_bytes.get(corr)
            nbytes[i] = size
            if k == "memcpy":
                key = (name[i], a.get("kind"))
                if key not in copy_cache:
                    copy_cache[key] = gpu.memcpy_kinds(name[i], a.get("kind"))
                copy_kind[i], src_mem[i], dst_mem[i] = copy_cache[key]
            else:
                dst_mem[i] = gpu.memset_dst(name[i])
    comm_names = {v for v in set(name) if gpu.is_comm_host(v)}
    if comm_names:
        for i, k in enumerate(kind):
            if k in cats.HOST_COMM_KINDS and name[i] in comm_names:
                is_comm[i] = True
    return Payload(nbytes, copy_kind, src_mem, dst_mem, is_comm, dims)
