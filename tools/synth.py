"""Synthetic trace builder: one timeline, written as a Kineto JSON trace or an nsys SQLite export.

Tests build a small timeline of host ranges, CUDA API calls and GPU work with exactly known
times, write it in either format, load it back with ``traceforensics.ingest.load_path`` and
check what the analyses say about it. Only the standard library is used.

Import from tests with ``sys.path.insert(0, str(ROOT / "tools")); import synth``.

Times given to the builder are integer ns relative to the trace start (t = 0).

- Kineto (``write_kineto``): ``baseTimeNanoseconds`` = ``base_ns`` and every ``ts``/``dur`` is a
  relative µs number with 3 decimals (ns precision), as kineto writes since 2024; so the
  ingested absolute time is ``base_ns + t``. Kineto has no OS-runtime calls: ``os_call``
  ranges are written as ``user_annotation`` events named ``os:<name>`` with
  ``args["synthetic kind"] = "os_call"`` (an ingester sees an annotation, not an os_call).
- nsys (``write_nsys``): every ``start``/``end`` is the relative time itself (session ns); see
  ``synth_nsys`` for the tables written.

Ids: ``launch``/``api`` take a fresh CUPTI correlation id when none is given. A ``cpu_op`` or
``annotation`` without ``external_id`` gets a fresh one; a launch/api without ``external_id``
inherits the External id of the innermost cpu_op/annotation enclosing its host start on the
same thread (what kineto records), resolved when a file is written.
"""

from __future__ import annotations

import gzip
import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

HOST_KINDS = ("cpu_op", "annotation", "python", "os_call")
GPU_WORK_KINDS = ("kernel", "memcpy", "memset")
COPY_KIND_TAGS = {"h2d": "HtoD", "d2h": "DtoH", "d2d": "DtoD", "h2h": "HtoH", "p2p": "PtoP"}
MEM_KIND_TAGS = {
    "pageable": "Pageable",
    "pinned": "Pinned",
    "device": "Device",
    "managed": "Managed",
    "array": "Array",
    "unknown": "Unknown",
}
_FIRST_CORRELATION = 1_000
_FIRST_EXTERNAL_ID = 100


def memcpy_name(copy_kind: str | None, src_mem: str | None, dst_mem: str | None) -> str:
    """Kineto's memcpy event name, e.g. ``Memcpy HtoD (Pageable -> Device)``."""
    tag = COPY_KIND_TAGS.get(copy_kind or "", "Unknown")
    src = MEM_KIND_TAGS.get(src_mem or "unknown", "Unknown")
    dst = MEM_KIND_TAGS.get(dst_mem or "unknown", "Unknown")
    return f"Memcpy {tag} ({src} -> {dst})"


def memset_name(dst_mem: str | None) -> str:
    """Kineto's memset event name, e.g. ``Memset (Device)``."""
    return f"Memset ({MEM_KIND_TAGS.get(dst_mem or 'device', 'Device')})"


def is_driver_api(name: str) -> bool:
    """``cu*`` names (cuLaunchKernel) are driver calls; ``cuda*`` names are runtime calls."""
    return name.startswith("cu") and not name.startswith("cuda")


@dataclass
class SynthEvent:
    """One recorded interval. ``kind`` is a model kind id (cpu_op, cuda_api, kernel, ...)."""

    kind: str
    name: str
    start_ns: int
    dur_ns: int
    tid: int | None = None
    device: int | None = None
    stream: int | None = None
    correlation: int | None = None
    external_id: int | None = None
    args: dict[str, Any] = field(default_factory=dict)
    copy_kind: str | None = None
    src_mem: str | None = None
    dst_mem: str | None = None
    bytes: int | None = None
    grid: tuple[int, int, int] | None = None
    block: tuple[int, int, int] | None = None
    #: the host process of a host event when not the trace's own (several processes in one
    #: file); None = ``SynthTrace.pid``
    pid: int | None = None

    @property
    def end_ns(self) -> int:
        return self.start_ns + self.dur_ns


@dataclass(frozen=True)
class Injected:
    """A stall a scenario put in on purpose: ``cause`` id and the host interval (relative ns)."""

    cause: str
    step: int
    start_ns: int
    dur_ns: int
    note: str = ""


class SynthTrace:
    """A synthetic single-process, single-rank trace."""

    def __init__(
        self,
        device_name: str = "NVIDIA H100 80GB HBM3",
        sm_count: int = 132,
        rank: int = 0,
        pid: int = 1000,
        base_ns: int = 1_700_000_000_000_000_000,
        *,
        world_size: int = 1,
        compute_capability: tuple[int, int] = (9, 0),
        total_mem_bytes: int = 85_021_163_520,
    ) -> None:
        self.device_name = device_name
        self.sm_count = sm_count
        self.rank = rank
        self.pid = pid
        self.base_ns = base_ns
        self.world_size = world_size
        self.compute_capability = compute_capability
        self.total_mem_bytes = total_mem_bytes
        self.events: list[SynthEvent] = []
        #: Stalls injected by a scenario (empty for hand-built traces).
        self.injected: list[Injected] = []
        #: For stall scenarios: the device-0 idle ns per cause a correct attribution gives.
        self.expected_idle_by_cause: dict[str, int] = {}
        self._next_corr = _FIRST_CORRELATION
        self._next_ext = _FIRST_EXTERNAL_ID
        #: How graph replays are written: ``"node"`` (one kernel row per graph node, the
        #: default of PyTorch's profiler) or ``"graph"`` (nsys ``--cuda-graph-trace=graph``: one
        #: graph-level row per launch; Kineto has no such record, so its nodes are left out).
        self.graph_trace = "node"
        #: Kineto ``ac2g`` flow pairs: ``"all"`` (every launch), ``"none"`` (older traces keep
        #: only the args' correlation) or ``"dangling"`` (every other launch's flow end is left
        #: out, and one flow end points at a correlation no call has).
        self.flows = "all"

    # ----------------------------------------------------------------- building
    def _add(self, ev: SynthEvent) -> int:
        if ev.dur_ns < 0 or ev.start_ns < 0:
            raise ValueError(f"{ev.name}: start_ns and dur_ns must be >= 0")
        self.events.append(ev)
        return len(self.events) - 1

    def _corr(self, correlation: int | None) -> int:
        if correlation is not None:
            return correlation
        return self.new_correlation()

    def new_correlation(self) -> int:
        """A fresh CUPTI correlation id (to tie an ``api`` call to a ``gpu_sync`` record)."""
        self._next_corr += 1
        return self._next_corr

    def cpu_range(
        self,
        name: str,
        start_ns: int,
        dur_ns: int,
        *,
        kind: str = "cpu_op",
        tid: int = 1,
        args: dict[str, Any] | None = None,
        external_id: int | None = None,
    ) -> int:
        """A host range; ``kind`` is cpu_op, annotation, python or os_call. Returns its index."""
        if kind not in HOST_KINDS:
            raise ValueError(f"kind must be one of {HOST_KINDS}, not {kind!r}")
        if external_id is None and kind in ("cpu_op", "annotation"):
            self._next_ext += 1
            external_id = self._next_ext
        ev = SynthEvent(kind, name, start_ns, dur_ns, tid=tid, external_id=external_id)
        ev.args = dict(args or {})
        return self._add(ev)

    def api(
        self,
        name: str,
        start_ns: int,
        dur_ns: int,
        *,
        tid: int = 1,
        correlation: int | None = None,
        external_id: int | None = None,
    ) -> int:
        """A CUDA runtime/driver call launching no GPU work. Returns its event index."""
        ev = SynthEvent("cuda_api", name, start_ns, dur_ns, tid=tid, external_id=external_id)
        ev.correlation = self._corr(correlation)
        return self._add(ev)

    def launch(
        self,
        gpu_name: str,
        host_start_ns: int,
        host_dur_ns: int,
        gpu_start_ns: int,
        gpu_dur_ns: int,
        *,
        kind: str = "kernel",
        stream: int = 7,
        device: int = 0,
        api: str = "cudaLaunchKernel",
        tid: int = 1,
        external_id: int | None = None,
        copy_kind: str | None = None,
        src_mem: str | None = None,
        dst_mem: str | None = None,
        bytes: int | None = None,
        grid: tuple[int, int, int] = (1, 1, 1),
        block: tuple[int, int, int] = (128, 1, 1),
        args: dict[str, Any] | None = None,
    ) -> int:
        """A launch API call plus the GPU work it enqueued. Returns the correlation id.

        ``kind`` is kernel, memcpy or memset. For memcpy/memset an empty ``gpu_name`` means the
        Kineto-style name (``memcpy_name``/``memset_name``); ``args`` go on the GPU event.
        """
        if kind not in GPU_WORK_KINDS:
            raise ValueError(f"kind must be one of {GPU_WORK_KINDS}, not {kind!r}")
        if gpu_start_ns < host_start_ns:
            raise ValueError(f"{gpu_name}: GPU work cannot start before its launch call")
        corr = self._corr(None)
        if not gpu_name:
            gpu_name = (
                memset_name(dst_mem)
                if kind == "memset"
                else memcpy_name(copy_kind, src_mem, dst_mem)
            )
        host = SynthEvent("cuda_api", api, host_start_ns, host_dur_ns, tid=tid)
        host.correlation, host.external_id = corr, external_id
        self._add(host)
        gpu = SynthEvent(kind, gpu_name, gpu_start_ns, gpu_dur_ns, device=device, stream=stream)
        gpu.correlation, gpu.external_id = corr, external_id
        gpu.args = dict(args or {})
        gpu.tid = tid  # launching thread; used to resolve the External id only
        if kind == "kernel":
            gpu.grid, gpu.block = grid, block
        else:
            gpu.copy_kind = copy_kind if kind == "memcpy" else None
            gpu.src_mem = src_mem if kind == "memcpy" else None
            gpu.dst_mem = (
                dst_mem if dst_mem is not None else ("device" if kind == "memset" else None)
            )
            gpu.bytes = bytes if bytes is not None else 0
        self._add(gpu)
        return corr

    def graph_launch(
        self,
        host_start_ns: int,
        host_dur_ns: int,
        nodes: list[tuple[str, int, int]],
        *,
        graph_id: int = 1,
        stream: int = 7,
        device: int = 0,
        api: str = "cudaGraphLaunch",
        tid: int = 1,
    ) -> int:
        """A graph launch call plus its nodes, ``(kernel name, start_ns, dur_ns)`` each, all
        sharing the launch's correlation id (as CUPTI records graph kernels). Returns it."""
        corr = self._corr(None)
        host = SynthEvent("cuda_api", api, host_start_ns, host_dur_ns, tid=tid)
        host.correlation = corr
        self._add(host)
        for i, (name, start, dur) in enumerate(nodes):
            if start < host_start_ns:
                raise ValueError(f"{name}: a graph node cannot start before its launch")
            node = SynthEvent("kernel", name, start, dur, device=device, stream=stream, tid=tid)
            node.correlation = corr
            node.args = {"graph id": graph_id, "graph node id": i + 1}
            self._add(node)
        return corr

    def graph_spans(self) -> list[SynthEvent]:
        """One graph-level record per graph launch: from its first node's start to its last
        node's end, named ``CUDA Graph <id>`` (what ``graph`` trace mode writes)."""
        spans: dict[int, SynthEvent] = {}
        for e in self.events:
            if e.kind != "kernel" or "graph id" not in e.args or e.correlation is None:
                continue
            cur = spans.get(e.correlation)
            if cur is None:
                spans[e.correlation] = SynthEvent(
                    "cuda_graph", f"CUDA Graph {e.args['graph id']}", e.start_ns, e.dur_ns,
                    device=e.device, stream=e.stream, correlation=e.correlation,
                    args={"graph id": e.args["graph id"]},
                )  # fmt: skip
            else:
                end = max(cur.end_ns, e.end_ns)
                cur.start_ns = min(cur.start_ns, e.start_ns)
                cur.dur_ns = end - cur.start_ns
        return list(spans.values())

    def recorded(self) -> list[SynthEvent]:
        """The events a writer writes: in ``graph`` mode graph nodes are replaced by
        ``graph_spans`` (nsys) or dropped (Kineto drops the spans too: see ``graph_trace``)."""
        if self.graph_trace == "node":
            return list(self.events)
        kept = [e for e in self.events if not (e.kind == "kernel" and "graph id" in e.args)]
        return kept + self.graph_spans()

    def gpu_sync(
        self,
        name: str,
        start_ns: int,
        dur_ns: int,
        *,
        stream: int = 7,
        device: int = 0,
        correlation: int | None = None,
    ) -> int:
        """A GPU-side sync record (``Stream Sync``, ``Event Sync``, ``Context Sync``)."""
        ev = SynthEvent("gpu_sync", name, start_ns, dur_ns, device=device, stream=stream)
        ev.correlation = correlation
        return self._add(ev)

    def gpu_annotation(
        self, name: str, start_ns: int, dur_ns: int, *, stream: int = 7, device: int = 0
    ) -> int:
        """A user range's span on a GPU stream (Kineto ``gpu_user_annotation``, e.g. a
        ``ProfilerStep#N``'s GPU side). Not GPU work; nsys has no such record (not written)."""
        return self._add(
            SynthEvent("gpu_annotation", name, start_ns, dur_ns, device=device, stream=stream)
        )

    # ---------------------------------------------------------------- queries
    def of_kind(self, *kinds: str) -> list[SynthEvent]:
        """Events of the given kinds, sorted by start (then longest first)."""
        return sorted(
            (e for e in self.events if e.kind in kinds), key=lambda e: (e.start_ns, -e.dur_ns)
        )

    def host_pid(self, ev: SynthEvent) -> int:
        """The process of a host event (its own ``pid``, else the trace's)."""
        return self.pid if ev.pid is None else ev.pid

    def host_pids(self) -> list[int]:
        """Every host process of the trace, the trace's own first."""
        others = {e.pid for e in self.events if e.pid is not None and e.device is None}
        return [self.pid, *sorted(others - {self.pid})]

    def devices(self) -> list[int]:
        return sorted({e.device for e in self.events if e.device is not None} or {0})

    def busy_union(self, device: int = 0) -> list[tuple[int, int]]:
        """Union of the recorded kernel/memcpy/memset/graph intervals on ``device`` as (start,
        end) relative ns."""
        spans = sorted(
            (e.start_ns, e.end_ns)
            for e in self.recorded()
            if e.kind in (*GPU_WORK_KINDS, "cuda_graph") and e.device == device
        )
        out: list[tuple[int, int]] = []
        for s, e in spans:
            if out and s <= out[-1][1]:
                out[-1] = (out[-1][0], max(out[-1][1], e))
            else:
                out.append((s, e))
        return out

    def idle_in(self, start_ns: int, end_ns: int, device: int = 0) -> int:
        """Device idle ns inside [start_ns, end_ns) (independent of the project's code)."""
        busy = sum(max(0, min(e, end_ns) - max(s, start_ns)) for s, e in self.busy_union(device))
        return (end_ns - start_ns) - busy

    def resolved_external_ids(self) -> list[int | None]:
        """External id per event: explicit, else the innermost enclosing op on the thread."""
        ranges = [
            e for e in self.events if e.kind in ("cpu_op", "annotation") and e.tid is not None
        ]
        out: list[int | None] = []
        for ev in self.events:
            ext = ev.external_id
            if ext is None and ev.kind in ("cuda_api", *GPU_WORK_KINDS):
                at = self._launch_start(ev)
                best: SynthEvent | None = None
                for r in ranges:
                    if (
                        r.tid == ev.tid
                        and r.start_ns <= at < r.end_ns
                        and (
                            best is None or (r.start_ns, -r.dur_ns) > (best.start_ns, -best.dur_ns)
                        )
                    ):
                        best = r
                ext = best.external_id if best is not None else None
            out.append(ext)
        return out

    def _launch_start(self, ev: SynthEvent) -> int:
        if ev.kind == "cuda_api":
            return ev.start_ns
        for e in self.events:
            if e.kind == "cuda_api" and e.correlation == ev.correlation:
                return e.start_ns
        return ev.start_ns

    # ---------------------------------------------------------------- writers
    def write_kineto(self, path: Path) -> Path:
        """Write a modern Kineto trace; gzip when the name ends in ``.gz``."""
        from synth_kineto import kineto_text

        path = Path(path)
        text = kineto_text(self).encode()
        if path.name.endswith(".gz"):
            with (
                path.open("wb") as raw,
                gzip.GzipFile(filename="", mode="wb", fileobj=raw, mtime=0) as gz,
            ):
                gz.write(text)
        else:
            path.write_bytes(text)
        return path

    def write_nsys(self, path: Path) -> Path:
        """Write an Nsight Systems SQLite export (schema 3.25-style DDL)."""
        from synth_nsys import write_sqlite

        path = Path(path)
        write_sqlite(self, path)
        return path


def json_compact(obj: object) -> str:
    return json.dumps(obj, separators=(",", ":"), ensure_ascii=False)


# ===================================================================== scenarios
# Deterministic training-loop timelines; see synth_scenarios for the builders.
def training_loop(steps: int = 6, **kwargs: Any) -> SynthTrace:
    """A small MLP training loop (see ``synth_scenarios.training_loop`` for the knobs)."""
    from synth_scenarios import training_loop as build

    return build(steps=steps, **kwargs)


#: Causes ``stall_scenario`` can inject (one host stall each).
STALL_CAUSES: tuple[str, ...] = (
    "data_loading",
    "host_sync",
    "memcpy",
    "io",
    "memory_management",
    "compilation",
    "communication",
    "cpu_compute",
    "untraced",
)


def stall_scenario(cause: str, stall_ns: int = 2_000_000, **kwargs: Any) -> SynthTrace:
    """A minimal trace with one injected stall of ``stall_ns`` for ``cause``."""
    from synth_scenarios import stall_scenario as build

    return build(cause, stall_ns, **kwargs)


__all__ = [
    "STALL_CAUSES",
    "Injected",
    "SynthEvent",
    "SynthTrace",
    "is_driver_api",
    "memcpy_name",
    "memset_name",
    "stall_scenario",
    "training_loop",
]
