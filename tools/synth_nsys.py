"""Nsight Systems SQLite export writer for ``synth.SynthTrace``.

Tables follow the documented export DDL (column names as in schema 3.25; see
../shared/reference/nsys-sqlite-schema.md): META_DATA_EXPORT, StringIds, the ENUM tables the
ingester joins on, CUPTI_ACTIVITY_KIND_KERNEL/MEMCPY/MEMSET/RUNTIME/SYNCHRONIZATION,
NVTX_EVENTS, OSRT_API, TARGET_INFO_GPU, TARGET_INFO_CUDA_DEVICE, TARGET_INFO_SESSION_START_TIME,
ThreadNames, PROCESSES, ANALYSIS_DETAILS. Times are session-relative ns (the builder's own).

Mapping:
- cpu_op -> NVTX push/pop range (eventType 59) with PyTorch ``emit_nvtx`` style text:
  ``aten::mm, seq = 3, sizes = [[64, 128], [128, 256]]`` (seq from ``Sequence number``, sizes
  from ``Input Dims`` when those args are present);
- annotation and python -> NVTX push/pop range with the plain name;
- os_call -> OSRT_API row (eventClass 27, OS runtime);
- cuda_api / launch calls -> CUPTI_ACTIVITY_KIND_RUNTIME with a versioned name
  (``cudaLaunchKernel_v7000``; driver ``cu*`` names unversioned, eventClass 1);
- gpu_sync -> CUPTI_ACTIVITY_KIND_SYNCHRONIZATION (syncType from the name);
- graph launches -> kernel rows with graphId/graphNodeId (``graph_trace = "node"``) or one
  CUPTI_ACTIVITY_KIND_GRAPH_TRACE row per launch (``"graph"``).
globalTid = (1 << 48) | (pid << 24) | tid; globalPid = (1 << 48) | (pid << 24).
"""

from __future__ import annotations

import re
import sqlite3
from typing import TYPE_CHECKING, Any

from synth import is_driver_api

if TYPE_CHECKING:
    from pathlib import Path

    from synth import SynthEvent, SynthTrace

_VM = 1 << 48
NVTX_PUSHPOP = 59
OSRT_EVENT_CLASS = 27
_COPY_KIND_ID = {"unknown": 0, "h2d": 1, "d2h": 2, "d2d": 8, "h2h": 9, "p2p": 10}
_MEM_KIND_ID = {"pageable": 0, "pinned": 1, "device": 2, "array": 3, "managed": 4, "unknown": 7}
_SYNC_TYPE_ID = {"event sync": 1, "stream wait event": 2, "stream sync": 3, "context sync": 4}
# CUDA runtime API version suffixes as nsys records them.
_API_SUFFIX = {"cudaLaunchKernel": "_v7000", "cudaStreamIsCapturing": "_v10000"}

_DDL = """
CREATE TABLE META_DATA_EXPORT (name TEXT NOT NULL, value TEXT);
CREATE TABLE StringIds (id INTEGER NOT NULL PRIMARY KEY, value TEXT NOT NULL);
CREATE TABLE ENUM_CUDA_MEMCPY_OPER (id INTEGER NOT NULL PRIMARY KEY, name TEXT, label TEXT);
CREATE TABLE ENUM_CUDA_MEM_KIND (id INTEGER NOT NULL PRIMARY KEY, name TEXT, label TEXT);
CREATE TABLE ENUM_CUPTI_SYNC_TYPE (id INTEGER NOT NULL PRIMARY KEY, name TEXT, label TEXT);
CREATE TABLE ENUM_NSYS_EVENT_TYPE (id INTEGER NOT NULL PRIMARY KEY, name TEXT, label TEXT);
CREATE TABLE ENUM_NSYS_EVENT_CLASS (id INTEGER NOT NULL PRIMARY KEY, name TEXT, label TEXT);
CREATE TABLE CUPTI_ACTIVITY_KIND_KERNEL (start INTEGER NOT NULL, end INTEGER NOT NULL,
 deviceId INTEGER NOT NULL, contextId INTEGER NOT NULL, greenContextId INTEGER,
 streamId INTEGER NOT NULL, correlationId INTEGER, globalPid INTEGER,
 demangledName INTEGER NOT NULL, shortName INTEGER NOT NULL, mangledName INTEGER,
 launchType INTEGER, cacheConfig INTEGER, registersPerThread INTEGER NOT NULL,
 gridX INTEGER NOT NULL, gridY INTEGER NOT NULL, gridZ INTEGER NOT NULL,
 blockX INTEGER NOT NULL, blockY INTEGER NOT NULL, blockZ INTEGER NOT NULL,
 staticSharedMemory INTEGER NOT NULL, dynamicSharedMemory INTEGER NOT NULL,
 localMemoryPerThread INTEGER NOT NULL, localMemoryTotal INTEGER NOT NULL,
 gridId INTEGER NOT NULL, sharedMemoryExecuted INTEGER, graphNodeId INTEGER,
 sharedMemoryLimitConfig INTEGER, qmdBulkReleaseDone INTEGER, qmdPreexitDone INTEGER,
 qmdLastCtaDone INTEGER, graphId INTEGER, clusterX INTEGER, clusterY INTEGER, clusterZ INTEGER,
 clusterSchedulingPolicy INTEGER, maxPotentialClusterSize INTEGER, maxActiveClusters INTEGER,
 sharedMemoryRequestedPercentage INTEGER, tensorSizeMinusOneElements TEXT NOT NULL);
CREATE TABLE CUPTI_ACTIVITY_KIND_MEMCPY (start INTEGER NOT NULL, end INTEGER NOT NULL,
 deviceId INTEGER NOT NULL, contextId INTEGER NOT NULL, greenContextId INTEGER,
 streamId INTEGER NOT NULL, correlationId INTEGER, globalPid INTEGER, bytes INTEGER NOT NULL,
 copyKind INTEGER NOT NULL, deprecatedSrcId INTEGER, srcKind INTEGER, dstKind INTEGER,
 srcDeviceId INTEGER, srcContextId INTEGER, dstDeviceId INTEGER, dstContextId INTEGER,
 migrationCause INTEGER, graphNodeId INTEGER, virtualAddress INTEGER, copyCount INTEGER);
CREATE TABLE CUPTI_ACTIVITY_KIND_MEMSET (start INTEGER NOT NULL, end INTEGER NOT NULL,
 deviceId INTEGER NOT NULL, contextId INTEGER NOT NULL, greenContextId INTEGER,
 streamId INTEGER NOT NULL, correlationId INTEGER, globalPid INTEGER, value INTEGER NOT NULL,
 bytes INTEGER NOT NULL, graphNodeId INTEGER, memKind INTEGER);
CREATE TABLE CUPTI_ACTIVITY_KIND_RUNTIME (start INTEGER NOT NULL, end INTEGER NOT NULL,
 eventClass INTEGER NOT NULL, globalTid INTEGER, correlationId INTEGER,
 nameId INTEGER NOT NULL, returnValue INTEGER NOT NULL, callchainId INTEGER);
CREATE TABLE CUPTI_ACTIVITY_KIND_SYNCHRONIZATION (start INTEGER NOT NULL, end INTEGER NOT NULL,
 deviceId INTEGER NOT NULL, contextId INTEGER NOT NULL, greenContextId INTEGER,
 streamId INTEGER NOT NULL, correlationId INTEGER, globalPid INTEGER,
 deprecatedSyncType INTEGER, syncType INTEGER NOT NULL, eventId INTEGER NOT NULL,
 eventSyncId INTEGER);
CREATE TABLE NVTX_EVENTS (start INTEGER NOT NULL, end INTEGER, eventType INTEGER NOT NULL,
 rangeId INTEGER, category INTEGER, color INTEGER, text TEXT, globalTid INTEGER,
 endGlobalTid INTEGER, textId INTEGER, domainId INTEGER, uint64Value INTEGER,
 int64Value INTEGER, doubleValue REAL, uint32Value INTEGER, int32Value INTEGER,
 floatValue REAL, jsonTextId INTEGER, jsonText TEXT, binaryData TEXT);
CREATE TABLE OSRT_API (start INTEGER NOT NULL, end INTEGER NOT NULL,
 eventClass INTEGER NOT NULL, globalTid INTEGER, nameId INTEGER NOT NULL,
 returnValue INTEGER NOT NULL, nestingLevel INTEGER, callchainId INTEGER NOT NULL);
CREATE TABLE TARGET_INFO_GPU (vmId INTEGER NOT NULL, id INTEGER NOT NULL, name TEXT,
 busLocation TEXT, isDiscrete INTEGER, l2CacheSize INTEGER, totalMemory INTEGER,
 memoryBandwidth INTEGER, clockRate INTEGER, smCount INTEGER, pwGpuId INTEGER, uuid TEXT,
 luid INTEGER, chipName TEXT, cuDevice INTEGER, ctxswDevPath TEXT, ctrlDevPath TEXT,
 revision INTEGER, nodeMask INTEGER, constantMemory INTEGER, maxIPC INTEGER,
 maxRegistersPerBlock INTEGER, maxShmemPerBlock INTEGER, maxShmemPerBlockOptin INTEGER,
 maxShmemPerSm INTEGER, maxRegistersPerSm INTEGER, threadsPerWarp INTEGER,
 asyncEngines INTEGER, maxWarpsPerSm INTEGER, maxBlocksPerSm INTEGER,
 maxThreadsPerBlock INTEGER, maxBlockDimX INTEGER, maxBlockDimY INTEGER, maxBlockDimZ INTEGER,
 maxGridDimX INTEGER, maxGridDimY INTEGER, maxGridDimZ INTEGER, computeMajor INTEGER,
 computeMinor INTEGER, smMajor INTEGER, smMinor INTEGER);
CREATE TABLE TARGET_INFO_CUDA_DEVICE (gpuId INTEGER, cudaId INTEGER NOT NULL,
 pid INTEGER NOT NULL, uuid TEXT, numMultiprocessors INTEGER);
CREATE TABLE TARGET_INFO_SESSION_START_TIME (utcEpochNs INTEGER, utcTime TEXT,
 localTime TEXT, systemClockNs INTEGER);
CREATE TABLE ThreadNames (nameId INTEGER NOT NULL, priority INTEGER, globalTid INTEGER);
CREATE TABLE PROCESSES (globalPid INTEGER, pid INTEGER, name TEXT);
CREATE TABLE CUPTI_ACTIVITY_KIND_GRAPH_TRACE (start INTEGER NOT NULL, end INTEGER NOT NULL,
 deviceId INTEGER NOT NULL, contextId INTEGER NOT NULL, greenContextId INTEGER,
 streamId INTEGER NOT NULL, correlationId INTEGER, globalPid INTEGER, graphId INTEGER NOT NULL,
 graphExecId INTEGER NOT NULL);
CREATE TABLE ANALYSIS_DETAILS (globalVid INTEGER NOT NULL, duration INTEGER NOT NULL,
 startTime INTEGER NOT NULL, stopTime INTEGER NOT NULL);
"""

_ENUMS: dict[str, list[tuple[int, str, str]]] = {
    "ENUM_CUDA_MEMCPY_OPER": [
        (0, "CUDA_MEMCPY_KIND_UNKNOWN", "Unknown"),
        (1, "CUDA_MEMCPY_KIND_HTOD", "Host-to-Device"),
        (2, "CUDA_MEMCPY_KIND_DTOH", "Device-to-Host"),
        (8, "CUDA_MEMCPY_KIND_DTOD", "Device-to-Device"),
        (9, "CUDA_MEMCPY_KIND_HTOH", "Host-to-Host"),
        (10, "CUDA_MEMCPY_KIND_PTOP", "Peer-to-Peer"),
    ],
    "ENUM_CUDA_MEM_KIND": [
        (0, "CUDA_MEMOPR_MEMORY_KIND_PAGEABLE", "Pageable"),
        (1, "CUDA_MEMOPR_MEMORY_KIND_PINNED", "Pinned"),
        (2, "CUDA_MEMOPR_MEMORY_KIND_DEVICE", "Device"),
        (3, "CUDA_MEMOPR_MEMORY_KIND_ARRAY", "Array"),
        (4, "CUDA_MEMOPR_MEMORY_KIND_MANAGED", "Managed"),
        (7, "CUDA_MEMOPR_MEMORY_KIND_UNKNOWN", "Unknown"),
    ],
    "ENUM_CUPTI_SYNC_TYPE": [
        (0, "CUPTI_ACTIVITY_SYNCHRONIZATION_TYPE_UNKNOWN", "Unknown"),
        (1, "CUPTI_ACTIVITY_SYNCHRONIZATION_TYPE_EVENT_SYNCHRONIZE", "Event sync"),
        (2, "CUPTI_ACTIVITY_SYNCHRONIZATION_TYPE_STREAM_WAIT_EVENT", "Stream wait sync"),
        (3, "CUPTI_ACTIVITY_SYNCHRONIZATION_TYPE_STREAM_SYNCHRONIZE", "Stream sync"),
        (4, "CUPTI_ACTIVITY_SYNCHRONIZATION_TYPE_CONTEXT_SYNCHRONIZE", "Context sync"),
    ],
    "ENUM_NSYS_EVENT_TYPE": [
        (34, "NvtxMark", "NvtxMark"),
        (59, "NvtxPushPopRange", "NvtxPushPopRange"),
        (60, "NvtxStartEndRange", "NvtxStartEndRange"),
        (75, "NvtxDomainCreate", "NvtxDomainCreate"),
    ],
    "ENUM_NSYS_EVENT_CLASS": [
        (0, "TRACE_PROCESS_EVENT_CUDA_RUNTIME", "CUDA runtime"),
        (1, "TRACE_PROCESS_EVENT_CUDA_DRIVER", "CUDA driver"),
        (27, "TRACE_PROCESS_EVENT_OS_RUNTIME", "OSRT runtime"),
    ],
}


def global_tid(pid: int, tid: int) -> int:
    return _VM | (pid << 24) | tid


def global_pid(pid: int) -> int:
    return _VM | (pid << 24)


def versioned_api(name: str) -> str:
    """nsys records runtime names with a version suffix; driver names are kept as they are."""
    if is_driver_api(name) or not name.startswith("cuda"):
        return name
    return name + _API_SUFFIX.get(name, "_v3020")


def short_kernel_name(name: str) -> str:
    """Base name of a demangled kernel: no return type, namespace, template or parameters."""
    base = name.removeprefix("void ")
    depth, cut = 0, len(base)
    for i, ch in enumerate(base):
        if ch in "<(" and depth == 0:
            cut = i
            break
    base = base[:cut]
    return base.rsplit("::", 1)[-1] or name


def nvtx_text(ev: SynthEvent) -> str:
    """PyTorch autograd-nvtx style range text for a cpu_op (name for other ranges)."""
    if ev.kind != "cpu_op":
        return ev.name
    text = ev.name
    seq = ev.args.get("Sequence number")
    if seq is not None:
        text += f", seq = {seq}"
    dims = ev.args.get("Input Dims")
    if dims is not None:
        shapes = ", ".join("[" + ", ".join(str(int(x)) for x in s) + "]" for s in dims)
        text += f", sizes = [{shapes}]"
    return text


class _Strings:
    def __init__(self) -> None:
        self.ids: dict[str, int] = {}

    def __call__(self, value: str) -> int:
        if value not in self.ids:
            self.ids[value] = len(self.ids) + 1
        return self.ids[value]


def write_sqlite(tr: SynthTrace, path: Path) -> None:
    """Write ``tr`` to ``path`` (replacing it)."""
    if path.exists():
        path.unlink()
    con = sqlite3.connect(path)
    try:
        # scratch data: no fsync per statement (the file's content is the same)
        con.execute("PRAGMA synchronous = OFF")
        con.execute("PRAGMA journal_mode = MEMORY")
        con.executescript(_DDL)
        _fill(con, tr)
        con.commit()
    finally:
        con.close()


def _fill(con: sqlite3.Connection, tr: SynthTrace) -> None:
    sid = _Strings()
    gpid = global_pid(tr.pid)
    rows: dict[str, list[tuple[Any, ...]]] = {}

    def add(table: str, row: tuple[Any, ...]) -> None:
        rows.setdefault(table, []).append(row)

    grid_id = 0
    for ev in sorted(tr.recorded(), key=lambda e: (e.start_ns, -e.dur_ns)):
        end = ev.end_ns
        if ev.kind in ("cpu_op", "annotation", "python"):
            gt = global_tid(tr.host_pid(ev), ev.tid or 0)
            add("NVTX_EVENTS", (ev.start_ns, end, NVTX_PUSHPOP, nvtx_text(ev), gt, 0))
        elif ev.kind == "os_call":
            gt = global_tid(tr.host_pid(ev), ev.tid or 0)
            add("OSRT_API", (ev.start_ns, end, OSRT_EVENT_CLASS, gt, sid(ev.name), 0, 0, 0))
        elif ev.kind == "cuda_api":
            gt = global_tid(tr.host_pid(ev), ev.tid or 0)
            cls = 1 if is_driver_api(ev.name) else 0
            name_id = sid(versioned_api(ev.name))
            add("CUPTI_ACTIVITY_KIND_RUNTIME", (ev.start_ns, end, cls, gt, ev.correlation, name_id))
        else:
            grid_id += ev.kind == "kernel"
            found = _gpu_row(ev, sid, gpid, grid_id)
            if found is not None:
                add(*found)
    _insert(con, rows)
    _insert_static(con, tr, sid)
    con.executemany("INSERT INTO StringIds VALUES (?, ?)", [(i, v) for v, i in sid.ids.items()])


def _gpu_row(
    ev: SynthEvent, sid: _Strings, gpid: int, grid_id: int
) -> tuple[str, tuple[Any, ...]] | None:
    """The table and row of one GPU event (None for kinds nsys has no GPU table for)."""
    end = ev.end_ns
    if ev.kind == "kernel":
        g, b = ev.grid or (1, 1, 1), ev.block or (128, 1, 1)
        return (
            "CUPTI_ACTIVITY_KIND_KERNEL",
            (
                ev.start_ns,
                end,
                ev.device,
                1,
                ev.stream,
                ev.correlation,
                gpid,
                sid(ev.name),
                sid(short_kernel_name(ev.name)),
                *g,
                *b,
                grid_id,
                ev.args.get("graph id"),
                ev.args.get("graph node id"),
            ),
        )
    if ev.kind == "cuda_graph":
        gid = ev.args["graph id"]
        return (
            "CUPTI_ACTIVITY_KIND_GRAPH_TRACE",
            (ev.start_ns, end, ev.device, 1, ev.stream, ev.correlation, gpid, gid, gid),
        )
    if ev.kind == "memcpy":
        return (
            "CUPTI_ACTIVITY_KIND_MEMCPY",
            (
                ev.start_ns,
                end,
                ev.device,
                1,
                ev.stream,
                ev.correlation,
                gpid,
                ev.bytes or 0,
                _COPY_KIND_ID.get(ev.copy_kind or "unknown", 0),
                _MEM_KIND_ID.get(ev.src_mem or "unknown", 7),
                _MEM_KIND_ID.get(ev.dst_mem or "unknown", 7),
            ),
        )
    if ev.kind == "memset":
        return (
            "CUPTI_ACTIVITY_KIND_MEMSET",
            (
                ev.start_ns,
                end,
                ev.device,
                1,
                ev.stream,
                ev.correlation,
                gpid,
                ev.bytes or 0,
                _MEM_KIND_ID.get(ev.dst_mem or "device", 2),
            ),
        )
    if ev.kind == "gpu_sync":
        sync = _SYNC_TYPE_ID.get(re.sub(r"\s+", " ", ev.name.lower()).strip(), 0)
        return (
            "CUPTI_ACTIVITY_KIND_SYNCHRONIZATION",
            (ev.start_ns, end, ev.device, 1, ev.stream, ev.correlation, gpid, sync),
        )
    return None


_INSERTS = {
    "NVTX_EVENTS": "INSERT INTO NVTX_EVENTS (start, end, eventType, text, globalTid, domainId)"
    " VALUES (?, ?, ?, ?, ?, ?)",
    "OSRT_API": "INSERT INTO OSRT_API VALUES (?, ?, ?, ?, ?, ?, ?, ?)",
    "CUPTI_ACTIVITY_KIND_RUNTIME": "INSERT INTO CUPTI_ACTIVITY_KIND_RUNTIME (start, end,"
    " eventClass, globalTid, correlationId, nameId, returnValue, callchainId)"
    " VALUES (?, ?, ?, ?, ?, ?, 0, NULL)",
    "CUPTI_ACTIVITY_KIND_KERNEL": "INSERT INTO CUPTI_ACTIVITY_KIND_KERNEL (start, end, deviceId,"
    " contextId, streamId, correlationId, globalPid, demangledName, shortName, gridX, gridY,"
    " gridZ, blockX, blockY, blockZ, gridId, graphId, graphNodeId, launchType, cacheConfig,"
    " registersPerThread, staticSharedMemory, dynamicSharedMemory, localMemoryPerThread,"
    " localMemoryTotal, sharedMemoryExecuted, sharedMemoryLimitConfig,"
    " tensorSizeMinusOneElements)"
    " VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, 1, 0, 32, 0, 0, 0, 0, 0, 0,"
    " '')",
    "CUPTI_ACTIVITY_KIND_GRAPH_TRACE": "INSERT INTO CUPTI_ACTIVITY_KIND_GRAPH_TRACE (start, end,"
    " deviceId, contextId, streamId, correlationId, globalPid, graphId, graphExecId)"
    " VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)",
    "CUPTI_ACTIVITY_KIND_MEMCPY": "INSERT INTO CUPTI_ACTIVITY_KIND_MEMCPY (start, end, deviceId,"
    " contextId, streamId, correlationId, globalPid, bytes, copyKind, srcKind, dstKind,"
    " copyCount) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, 1)",
    "CUPTI_ACTIVITY_KIND_MEMSET": "INSERT INTO CUPTI_ACTIVITY_KIND_MEMSET (start, end, deviceId,"
    " contextId, streamId, correlationId, globalPid, bytes, memKind, value)"
    " VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, 0)",
    "CUPTI_ACTIVITY_KIND_SYNCHRONIZATION": "INSERT INTO CUPTI_ACTIVITY_KIND_SYNCHRONIZATION"
    " (start, end, deviceId, contextId, streamId, correlationId, globalPid, syncType, eventId)"
    " VALUES (?, ?, ?, ?, ?, ?, ?, ?, 4294967295)",
}


def _insert(con: sqlite3.Connection, rows: dict[str, list[tuple[Any, ...]]]) -> None:
    for table, data in rows.items():
        con.executemany(_INSERTS[table], data)


def _insert_static(con: sqlite3.Connection, tr: SynthTrace, sid: _Strings) -> None:
    major, minor = tr.compute_capability
    meta = [
        ("EXPORT_PRODUCT_NAME", "NVIDIA Nsight Systems"),
        ("EXPORT_PRODUCT_VERSION", "2026.2.1.210"),
        ("EXPORT_SCHEMA_VERSION", "3.25.0"),
        ("EXPORT_SCHEMA_VERSION_MAJOR", "3"),
        ("EXPORT_SCHEMA_VERSION_MINOR", "25"),
        ("EXPORT_SCHEMA_VERSION_MICRO", "0"),
        ("EXPORT_PARAM_INPUT_FILE", "synthetic.nsys-rep"),
        ("EXPORT_GENERATOR", "traceforensics tools/synth.py"),
    ]
    con.executemany("INSERT INTO META_DATA_EXPORT VALUES (?, ?)", meta)
    for table, values in _ENUMS.items():
        con.executemany(f"INSERT INTO {table} VALUES (?, ?, ?)", values)
    for d in tr.devices():
        uuid = f"00000000-0000-0000-0000-{d:012d}"
        con.execute(
            "INSERT INTO TARGET_INFO_GPU (vmId, id, name, isDiscrete, totalMemory, smCount,"
            " uuid, cuDevice, threadsPerWarp, maxThreadsPerBlock, computeMajor, computeMinor,"
            " smMajor, smMinor) VALUES (?, ?, ?, 1, ?, ?, ?, ?, 32, 1024, ?, ?, ?, ?)",
            (
                _VM,
                d,
                tr.device_name,
                tr.total_mem_bytes,
                tr.sm_count,
                uuid,
                d,
                major,
                minor,
                major,
                minor,
            ),
        )
        con.execute(
            "INSERT INTO TARGET_INFO_CUDA_DEVICE VALUES (?, ?, ?, ?, ?)",
            (d, d, tr.pid, uuid, tr.sm_count),
        )
    con.execute(
        "INSERT INTO TARGET_INFO_SESSION_START_TIME VALUES (?, ?, ?, ?)",
        (tr.base_ns, "2023-11-14T22:13:20", "2023-11-14T22:13:20", 0),
    )
    con.executemany(
        "INSERT INTO PROCESSES VALUES (?, ?, ?)",
        [(global_pid(p), p, "python") for p in tr.host_pids()],
    )
    threads = sorted(
        {(tr.host_pid(e), e.tid) for e in tr.events if e.tid is not None and e.device is None}
    )
    first = threads[0][1] if threads else None
    con.executemany(
        "INSERT INTO ThreadNames VALUES (?, 0, ?)",
        [(sid("python" if t == first else f"thread {t}"), global_tid(p, t)) for p, t in threads],
    )
    end = max((e.end_ns for e in tr.events), default=0)
    con.execute("INSERT INTO ANALYSIS_DETAILS VALUES (?, ?, 0, ?)", (_VM, end, end))
