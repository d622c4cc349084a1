"""Allocator events for synthetic traces, in both formats, with their built truth.

``MemoryTrace`` wraps a ``SynthTrace`` and records what a caching allocator does:

- ``alloc``/``free``: a tensor's block (Kineto's ``[memory]`` instants, ``profile_memory=True``:
  ``Bytes`` (negative for a free), ``Total Allocated``/``Total Reserved`` after the event);
- ``reserve``/``release``: a segment taken from or given back to the device (``cudaMalloc`` /
  ``cudaFree``: what nsys's ``CUDA_GPU_MEMORY_USAGE_EVENTS`` records, ``--cuda-memory-usage``).

``write_kineto`` / ``write_nsys`` write the wrapped trace and add the memory rows (the Kineto
file gets the instants appended to ``traceEvents``; the export gets the usage table).
``memory_loop`` builds a training-like loop with a churny allocator (a ``cudaMalloc`` and a
``cudaFree`` per step while the GPU has nothing queued) and an ``empty_cache`` in one step.
"""

from __future__ import annotations

import gzip
import json
import sqlite3
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from synth import SynthTrace
from synth_nsys import global_pid
from synth_scenarios import HostCursor

CUDA_TYPE = 1
USAGE_DDL = (
    "CREATE TABLE CUDA_GPU_MEMORY_USAGE_EVENTS (start INTEGER NOT NULL, globalPid INTEGER NOT"
    " NULL, deviceId INTEGER NOT NULL, contextId INTEGER NOT NULL, address INTEGER NOT NULL,"
    " pc INTEGER NOT NULL, bytes INTEGER NOT NULL, memKind INTEGER NOT NULL,"
    " memoryOperationType INTEGER NOT NULL, name TEXT, correlationId INTEGER, streamId INTEGER)"
)


@dataclass
class MemEvent:
    """One allocator event: ``bytes`` > 0 takes, < 0 gives back; ``segment``: a device
    segment (reserve/release) rather than a block."""

    t_ns: int
    bytes: int
    device: int = 0
    tid: int = 1
    segment: bool = False
    addr: int = 0
    #: the correlation id of the runtime call that took or gave back the segment (nsys)
    correlation: int | None = None


@dataclass
class MemoryTrace:
    """A ``SynthTrace`` plus its allocator events (module docstring)."""

    tr: SynthTrace
    events: list[MemEvent] = field(default_factory=list)

    def alloc(self, t_ns: int, nbytes: int, device: int = 0, tid: int = 1) -> None:
        self.events.append(MemEvent(t_ns, nbytes, device, tid, addr=len(self.events) + 1))

    def free(self, t_ns: int, nbytes: int, device: int = 0, tid: int = 1) -> None:
        self.events.append(MemEvent(t_ns, -nbytes, device, tid, addr=len(self.events) + 1))

    def reserve(self, t_ns: int, nbytes: int, device: int = 0, corr: int | None = None) -> None:
        n = len(self.events)
        self.events.append(MemEvent(t_ns, nbytes, device, segment=True, addr=n, correlation=corr))

    def release(self, t_ns: int, nbytes: int, device: int = 0, corr: int | None = None) -> None:
        n = len(self.events)
        self.events.append(MemEvent(t_ns, -nbytes, device, segment=True, addr=n, correlation=corr))

    def call(self, name: str, t_ns: int, dur_ns: int, tid: int = 1) -> int:
        """An allocator runtime call (``cudaMalloc``/``cudaFree``); returns its correlation."""
        idx = self.tr.api(name, t_ns, dur_ns, tid=tid)
        corr = self.tr.events[idx].correlation
        assert corr is not None
        return corr

    # ------------------------------------------------------------------ truth
    def _ordered(self) -> list[MemEvent]:
        return sorted(self.events, key=lambda e: e.t_ns)

    def totals(self, device: int = 0) -> list[tuple[int, int, int, MemEvent]]:
        """``(t_ns, allocated, reserved, event)`` after each event of ``device``, in time
        order (a segment event changes reserved, a block event allocated)."""
        alloc = res = 0
        out = []
        for e in self._ordered():
            if e.device != device:
                continue
            if e.segment:
                res += e.bytes
            else:
                alloc += e.bytes
            out.append((e.t_ns, alloc, res, e))
        return out

    def peak(self, device: int = 0, *, segments: bool = False) -> tuple[int, int]:
        """``(bytes, t_ns)`` of the first maximum of allocated (``segments``: of reserved)."""
        best, at = -1, 0
        for t, a, r, _e in self.totals(device):
            v = r if segments else a
            if v > best:
                best, at = v, t
        return best, at

    # ---------------------------------------------------------------- writers
    def write_kineto(self, path: Path) -> Path:
        """The trace with one ``[memory]`` instant per block event (``ts`` in µs)."""
        path = self.tr.write_kineto(Path(path))
        opener = gzip.open if path.name.endswith(".gz") else open
        with opener(path, "rt") as fh:
            doc = json.load(fh)
        pid = self.tr.pid
        for dev in sorted({e.device for e in self.events}):
            for i, (t, alloc, res, e) in enumerate(self.totals(dev)):
                if e.segment:
                    continue
                args = {
                    "Total Reserved": res,
                    "Total Allocated": alloc,
                    "Bytes": e.bytes,
                    "Device Id": dev,
                    "Device Type": CUDA_TYPE,
                    "Addr": 0x7F0000000000 + e.addr,
                    "Ev Idx": 900_000 + i,
                }
                doc["traceEvents"].append(
                    {
                        "ph": "i",
                        "cat": "cpu_instant_event",
                        "s": "t",
                        "name": "[memory]",
                        "pid": pid,
                        "tid": e.tid,
                        "ts": t / 1000,
                        "args": args,
                    }
                )
        with opener(path, "wt") as fh:
            json.dump(doc, fh)
        return path

    def write_nsys(self, path: Path, *, pinned_bytes: int = 0, enum_table: bool = True) -> Path:
        """The export plus ``CUDA_GPU_MEMORY_USAGE_EVENTS``: one row per segment event
        (``memoryOperationType`` 0 allocation, 1 deallocation; ``bytes`` positive; ``memKind``
        2 DEVICE). ``pinned_bytes``: also a pinned host allocation (``memKind`` 1) of that
        size just after the first segment, never freed (host memory: not the device's).
        ``enum_table`` False: the export without ``ENUM_CUDA_MEM_KIND`` (an old export: a
        reader falls back to the documented numbering)."""
        path = self.tr.write_nsys(Path(path))
        gpid, base = global_pid(self.tr.pid), 0x7F0000000000
        device_kind, pinned_kind = 2, 1  # ENUM_CUDA_MEM_KIND: DEVICE, PINNED
        rows = [
            (
                e.t_ns,
                gpid,
                e.device,
                1,
                base + e.addr,
                0,
                abs(e.bytes),
                device_kind,
                e.bytes < 0,
                e.correlation,
            )
            for e in self._ordered()
            if e.segment
        ]
        if pinned_bytes and rows:
            first = rows[0]
            rows.append((first[0] + 5, gpid, first[2], 1, base + 999_999, 0, pinned_bytes,
                         pinned_kind, False, None))  # fmt: skip
        con = sqlite3.connect(path)
        try:
            if not enum_table:
                con.execute("DROP TABLE IF EXISTS ENUM_CUDA_MEM_KIND")
            con.execute(USAGE_DDL)
            con.executemany(
                "INSERT INTO CUDA_GPU_MEMORY_USAGE_EVENTS VALUES (?,?,?,?,?,?,?,?,?,NULL,?,7)",
                rows,
            )
            con.commit()
        finally:
            con.close()
        return path


MB = 1 << 20


def memory_loop(
    steps: int = 5,
    *,
    empty_cache_step: int | None = 3,
    malloc_ns: int = 600_000,
    free_ns: int = 300_000,
    activation_bytes: int = 64 * MB,
    buffer_bytes: int = 256 * MB,
    segment_bytes: int = 80 * MB,
) -> MemoryTrace:
    """A loop of ``steps`` steps (``ProfilerStep#1``...): per step three forward ops each
    allocating an activation, an ``aten::empty`` that reserves a new segment by a
    ``cudaMalloc`` of ``malloc_ns`` (the GPU has drained its queue by then: idle), a kernel on
    it, then the frees and a ``cudaFree`` of ``free_ns`` giving the segment back (churn). Step
    ``empty_cache_step`` (0-based) ends with an ``empty_cache`` range releasing the cache.
    Each activation lives in its own cached segment of ``segment_bytes`` (rounding: reserved
    stays above allocated). Weights (``512 MB``) are allocated before the first step."""
    mt = MemoryTrace(SynthTrace())
    cur = HostCursor(mt.tr, t0=20_000)
    weights = 512 * MB
    mt.reserve(cur.t, weights)
    mt.alloc(cur.t + 1_000, weights)
    cur.work(10_000)
    cached = 0  # segments of activations kept by the cache
    for i in range(steps):
        with cur.range(f"ProfilerStep#{i + 1}", kind="annotation"):
            cur.work(5_000)
            for layer in range(3):
                with cur.range(f"aten::linear_{layer}"):
                    cur.work(2_000)
                    if cached < (layer + 1) * segment_bytes:
                        mt.reserve(cur.t, segment_bytes)
                        cached += segment_bytes
                    mt.alloc(cur.t + 500, activation_bytes)
                    cur.work(5_000)
                    cur.kernel(f"gemm_{layer}", 40_000)
                    cur.work(2_000)
            with cur.range("aten::empty"):
                cur.work(3_000)
                corr = mt.call("cudaMalloc", cur.t, malloc_ns, tid=cur.tid)
                mt.reserve(cur.t + malloc_ns - 1_000, buffer_bytes, corr=corr)
                cur.work(malloc_ns)
                mt.alloc(cur.t + 500, buffer_bytes)
                cur.work(2_000)
            cur.kernel("fill_buffer", 30_000)
            cur.work(5_000)
            mt.free(cur.t, buffer_bytes)
            for _ in range(3):
                cur.work(1_000)
                mt.free(cur.t, activation_bytes)
            cur.work(2_000)
            corr = mt.call("cudaFree", cur.t, free_ns, tid=cur.tid)
            mt.release(cur.t + 1_000, buffer_bytes, corr=corr)
            cur.work(free_ns)
            cur.kernel("optimizer_step", 20_000)
            if i == empty_cache_step:
                cur.work(30_000)  # the step's last kernel has run: the range's idle is its own
                with cur.range("empty_cache", kind="annotation"):
                    cur.work(2_000)
                    corr = mt.call("cudaFree", cur.t, free_ns, tid=cur.tid)
                    mt.release(cur.t + 1_000, cached, corr=corr)
                    cached = 0
                    cur.work(free_ns + 2_000)
            cur.work(10_000)
    cur.kernel("tail", 10_000)
    return mt


# ------------------------------------------------- edits of written traces (review cases)
def memory_instant(ts_us: float, pid: int, args: dict[str, Any]) -> dict[str, Any]:
    """One Kineto ``[memory]`` instant at ``ts_us`` (µs) with ``args``."""
    return {"ph": "i", "cat": "cpu_instant_event", "s": "t", "name": "[memory]", "pid": pid,
            "tid": 1, "ts": ts_us, "args": args}  # fmt: skip


def edit_kineto(
    path: Path,
    add: Callable[[dict[str, Any]], list[dict[str, Any]]] = lambda first: [],
    *,
    drop_totals: bool = False,
) -> list[dict[str, Any]]:
    """Rewrite a written (plain JSON) Kineto trace: ``drop_totals`` removes the totals of its
    ``[memory]`` events (PyTorch 1.8/1.9 wrote ``Bytes`` only), then the events ``add(first)``
    returns are appended (``first``: the earliest ``[memory]`` event). Returns every
    ``[memory]`` event after the edit, in time order."""
    doc = json.loads(path.read_text())
    events = doc["traceEvents"]
    mem = sorted((e for e in events if e.get("name") == "[memory]"), key=lambda e: e["ts"])
    for e in mem if drop_totals else []:
        e["args"].pop("Total Allocated", None), e["args"].pop("Total Reserved", None)
    events += add(mem[0])
    path.write_text(json.dumps(doc))
    return sorted((e for e in events if e.get("name") == "[memory]"), key=lambda e: e["ts"])


def usage_rows(path: Path, add: list[list[Any]] | None = None) -> list[list[Any]]:
    """The rows of a written export's ``CUDA_GPU_MEMORY_USAGE_EVENTS`` in time order, after
    inserting ``add`` (full rows, the table's 12 columns)."""
    con = sqlite3.connect(path)
    table = "CUDA_GPU_MEMORY_USAGE_EVENTS"
    try:
        con.executemany(f"INSERT INTO {table} VALUES ({','.join('?' * 12)})", add or [])
        con.commit()
        return [list(r) for r in con.execute(f"SELECT * FROM {table} ORDER BY start")]
    finally:
        con.close()
