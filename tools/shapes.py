"""Traces of random *shape* (issue 43): hypothesis strategies drawing a timeline, not bytes.

A drawn ``Shape`` is one or more ``synth.SynthTrace`` timelines (one per rank) built from any
subset of the event families in ``FAMILIES``, on 1-4 devices and streams, 1-3 host processes
and 1-2 threads each, with nested and overlapping host ranges, times anywhere or on a coarse
grid (equal starts, ranges ending where work starts), zero-length work, a repeated correlation
id or none at all, Kineto flows present, absent or dangling, and drawn analysis ``options``.
``write`` puts it on disk in either format, as one file or a rank directory, from the same
drawn timeline.

The expected answer is computed here, independently of the project's code: ``expected_busy``
is the plain union (a sorted loop) of the GPU intervals a file of that format records, per
``(rank, device)``; ``expected_window`` and ``busy_in`` likewise.

Import from tests like ``synth`` (``tools/`` is on ``sys.path`` there); ``tools/shapes_long.py``
runs the long profile.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from hypothesis import strategies as st

from synth import GPU_WORK_KINDS, SynthEvent, SynthTrace

#: Event families a shape draws a subset of.
FAMILIES = (
    "kernel",
    "memcpy",
    "memset",
    "launch_only",  # a launch call whose GPU record is missing
    "orphan_work",  # GPU work no recorded call launched (host side not traced)
    "stream_sync",
    "device_sync",
    "event_sync",
    "event_record",
    "stream_wait",
    "nccl",  # NCCL kernel without collective args
    "nccl_args",  # NCCL kernel with Kineto's collective args
    "graph",
    "profiler_step",
    "gpu_step",  # a ProfilerStep's GPU-side span (Kineto gpu_user_annotation; nsys has none)
    "other_step",  # a user range named like a step
    "annotation",
    "dataloader",
    "cpu_op",
)
FORMATS = ("kineto", "nsys")
STREAMS = (7, 13, 20, 40)
DATALOADER = "enumerate(DataLoader)#_SingleProcessDataLoaderIter.__next__"
NCCL_KERNEL = "ncclDevKernel_AllReduce_Sum_f32_RING_LL(ncclDevComm*, unsigned long, ncclWork*)"
_SYNC_API = {
    "stream_sync": ("cudaStreamSynchronize", "Stream Sync"),
    "device_sync": ("cudaDeviceSynchronize", "Context Sync"),
    "event_sync": ("cudaEventSynchronize", "Event Sync"),
    "stream_wait": ("cudaStreamWaitEvent", "Stream Wait Event"),
}
_RANGE_NAME = {
    "profiler_step": "ProfilerStep#{n}",
    "other_step": "train_step {n}",
    "annotation": "## forward {n} ##",
    "dataloader": DATALOADER,
    "cpu_op": "aten::mm",
}
_STEP_LOOPS = ("profiler_step", "other_step")
_CALL_ONLY = {"event_record": "cudaEventRecord", "launch_only": "cudaLaunchKernel"}
_RANGE_KIND = {
    "profiler_step": "annotation",
    "other_step": "annotation",
    "annotation": "annotation",
}
_HORIZON_NS = 400_000


@dataclass
class Shape:
    """A drawn trace shape: one timeline per rank, and how it is written."""

    traces: list[SynthTrace]
    fmt: str
    rank_dir: bool
    families: frozenset[str]
    #: analysis options as flat names (``AnalysisOptions.of(**options)``)
    options: dict[str, Any] = field(default_factory=dict)

    def work_spans(self) -> dict[tuple[int, int], list[tuple[int, int]]]:
        """``(rank, device)`` -> (start, end) ns of every GPU work record a file of this format
        holds (Kineto has no graph-level record: ``graph`` trace mode writes no node there);
        a device with only sync records has none and is not listed."""
        kinds = (*GPU_WORK_KINDS, "cuda_graph") if self.fmt == "nsys" else GPU_WORK_KINDS
        out: dict[tuple[int, int], list[tuple[int, int]]] = {}
        for tr in self.traces:
            for e in tr.recorded():
                if e.kind in kinds and e.device is not None:
                    out.setdefault((tr.rank, e.device), []).append((e.start_ns, e.end_ns))
        return out

    def expected_busy(self) -> dict[tuple[int, int], int]:
        """``(rank, device)`` -> ns of the plain union of its recorded GPU work."""
        return {k: union_ns(v) for k, v in self.work_spans().items()}

    def busy_in(self, key: tuple[int, int], lo: int, hi: int) -> int:
        """Busy ns of device ``key`` inside [lo, hi) (times as written, see ``offset_ns``)."""
        spans = self.work_spans().get(key, [])
        return union_ns([(max(s, lo), min(e, hi)) for s, e in spans])

    def offset_ns(self) -> int:
        """What the loaded tables add to a drawn time: Kineto's ``baseTimeNanoseconds``; an
        nsys export's times are its session's (every rank's session starts together here)."""
        return self.traces[0].base_ns if self.fmt == "kineto" else 0

    def expected_window(self) -> dict[tuple[int, int], int]:
        """``(rank, device)`` -> first start to last end of its work of positive length (the
        default ``device`` window); zero-length work covers no time and bounds nothing."""
        out = {}
        for key, spans in self.work_spans().items():
            timed = [(s, e) for s, e in spans if e > s]
            out[key] = max(e for _, e in timed) - min(s for s, _ in timed) if timed else 0
        return out

    def write(self, folder: Path) -> Path:
        """Write the shape under ``folder``; return the path ``tf analyze`` takes."""
        if not self.rank_dir:
            (tr,) = self.traces
            name = "t.pt.trace.json" if self.fmt == "kineto" else "t.sqlite"
            return _write_one(tr, self.fmt, folder / name)
        out = folder / "ranks"
        out.mkdir()
        for tr in self.traces:
            name = (
                f"rank{tr.rank}.pt.trace.json" if self.fmt == "kineto" else f"rank{tr.rank}.sqlite"
            )
            _write_one(tr, self.fmt, out / name)
        return out

    def describe(self) -> str:
        """One line per event, to read a failing example."""
        lines = [f"fmt={self.fmt} rank_dir={self.rank_dir} families={sorted(self.families)}"]
        lines.append(f"options={self.options}")
        for tr in self.traces:
            lines.append(f"rank {tr.rank}: graph_trace={tr.graph_trace} flows={tr.flows}")
            for e in tr.events:
                where = f"d{e.device}s{e.stream}" if e.device is not None else f"p{e.pid}t{e.tid}"
                lines.append(
                    f"  {e.kind:10} {e.name[:40]:40} {e.start_ns:>8} +{e.dur_ns:<7} {where}"
                    f" corr={e.correlation}"
                )
        return "\n".join(lines)


def union_ns(spans: list[tuple[int, int]]) -> int:
    """Total length of the union of ``spans`` (a plain sorted loop; empty spans cover nothing)."""
    total, cur_s, cur_e = 0, 0, -1
    for s, e in sorted(spans):
        if e <= s:
            continue
        if s > cur_e:
            total += max(cur_e - cur_s, 0)
            cur_s, cur_e = s, e
        else:
            cur_e = max(cur_e, e)
    return total + max(cur_e - cur_s, 0)


def _write_one(tr: SynthTrace, fmt: str, path: Path) -> Path:
    return tr.write_kineto(path) if fmt == "kineto" else tr.write_nsys(path)


_durations = st.one_of(
    st.just(0), st.integers(1, 40_000), st.integers(1, 8).map(lambda k: k * 5_000)
)
#: times: anywhere, or on a coarse grid (equal starts and ends, ranges ending where work starts)
_times = st.one_of(st.integers(0, _HORIZON_NS), st.integers(0, 40).map(lambda k: k * 5_000))


@st.composite
def timelines(
    draw: st.DrawFn, families: frozenset[str], rank: int = 0, world: int = 1
) -> SynthTrace:
    """One rank's timeline drawn from ``families``."""
    tr = SynthTrace(rank=rank, world_size=world, pid=1000 + rank)
    devices = draw(st.lists(st.integers(0, 3), min_size=1, max_size=4, unique=True))
    streams = draw(st.lists(st.sampled_from(STREAMS), min_size=1, max_size=4, unique=True))
    n_procs = draw(st.integers(1, 3))
    threads = [(p, 1 + 10 * p + k) for p in range(n_procs) for k in range(draw(st.integers(1, 2)))]
    if "graph" in families:
        tr.graph_trace = draw(st.sampled_from(("node", "graph")))
    tr.flows = draw(st.sampled_from(("all", "none", "dangling")))
    fams = sorted(families)
    for n in range(draw(st.integers(0, 24)) if fams else 0):
        fam = draw(st.sampled_from(fams))
        proc, tid = draw(st.sampled_from(threads))
        before = len(tr.events)
        _add(draw, tr, fam, n, tid, devices, streams)
        for ev in tr.events[before:]:
            if ev.device is None and proc:
                ev.pid = tr.pid + 100 * proc
    if draw(st.booleans()):
        _repeat_correlation(tr)
    if draw(st.integers(0, 9)) == 0:  # a trace whose records carry no correlation id at all
        for ev in tr.events:
            ev.correlation = None
    return tr


def _add(
    draw: st.DrawFn,
    tr: SynthTrace,
    fam: str,
    n: int,
    tid: int,
    devices: list[int],
    streams: list[int],
) -> None:
    """One event (or a launch and its work) of family ``fam``."""
    host = draw(_times)
    host_dur = draw(st.integers(0, 20_000))
    if fam == "gpu_step":
        stream, device = draw(st.sampled_from(streams)), draw(st.sampled_from(devices))
        tr.gpu_annotation(f"ProfilerStep#{n}", host, draw(_times), stream=stream, device=device)
    elif fam in _STEP_LOOPS and draw(st.booleans()):
        _step_loop(draw, tr, _RANGE_NAME[fam], _RANGE_KIND[fam], tid)
    elif fam in _RANGE_NAME:
        name = _RANGE_NAME[fam].format(n=n)
        kind = _RANGE_KIND.get(fam, "cpu_op")
        tr.cpu_range(name, host, draw(_times), kind=kind, tid=tid)
    elif fam in _CALL_ONLY:
        tr.api(_CALL_ONLY[fam], host, host_dur, tid=tid)
    elif fam in _SYNC_API:
        _sync(draw, tr, fam, host, host_dur, tid, devices, streams)
    else:
        _work(draw, tr, fam, n, host, host_dur, tid, devices, streams)


def _step_loop(draw: st.DrawFn, tr: SynthTrace, name: str, kind: str, tid: int) -> None:
    """2-5 step ranges one after another over the timeline (a training loop's steps), each
    ending a drawn jitter before, at or after the next one's start."""
    count = draw(st.integers(2, 5))
    first, step = draw(st.integers(0, 40_000)), _HORIZON_NS // count
    for i in range(count):
        dur = max(step + draw(st.sampled_from((-2_000, 0, 0, 1_000))), 0)
        tr.cpu_range(name.format(n=i + 1), first + i * step, dur, kind=kind, tid=tid)


def _sync(
    draw: st.DrawFn,
    tr: SynthTrace,
    fam: str,
    host: int,
    host_dur: int,
    tid: int,
    devices: list[int],
    streams: list[int],
) -> None:
    """A sync or stream-wait call, with or without its GPU-side record."""
    api, record = _SYNC_API[fam]
    corr = tr.new_correlation()
    tr.api(api, host, host_dur, tid=tid, correlation=corr)
    if draw(st.booleans()):
        stream, device = draw(st.sampled_from(streams)), draw(st.sampled_from(devices))
        tr.gpu_sync(record, host, host_dur, stream=stream, device=device, correlation=corr)


def _work(
    draw: st.DrawFn,
    tr: SynthTrace,
    fam: str,
    n: int,
    host: int,
    host_dur: int,
    tid: int,
    devices: list[int],
    streams: list[int],
) -> None:
    """GPU work: a launch and its kernel/copy/memset, a graph launch, or work without a call."""
    stream, device = draw(st.sampled_from(streams)), draw(st.sampled_from(devices))
    gpu = host + draw(st.one_of(st.integers(0, 60_000), st.sampled_from((0, 5_000, 10_000))))
    if fam == "orphan_work":
        kind = draw(st.sampled_from(GPU_WORK_KINDS))
        ev = SynthEvent(kind, f"orphan_{kind}", gpu, draw(_durations), device=device, stream=stream)
        ev.correlation = tr.new_correlation()
        if kind != "kernel":
            ev.bytes, ev.dst_mem = 4096, "device"
        tr.events.append(ev)
        return
    if fam == "graph":
        nodes: list[tuple[str, int, int]] = []
        t = gpu
        for i in range(draw(st.integers(0, 3))):
            dur = draw(_durations)
            nodes.append((f"graph_node_kernel_{i}", t, dur))
            t += dur + draw(st.integers(0, 3_000))
        tr.graph_launch(host, host_dur, nodes, stream=stream, device=device, tid=tid)
        return
    kind = fam if fam in ("memcpy", "memset") else "kernel"
    name = NCCL_KERNEL if fam.startswith("nccl") else ("" if kind != "kernel" else f"k{n % 3}")
    args: dict[str, Any] = {}
    if fam == "nccl_args":
        args = {
            "Collective name": "allreduce",
            "In msg nelems": 1024,
            "Out msg nelems": 1024,
            "Group size": tr.world_size,
            "dtype": "Float",
            "Process Group Name": "0",
            "Process Group Ranks": "[" + ", ".join(map(str, range(tr.world_size))) + "]",
        }
    copy = ("h2d", "pageable", "device") if kind == "memcpy" else (None, None, None)
    api = {"memcpy": "cudaMemcpyAsync", "memset": "cudaMemsetAsync"}.get(kind, "cudaLaunchKernel")
    tr.launch(
        name,
        host,
        host_dur,
        gpu,
        draw(_durations),
        kind=kind,
        api=api,
        stream=stream,
        device=device,
        tid=tid,
        copy_kind=copy[0],
        src_mem=copy[1],
        dst_mem=copy[2],
        bytes=4096 if kind != "kernel" else None,
        args=args,
    )


def _repeat_correlation(tr: SynthTrace) -> None:
    """Give the second launch (call and work) the first launch's correlation id, as a trace
    whose ids wrapped or were merged from two captures does."""
    launches = [
        e.correlation for e in tr.events if e.kind in GPU_WORK_KINDS and e.correlation is not None
    ]
    firsts = list(dict.fromkeys(launches))
    if len(firsts) < 2:
        return
    for e in tr.events:
        if e.correlation == firsts[1]:
            e.correlation = firsts[0]


@st.composite
def shapes(draw: st.DrawFn, fmt: str | None = None, rank_dir: bool | None = None) -> Shape:
    """A ``Shape``: format and single file / rank directory drawn unless given."""
    fmt = draw(st.sampled_from(FORMATS)) if fmt is None else fmt
    rank_dir = draw(st.booleans()) if rank_dir is None else rank_dir
    families = frozenset(draw(st.sets(st.sampled_from(FAMILIES))))
    if draw(st.integers(0, 19)) == 0:  # GPU work alone: no host event at all
        families = frozenset({"orphan_work"})
    world = draw(st.integers(1, 3)) if rank_dir else 1
    traces = [draw(timelines(families, rank=r, world=world)) for r in range(world)]
    return Shape(traces, fmt, rank_dir, families, options=draw(options()))


#: CLI flag of each flat option name ``options`` draws
CLI_FLAGS = {
    "window": "--window",
    "step_window": "--step-window",
    "top_gaps": "--gaps",
    "bin_ms": "--bin-ms",
    "step_pattern": "--step-pattern",
}


@st.composite
def options(draw: st.DrawFn) -> dict[str, Any]:
    """Analysis options (flat names): each left at its default or drawn."""
    choices: dict[str, st.SearchStrategy[Any]] = {
        "window": st.sampled_from(("device", "trace")),
        "step_window": st.sampled_from(("tiled", "annotation")),
        "top_gaps": st.sampled_from((0, 1, 3)),
        "bin_ms": st.sampled_from((0.005, 0.1)),
        "step_pattern": st.sampled_from(("train_step", "forward")),
    }
    return {k: draw(v) for k, v in choices.items() if draw(st.integers(0, 2)) == 0}


def cli_options(opts: dict[str, Any]) -> list[str]:
    """``opts`` as ``tf analyze`` flags."""
    return [a for k, v in opts.items() for a in (CLI_FLAGS[k], str(v))]


__all__ = [
    "FAMILIES",
    "FORMATS",
    "Shape",
    "cli_options",
    "options",
    "shapes",
    "timelines",
    "union_ns",
]
