"""Where the annotated trace's events go: processes, threads and the clock of the output file.

A Chrome trace places every slice on a (pid, tid) track and times it in µs (``ts``, ``dur``).
The annotated trace keeps the input's own tracks where it can and adds tf's::

    one rank (a Kineto file, an nsys export)         a job (a directory of rank files)
    pid 25738  python (host threads, unchanged)      pid 1000000  "rank 0"
    pid 0      GPU 0 (Kineto's streams, unchanged)      tid 1  "python 25738 / thread 25738"
    pid 1000000000 "tf · GPU 0"                         tid 2  "GPU 0 / stream 7"
        tid 1 "idle by cause"                           tid 3  "tf · GPU 0 · idle by cause"
        tid 2 "steps"                               pid 1000001  "rank 1" ...
        tid 3.. "finding 1: data_loading", ...

Rule: with one rank, a Kineto file's tracks keep their pid/tid as written; events converted
from the table keep their host pid, a track per thread and group of kinds (numbered from
2,000,000,000, named ``pid P · thread T · GROUP``), GPU work a process per device
(``GPU_PID_BASE + device``), a thread per stream; tf's tracks get a process per device
(``TF_PID_BASE + device``). With two ranks or more, every track of rank r goes to process
``RANK_PID_BASE + r`` (one process per rank), each (input pid, tid), GPU stream or tf track of
the rank to its own thread, numbered in first-use order.

Clock: a time t (tf's ns on rank r's clock) is written ``(t - shift[r]) / 1000`` µs, exact to
the ns (``us_expr``). With one rank ``shift[r]`` is the input's time base (Kineto
``baseTimeNanoseconds``, which tf adds to every ``ts``): the file's own clock. In a job it is
the rank's clock offset (``ranks``: how far its clock reads ahead of the job clock) plus one
origin for the job (``document._job_clock``), so all ranks share the job clock.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Final

import orjson
import polars as pl

#: Process of tf's tracks of device d (one rank): far above any OS pid or Kineto device pid.
TF_PID_BASE: Final = 1_000_000_000
#: Process of the GPU work of device d converted from an event table (one rank).
GPU_PID_BASE: Final = 900_000_000
#: Process of rank r (a job).
RANK_PID_BASE: Final = 1_000_000
#: Output times at or beyond this (ns, ~73 minutes) are too large for a viewer's doubles: it
#: reads ``ts`` (µs) as a double and multiplies by 1000, so ns-exact boundaries of touching
#: slices round apart by a ns or more and cross (Perfetto dropped 79 of
#: hta/resnet_v100_ns_resolution's idle slices at epoch µs, 1,956 of
#: hta/ddp_nccl_a100_rank0's at 4.5e12 µs from its baseTimeNanoseconds). tf's slices are then
#: written on whole µs (exact in a double), their exact ns kept in ``args``.
EXACT_LIMIT_NS: Final = 1 << 42
#: Sort index of tf's tracks: before the input's tracks in viewers that read it.
TF_SORT_INDEX: Final = -100


def us_expr(ns: pl.Expr) -> pl.Expr:
    """``model.units.us_text`` of an Int64 column, vectorised (null stays null)."""
    a = ns.abs()
    text = pl.concat_str(
        [(a // 1000).cast(pl.String), pl.lit("."), (a % 1000).cast(pl.String).str.zfill(3)]
    )
    return pl.when(ns < 0).then(pl.lit("-") + text).otherwise(text)


TrackKey = tuple[Any, ...]
#: Host event kinds -> the track group they are drawn in (events converted from the table).
HOST_GROUPS: Final[dict[str, str]] = {
    "cuda_api": "CUDA API",
    "annotation": "NVTX / annotations",
    "os_call": "OS runtime",
    "cpu_op": "operators",
    "python": "python",
    "overhead": "profiler overhead",
    "marker": "markers",
}


@dataclass
class Layout:
    """The (pid, tid) of every track of the output and the clock of each rank (module doc).

    Track keys: ``("host", pid, tid)`` an input thread (or a Kineto file's own GPU track: its
    pid/tid as written), ``("gpu", device, stream)`` GPU work converted from the event table,
    ``("tf", device, k)`` tf's track k of a device."""

    job: bool
    #: input threads split into a track per group of event kinds (events converted from the
    #: table: NVTX ranges and API calls need not nest); False: a thread is one track (a
    #: Kineto file's own events)
    grouped: bool = False
    shift_ns: dict[int, int] = field(default_factory=dict)
    #: tf's slice boundaries are written on this grid (ns): 1000 when the output clock's
    #: times reach ``EXACT_LIMIT_NS``, else 1
    grid_ns: int = 1
    #: a Kineto file's host pid / tid written as strings (PyTorch <= 1.9 writes ``"tid":
    #: "25738"`` on its slices): tf's arrows name the thread the same way (Perfetto keeps
    #: ``"25738"`` and ``25738`` apart)
    text_ids: tuple[bool, bool] = (False, False)
    names: dict[tuple[int, int], str] = field(default_factory=dict)
    sort: dict[tuple[int, int], int] = field(default_factory=dict)
    process_names: dict[int, str] = field(default_factory=dict)
    _tids: dict[tuple[int, TrackKey], int] = field(default_factory=dict)
    _count: dict[int, int] = field(default_factory=dict)

    def pid_tid(self, rank: int, key: TrackKey) -> tuple[Any, Any]:
        """Output (pid, tid) of track ``key`` of ``rank``."""
        if self.job:
            pid = RANK_PID_BASE + rank
            self.process_names.setdefault(pid, f"rank {rank}")
            tid = self._tids.get((rank, key))
            if tid is None:  # numbered per rank, in first-use order
                tid = self._tids[(rank, key)] = self._count.get(rank, 0) + 1
                self._count[rank] = tid
            return pid, tid
        kind, a, b = key[:3]
        if kind == "host":  # as the input wrote them (Kineto's "Spans" process is a string)
            return (str(a) if self.text_ids[0] else a), (str(b) if self.text_ids[1] else b)
        if kind == "thread":  # one OS thread's events of one group: a track of its own
            tid = self._tids.get((0, key))
            if tid is None:
                tid = self._tids[(0, key)] = 2_000_000_000 + len(self._tids)
            return int(a), tid
        if kind == "gpu":
            pid = GPU_PID_BASE + int(a)
            self.process_names.setdefault(pid, f"GPU {a}")
            if len(key) == 3:
                return pid, int(b)
            tid = self._tids.get((0, key))  # a stream's syncs or crossing ranges
            if tid is None:
                tid = self._tids[(0, key)] = 3_000_000_000 + len(self._tids)
            return pid, tid
        pid = TF_PID_BASE + int(a)
        self.process_names.setdefault(pid, f"tf · GPU {a}")
        return pid, int(b) + 1

    def host_key(self, pid: int, tid: int, kind: str) -> TrackKey:
        """Track key of a host event of ``kind`` on thread (pid, tid)."""
        if not self.grouped:
            return ("host", pid, tid)
        return ("thread", pid, tid, HOST_GROUPS.get(kind, "other"))

    def name_track(self, rank: int, key: TrackKey, name: str, *, tf: bool = False) -> None:
        """Name track ``key`` (a job prefixes nothing: the rank is the process); tf's tracks
        sort first."""
        at = self.pid_tid(rank, key)
        self.names.setdefault(at, name)
        if tf:
            self.sort[at] = TF_SORT_INDEX + int(key[2])

    def ts_ns(self, rank: int, ns: int) -> int:
        """Output time (ns on the output clock) of tf time ``ns`` of ``rank``."""
        return ns - self.shift_ns.get(rank, 0)

    def snap(self, ns: pl.Expr) -> pl.Expr:
        """Output times of tf's slice boundaries on ``grid_ns`` (nearest, halves up): both
        ends of a slice are snapped, so slices that touch still touch and none crosses."""
        g = self.grid_ns
        return ns if g == 1 else ((ns + g // 2) // g) * g

    def snap_ns(self, ns: int) -> int:
        """``snap`` of one time."""
        g = self.grid_ns
        return ns if g == 1 else ((ns + g // 2) // g) * g

    def metadata(self) -> list[bytes]:
        """The ``M`` events naming and ordering the processes and threads used."""
        out: list[dict[str, Any]] = []
        for pid, name in sorted(self.process_names.items()):
            out.append(_meta("process_name", pid, 0, {"name": name}))
            if name.startswith("tf"):
                out.append(_meta("process_sort_index", pid, 0, {"sort_index": TF_SORT_INDEX}))
        for (pid, tid), name in sorted(self.names.items(), key=repr):
            out.append(_meta("thread_name", pid, tid, {"name": name}))
        for (pid, tid), index in sorted(self.sort.items(), key=repr):
            out.append(_meta("thread_sort_index", pid, tid, {"sort_index": index}))
        return [orjson.dumps(e) for e in out]


def _meta(name: str, pid: int, tid: int, args: dict[str, Any]) -> dict[str, Any]:
    return {"ph": "M", "name": name, "pid": pid, "tid": tid, "args": args}
