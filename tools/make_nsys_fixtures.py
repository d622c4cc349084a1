"""Build the small Nsight Systems SQLite fixtures in tests/fixtures/nsys/ from the documented DDL.

Usage: python tools/make_nsys_fixtures.py [OUT_DIR]

Every fixture holds the *same* capture (two processes whose CUDA correlation ids collide, two GPUs
plus a non-CUDA adapter, several streams, NCCL kernels, the NCCL NVTX domain, PyTorch
autograd-nvtx ranges, an open NVTX range, events before capture start, OS runtime calls,
profiler overhead, a lost-events diagnostic). They differ only in the schema variant:

- ``modern.sqlite``: ``META_DATA_EXPORT`` 3.20.3, ``ENUM_*`` tables, ``TARGET_INFO_GPU``;
- ``legacy_export_meta.sqlite``: ``EXPORT_META_DATA``, no ``ENUM_*``, ``TARGET_INFO_CUDA_GPU``,
  2021-style ``INT NOT NULL`` columns without ``greenContextId``/``mangledName``;
- ``legacy_no_meta.sqlite``: no metadata table, no ``ENUM_*``, ``TARGET_INFO_CUDA_GPU``, NVTX
  without ``textId``/``domainId`` (plain text only).

Column names and meanings follow NVIDIA's published export schema; values are invented. Output
is deterministic (fixed rows, no clocks, no randomness).
"""

from __future__ import annotations

import sqlite3
import sys
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
OUT = ROOT / "tests" / "fixtures" / "nsys"

HOST = 1 << 48
PIDS = (1001, 1002)


def gtid(pid: int, tid: int) -> int:
    """globalTid = host id << 48 | pid << 24 | tid (globalPid: tid = 0)."""
    return HOST | (pid << 24) | tid


T = "TEXT"
#: Columns per table, in the documented order. Types: INTEGER unless listed in ``_TYPES``.
_COLUMNS: dict[str, str] = {
    "StringIds": "id value",
    "CUPTI_ACTIVITY_KIND_KERNEL": (
        "start end deviceId contextId greenContextId streamId correlationId globalPid "
        "demangledName shortName mangledName launchType cacheConfig registersPerThread gridX "
        "gridY gridZ blockX blockY blockZ staticSharedMemory dynamicSharedMemory "
        "localMemoryPerThread localMemoryTotal gridId sharedMemoryExecuted graphNodeId "
        "sharedMemoryLimitConfig"
    ),
    "CUPTI_ACTIVITY_KIND_MEMCPY": (
        "start end deviceId contextId greenContextId streamId correlationId globalPid bytes "
        "copyKind deprecatedSrcId srcKind dstKind srcDeviceId srcContextId dstDeviceId "
        "dstContextId migrationCause graphNodeId virtualAddress"
    ),
    "CUPTI_ACTIVITY_KIND_MEMSET": (
        "start end deviceId contextId greenContextId streamId correlationId globalPid value "
        "bytes graphNodeId memKind"
    ),
    "CUPTI_ACTIVITY_KIND_SYNCHRONIZATION": (
        "start end deviceId contextId greenContextId streamId correlationId globalPid syncType "
        "eventId"
    ),
    "CUPTI_ACTIVITY_KIND_GRAPH_TRACE": (
        "start end deviceId contextId greenContextId streamId correlationId globalPid graphId "
        "graphExecId"
    ),
    "CUPTI_ACTIVITY_KIND_RUNTIME": (
        "start end eventClass globalTid correlationId nameId returnValue callchainId"
    ),
    "NVTX_EVENTS": (
        "start end eventType rangeId category color text globalTid endGlobalTid textId "
        "domainId uint64Value int64Value doubleValue uint32Value int32Value floatValue "
        "jsonTextId jsonText"
    ),
    "OSRT_API": "start end eventClass globalTid nameId returnValue nestingLevel callchainId",
    "PROFILER_OVERHEAD": "start end globalTid nameId returnValue",
    "DIAGNOSTIC_EVENT": "timestamp timestampType source severity text globalPid",
    "TARGET_INFO_GPU": (
        "vmId id name busLocation isDiscrete l2CacheSize totalMemory memoryBandwidth "
        "clockRate smCount chipName computeMajor computeMinor"
    ),
    "TARGET_INFO_SESSION_START_TIME": "utcEpochNs utcTime localTime",
    "PROCESSES": "globalPid pid name",
    "ThreadNames": "nameId priority globalTid",
}
_TYPES = {
    "text": T,
    "name": T,
    "busLocation": T,
    "chipName": T,
    "utcTime": T,
    "localTime": T,
    "jsonText": T,
    "doubleValue": "REAL",
    "floatValue": "REAL",
}
MODERN: dict[str, list[tuple[str, str]]] = {
    t: [(c, _TYPES.get(c, "INTEGER")) for c in cols.split()] for t, cols in _COLUMNS.items()
}
MODERN["StringIds"] = [("id", "INTEGER PRIMARY KEY"), ("value", "TEXT NOT NULL")]
_LEGACY_DROP = {"greenContextId", "mangledName", "sharedMemoryLimitConfig", "virtualAddress"}
LEGACY_CUDA_GPU = [
    ("deviceId", "INT NOT NULL"), ("name", "TEXT NOT NULL"), ("totalGlobalMem", "INT NOT NULL"),
    ("numMultiprocessors", "INT NOT NULL"), ("numThreadsPerWarp", "INT NOT NULL"),
    ("maxWarpsPerMultiprocessor", "INT NOT NULL"), ("computeCapabilityMajor", "INT NOT NULL"),
    ("computeCapabilityMinor", "INT NOT NULL"), ("coreClockRate", "INT NOT NULL"),
    ("maxIPC", "INT NOT NULL"),
]  # fmt: skip
ENUMS: dict[str, list[str]] = {
    "ENUM_CUDA_MEMCPY_OPER": [
        f"CUDA_MEMCPY_KIND_{n}"
        for n in ("UNKNOWN", "HTOD", "DTOH", "HTOA", "ATOH", "ATOA", "ATOD", "DTOA", "DTOD",
                  "HTOH", "PTOP", "UVM_HTOD", "UVM_DTOH", "UVM_DTOD")
    ],
    "ENUM_CUDA_MEM_KIND": [
        f"CUDA_MEMOPR_MEMORY_KIND_{n}"
        for n in ("PAGEABLE", "PINNED", "DEVICE", "ARRAY", "MANAGED", "DEVICE_STATIC",
                  "MANAGED_STATIC", "UNKNOWN")
    ],
    "ENUM_CUPTI_SYNC_TYPE": [
        f"CUPTI_ACTIVITY_SYNCHRONIZATION_TYPE_{n}"
        for n in ("UNKNOWN", "EVENT_SYNCHRONIZE", "STREAM_WAIT_EVENT", "STREAM_SYNCHRONIZE",
                  "CONTEXT_SYNCHRONIZE")
    ],
    "ENUM_DIAGNOSTIC_SEVERITY_LEVEL": ["UnknownLevel", "Info", "Warning", "Error", "Verbose"],
}  # fmt: skip
EVENT_TYPES = {34: "NvtxMark", 59: "NvtxPushPopRange", 60: "NvtxStartEndRange",
               75: "NvtxDomainCreate"}  # fmt: skip

STRINGS = [
    "void at::native::vectorized_elementwise_kernel<4, at::native::FillFunctor<float>>(int)",
    "vectorized_elementwise_kernel",
    "ampere_sgemm_128x64_tn",
    "ncclDevKernel_AllReduce_Sum_f32_RING_LL(ncclDevComm*, unsigned long, ncclWork*)",
    "ncclDevKernel_AllReduce_Sum_f32_RING_LL",
    "cudaLaunchKernel_v7000",
    "cudaMemcpyAsync_v3020",
    "cudaStreamSynchronize_v3020",
    "cuLaunchKernel",
    "ncclAllReduce",
    "pthread_cond_wait",
    "read",
    "CUPTI Buffer flush",
    "python",
    "pt_autograd_0",
    "cudaGraphLaunch_v10000",
]
S = {s: i + 1 for i, s in enumerate(STRINGS)}


def _process_rows(p: int, pid: int) -> dict[str, list[dict[str, Any]]]:
    """Rows of one process. Correlation ids 1..6 repeat in both processes on purpose."""
    dev, gp, main, worker = p, gtid(pid, 0), gtid(pid, pid), gtid(pid, pid + 7)
    o = p * 37  # per-process time offset so the processes interleave
    rt = [  # (start, end, correlation, name, thread)
        (-900 + o, -700 + o, 1, "cudaLaunchKernel_v7000", main),
        (1_000 + o, 1_200 + o, 2, "cudaLaunchKernel_v7000", main),
        (1_300 + o, 1_500 + o, 3, "cudaMemcpyAsync_v3020", main),
        (1_600 + o, 1_700 + o, 4, "cuLaunchKernel", worker),
        (1_800 + o, 9_000 + o, 5, "cudaStreamSynchronize_v3020", main),
        (9_100 + o, 9_300 + o, 6, "cudaGraphLaunch_v10000", main),
    ]
    runtime = [
        {"start": s, "end": e, "eventClass": 0, "globalTid": t, "correlationId": c,
         "nameId": S[n], "returnValue": 0, "callchainId": None}
        for s, e, c, n, t in rt
    ]  # fmt: skip
    k = [  # (start, end, stream, correlation, demangled, short, grid, block)
        (-500 + o, 200 + o, 7, 1, STRINGS[0], STRINGS[1], (1024, 1, 1), (128, 1, 1)),
        (1_400 + o, 3_400 + o, 7, 2, STRINGS[2], STRINGS[2], (64, 8, 1), (256, 1, 1)),
        (3_000 + o, 5_000 + o, 13 + 8 * p, 4, STRINGS[3], STRINGS[4], (2, 1, 1), (512, 1, 1)),
    ]
    kernels = [
        {"start": s, "end": e, "deviceId": dev, "contextId": 1, "greenContextId": None,
         "streamId": st, "correlationId": c, "globalPid": gp, "demangledName": S[d],
         "shortName": S[sh], "mangledName": None, "launchType": 1, "cacheConfig": 0,
         "registersPerThread": 32, "gridX": g[0], "gridY": g[1], "gridZ": g[2],
         "blockX": b[0], "blockY": b[1], "blockZ": b[2], "staticSharedMemory": 0,
         "dynamicSharedMemory": 0, "localMemoryPerThread": 0, "localMemoryTotal": 0,
         "gridId": c, "sharedMemoryExecuted": 0, "graphNodeId": None,
         "sharedMemoryLimitConfig": 0}
        for s, e, st, c, d, sh, g, b in k
    ]  # fmt: skip
    mc = [
        (1_450 + o, 1_650 + o, 3, 1, 0, 2, 4096),
        (5_200 + o, 5_600 + o, 3, 2, 2, 1, 8192),
        (5_500 + o, 6_000 + o, 3, 8, 2, 2, 65536),
        (6_100 + o, 6_300 + o, 3, 10, 2, 2, 512),
    ]
    memcpys = [
        {"start": s, "end": e, "deviceId": dev, "contextId": 1, "greenContextId": None,
         "streamId": 7, "correlationId": c, "globalPid": gp, "bytes": b, "copyKind": op,
         "deprecatedSrcId": None, "srcKind": sk, "dstKind": dk, "srcDeviceId": dev,
         "srcContextId": 1, "dstDeviceId": dev, "dstContextId": 1, "migrationCause": None,
         "graphNodeId": None, "virtualAddress": None}
        for s, e, c, op, sk, dk, b in mc
    ]  # fmt: skip
    memsets = [{"start": 6_200 + o, "end": 6_250 + o, "deviceId": dev, "contextId": 1,
                "greenContextId": None, "streamId": 13 + 8 * p, "correlationId": 3,
                "globalPid": gp, "value": 0, "bytes": 1024, "graphNodeId": None,
                "memKind": 2}]  # fmt: skip
    syncs = [{"start": 8_990 + o, "end": 9_000 + o, "deviceId": dev, "contextId": 1,
              "greenContextId": None, "streamId": 7, "correlationId": 5, "globalPid": gp,
              "syncType": 3, "eventId": 0}]  # fmt: skip
    graphs = [{"start": 9_400 + o, "end": 9_900 + o, "deviceId": dev, "contextId": 1,
               "greenContextId": None, "streamId": 7, "correlationId": 6, "globalPid": gp,
               "graphId": 4, "graphExecId": 9}]  # fmt: skip
    nv = [  # (start, end, type, text, textId, domainId, thread)
        (0, None, 75, "NCCL", None, 1, main),
        (-1_000 + o, 9_500 + o, 59, "train step", None, 0, main),
        (
            950 + o,
            1_250 + o,
            59,
            "aten::addmm, seq = 12, op_id = 3, sizes = [[16, 32], [16, 64], [64, 32]]",
            None,
            0,
            main,
        ),
        (1_290 + o, 1_520 + o, 59, "aten::copy_, seq = 13", None, 0, main),
        (1_550 + o, 1_750 + o, 59, None, S["ncclAllReduce"], 1, worker),
        (2_000 + o, None, 60, "never ended", None, 0, main),
        (2_500 + o, None, 34, "checkpoint", None, 0, main),
    ]
    nvtx = [
        {"start": s, "end": e, "eventType": et, "rangeId": None, "category": None,
         "color": None, "text": tx, "globalTid": t, "endGlobalTid": None, "textId": ti,
         "domainId": di}
        for s, e, et, tx, ti, di, t in nv
    ]  # fmt: skip
    osrt = [
        {"start": 1_820 + o, "end": 8_950 + o, "eventClass": 27, "globalTid": main,
         "nameId": S["pthread_cond_wait"], "returnValue": 0, "nestingLevel": 0, "callchainId": 0},
        {"start": 100 + o, "end": 900 + o, "eventClass": 27, "globalTid": worker,
         "nameId": S["read"], "returnValue": 0, "nestingLevel": 0, "callchainId": 0},
    ]  # fmt: skip
    overhead = [{"start": 7_000 + o, "end": 7_400 + o, "globalTid": main,
                 "nameId": S["CUPTI Buffer flush"], "returnValue": 0}]  # fmt: skip
    threads = [{"nameId": S["python"], "priority": 0, "globalTid": main},
               {"nameId": S["pt_autograd_0"], "priority": 0, "globalTid": worker}]  # fmt: skip
    return {
        "CUPTI_ACTIVITY_KIND_RUNTIME": runtime,
        "CUPTI_ACTIVITY_KIND_KERNEL": kernels,
        "CUPTI_ACTIVITY_KIND_MEMCPY": memcpys,
        "CUPTI_ACTIVITY_KIND_MEMSET": memsets,
        "CUPTI_ACTIVITY_KIND_SYNCHRONIZATION": syncs,
        "CUPTI_ACTIVITY_KIND_GRAPH_TRACE": graphs,
        "NVTX_EVENTS": nvtx,
        "OSRT_API": osrt,
        "PROFILER_OVERHEAD": overhead,
        "ThreadNames": threads,
        "PROCESSES": [{"globalPid": gp, "pid": pid, "name": "python"}],
    }


def capture() -> dict[str, list[dict[str, Any]]]:
    rows: dict[str, list[dict[str, Any]]] = {}
    for p, pid in enumerate(PIDS):
        for table, part in _process_rows(p, pid).items():
            rows.setdefault(table, []).extend(part)
    rows["PROCESSES"].append({"globalPid": gtid(77, 0), "pid": 77, "name": "kworker/0:1"})
    rows["StringIds"] = [{"id": i, "value": s} for s, i in S.items()]
    rows["DIAGNOSTIC_EVENT"] = [
        {"timestamp": 10, "timestampType": 0, "source": 1, "severity": 1,
         "text": "Profiling started.", "globalPid": None},
        {"timestamp": 20, "timestampType": 0, "source": 1, "severity": 2,
         "text": "CUPTI: 12 activity records were dropped; increase the buffer size.",
         "globalPid": gtid(PIDS[0], 0)},
        {"timestamp": 30, "timestampType": 0, "source": 1, "severity": 3,
         "text": "AnalysisService: failed to start event source Perf", "globalPid": -1},
    ]  # fmt: skip
    rows["TARGET_INFO_SESSION_START_TIME"] = [
        {"utcEpochNs": 1_700_000_000_123_456_789, "utcTime": "2023-11-14T22:13:20",
         "localTime": "2023-11-14T22:13:20"}
    ]  # fmt: skip
    return rows


def _gpus(legacy: bool) -> tuple[str, list[dict[str, Any]]]:
    gpus = [(0, "NVIDIA H100 80GB HBM3", 132, 9, 0), (1, "NVIDIA H100 80GB HBM3", 132, 9, 0)]
    if legacy:
        return "TARGET_INFO_CUDA_GPU", [
            {"deviceId": i, "name": n, "totalGlobalMem": 85_000_000_000, "numMultiprocessors": sm,
             "numThreadsPerWarp": 32, "maxWarpsPerMultiprocessor": 64,
             "computeCapabilityMajor": ma, "computeCapabilityMinor": mi,
             "coreClockRate": 1_980_000, "maxIPC": 4}
            for i, n, sm, ma, mi in gpus
        ]  # fmt: skip
    rows = [
        {"vmId": HOST, "id": i, "name": n, "isDiscrete": 1, "totalMemory": 85_000_000_000,
         "memoryBandwidth": 3_352_320_000_000, "clockRate": 1_980_000_000, "smCount": sm,
         "computeMajor": ma, "computeMinor": mi}
        for i, n, sm, ma, mi in gpus
    ]  # fmt: skip
    rows.append({"vmId": HOST, "id": 2, "name": "Intel(R) Iris(R) Xe Graphics", "isDiscrete": 0,
                 "totalMemory": 0, "memoryBandwidth": 0, "clockRate": 0, "smCount": 0,
                 "computeMajor": 0, "computeMinor": 0})  # fmt: skip
    return "TARGET_INFO_GPU", rows


def _legacy_type(decl: str) -> str:
    """2021-era DDL spelled integers ``INT``; keys and text/real columns keep their type."""
    return decl if decl.startswith((T, "REAL")) or "PRIMARY" in decl else "INT"


def build(path: Path, variant: str) -> None:
    legacy = variant != "modern"
    path.unlink(missing_ok=True)
    conn = sqlite3.connect(path)
    conn.execute("PRAGMA page_size = 1024")
    rows = capture()
    gpu_table, gpu_rows = _gpus(legacy)
    rows[gpu_table] = gpu_rows
    schema = dict(MODERN)
    schema.pop("TARGET_INFO_GPU")
    schema[gpu_table] = LEGACY_CUDA_GPU if legacy else MODERN["TARGET_INFO_GPU"]
    if legacy:
        schema = {
            t: [(c, _legacy_type(d)) for c, d in cols if c not in _LEGACY_DROP]
            for t, cols in schema.items()
        }  # fmt: skip
        schema.pop("DIAGNOSTIC_EVENT")  # added ~2024
        schema[gpu_table] = LEGACY_CUDA_GPU
    if variant == "legacy_no_meta":
        schema["NVTX_EVENTS"] = [
            c for c in schema["NVTX_EVENTS"] if c[0] not in ("textId", "domainId")
        ]
        rows["NVTX_EVENTS"] = [
            {**r, "text": r["text"] or STRINGS[r["textId"] - 1]}
            for r in rows["NVTX_EVENTS"] if r["eventType"] != 75
        ]  # fmt: skip
    for table, cols in schema.items():
        conn.execute(f"CREATE TABLE {table} ({', '.join(f'{c} {d}' for c, d in cols)})")
        names = [c for c, _ in cols]
        data = [tuple(r.get(c) for c in names) for r in rows.get(table, [])]
        marks = ", ".join("?" for _ in names)
        conn.executemany(f"INSERT INTO {table} VALUES ({marks})", data)
    meta = {"modern": "META_DATA_EXPORT", "legacy_export_meta": "EXPORT_META_DATA"}.get(variant)
    if meta:
        conn.execute(f"CREATE TABLE {meta} (name TEXT, value TEXT)")
        version = "3.20.3" if variant == "modern" else "2.7.1"
        conn.executemany(
            f"INSERT INTO {meta} VALUES (?, ?)",
            [("EXPORT_SCHEMA_VERSION", version), ("EXPORT_PRODUCT_VERSION", "fixture")],
        )
    if not legacy:
        tables: dict[str, dict[int, str]] = {t: dict(enumerate(n)) for t, n in ENUMS.items()}
        tables["ENUM_NSYS_EVENT_TYPE"] = EVENT_TYPES
        for table, ids in tables.items():
            items = ids.items()
            conn.execute(f"CREATE TABLE {table} (id INTEGER PRIMARY KEY, name TEXT, label TEXT)")
            conn.executemany(f"INSERT INTO {table} VALUES (?, ?, ?)", [(i, n, n) for i, n in items])
    conn.commit()
    conn.execute("VACUUM")
    conn.close()


VARIANTS = ("modern", "legacy_export_meta", "legacy_no_meta")


def main(argv: list[str]) -> int:
    out = Path(argv[1]) if len(argv) > 1 else OUT
    out.mkdir(parents=True, exist_ok=True)
    for variant in VARIANTS:
        build(out / f"{variant}.sqlite", variant)
        print(out / f"{variant}.sqlite")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
