"""Write the annotated trace: the input's own events plus tf's tracks, one Chrome-trace JSON
file (gzip when the name ends in ``.gz``) that Perfetto UI and ``chrome://tracing`` open.

Where the input's events come from (the caller, ``cli``, picks; ``ingest`` reads them):

- ``splice``: one Kineto file, copied byte for byte with tf's events first in its list;
- ``moved``: a job's Kineto rank files, each event moved to its rank's process on the job
  clock (``layout``), every other field unchanged;
- neither: the event table converted (``table``: Nsight Systems, rocprof).

The file is written next to its destination and renamed into place, so a run that fails
leaves no half-written trace.
"""

from __future__ import annotations

import gzip
import os
from collections.abc import Callable, Iterable, Iterator
from pathlib import Path
from typing import IO, Any, BinaryIO, cast

import orjson
import polars as pl

from traceforensics._version import __version__
from traceforensics.analysis.pipeline import Analysis
from traceforensics.report.annotate.layout import EXACT_LIMIT_NS, Layout, TrackKey
from traceforensics.report.annotate.table import table_events
from traceforensics.report.annotate.tracks import tf_tracks
from traceforensics.report.plot_timeline import offset_of

#: Copy the input into ``fh`` with the event blocks given first in its list, and a top key.
Splice = Callable[[BinaryIO, Iterable[bytes], bytes], None]
#: One rank file's events moved: ``(track(pid, tid), shift_ns, flow_id, on_name)`` -> texts.
Moved = Callable[
    [Callable[[Any, Any], tuple[Any, Any]], int, Callable[[Any], Any], Callable[..., None] | None],
    Iterator[bytes],
]


def write_annotated(
    analysis: Analysis,
    pieces: pl.DataFrame,
    out: Path,
    *,
    splice: Splice | None = None,
    moved: dict[int, Moved] | None = None,
    text_ids: tuple[bool, bool] = (False, False),
) -> Layout:
    """Write the annotated trace of ``analysis`` to ``out`` (module docstring); ``pieces``:
    ``analysis.idle.pieces.idle_pieces`` of the same session and options; ``text_ids``: the
    spliced file writes host pids / tids as strings. Returns the layout used (where every
    track went)."""
    ranks = sorted({d.rank for d in analysis.devices} | set(analysis.session.ranks))
    layout = Layout(job=len(ranks) > 1, grouped=splice is None and moved is None)
    base = _bases(analysis)
    clock = _job_clock(analysis, ranks) if layout.job else {}
    # tf's times of rank r are written minus shift_ns[r]; a moved file's own times (tf's
    # minus its base) minus own[r]
    layout.shift_ns = clock or {r: base.get(r, 0) for r in ranks}
    own = {r: clock[r] - base.get(r, 0) for r in clock}
    layout.text_ids = text_ids if splice is not None else (False, False)
    last = max((d.window_start_ns + d.window_ns - layout.shift_ns.get(d.rank, 0)
                for d in analysis.devices), default=0)  # fmt: skip
    layout.grid_ns = 1000 if last >= EXACT_LIMIT_NS else 1
    tmp = out.with_name(f".{out.name}.tf-{os.getpid()}.tmp")

    def blocks() -> Iterator[bytes]:  # the track names last: they are known once all is made
        yield from tf_tracks(analysis, pieces, layout)
        if splice is None:
            yield from (
                _moved(moved, layout, own) if moved else table_events(analysis.session, layout)
            )
        yield from layout.metadata()

    try:
        with _open(tmp, gz=out.name.lower().endswith(".gz")) as fh:
            if splice is not None:
                splice(fh, blocks(), _top(analysis, clock, own))
            else:
                _fresh(fh, blocks(), _top(analysis, clock, own))
        tmp.replace(out)
    finally:
        tmp.unlink(missing_ok=True)
    return layout


def _open(path: Path, *, gz: bool) -> BinaryIO:
    """The output file; gzip by ISA-L's deflate where its wheel installs (level 2: the 40x
    ResNet-50 trace's whole run with --annotate took 12.2-14.2 s against 17.8-18.8 s with zlib
    at level 3, alternating pairs; docs/benchmarks.md), else by zlib at level 3."""
    if not gz:
        return path.open("wb")
    try:
        from isal import igzip
    except ImportError:  # pragma: no cover - a platform without its wheel
        return cast(BinaryIO, gzip.open(path, "wb", compresslevel=3))
    return cast(BinaryIO, cast(Any, igzip).open(path, "wb", compresslevel=2))


def _fresh(fh: IO[bytes], blocks: Iterable[bytes], top: bytes) -> None:
    """A new document: tf's key, then every block of events."""
    fh.write(b"{" + top + b',\n"traceEvents": [\n')
    write_joined(fh, blocks)
    fh.write(b"\n]}\n")


def write_joined(fh: IO[bytes], blocks: Iterable[bytes]) -> bool:
    """Write the non-empty ``blocks`` joined by ``,`` and a newline; whether any was."""
    first = True
    for block in blocks:
        if block:
            fh.write(block if first else b",\n" + block)
            first = False
    return not first


def _moved(moved: dict[int, Moved], layout: Layout, offsets: dict[int, int]) -> Iterator[bytes]:
    """Every rank file's events on its rank's tracks, and the tracks named from the files'
    process and thread names."""
    for rank, events in sorted(moved.items()):
        procs: dict[Any, str] = {}
        threads: dict[tuple[Any, Any], str] = {}
        used: set[tuple[Any, Any]] = set()

        def track(pid: Any, tid: Any, rank: int = rank, used: set[Any] = used) -> tuple[Any, Any]:
            pid, tid = _number(pid), _number(tid)  # "25738" and 25738: one thread
            used.add((pid, tid))
            return layout.pid_tid(rank, _host(pid, tid))

        def name(
            kind: str, pid: Any, tid: Any, text: str, procs: Any = procs, threads: Any = threads
        ) -> None:
            if kind == "process":
                procs[_number(pid)] = text
            else:
                threads[(_number(pid), _number(tid))] = text

        def flow_id(value: Any, rank: int = rank) -> Any:
            if isinstance(value, int) and 0 <= value < 1 << 36:
                return value * 65536 + rank  # unique across ranks, still below 2**53
            return f"{value}@{rank}"

        if not layout.job:  # one rank (a cut file): every event as it was, names included
            yield from events(track, 0, lambda value: value, None)
            continue
        yield from events(track, offsets.get(rank, 0), flow_id, name)
        for pid, tid in sorted(used, key=repr):
            label = f"{procs.get(pid, f'pid {pid}')} / {threads.get((pid, tid), f'thread {tid}')}"
            layout.name_track(rank, _host(pid, tid), label)


def _host(pid: Any, tid: Any) -> TrackKey:
    return ("host", pid, tid)


def _number(value: Any) -> Any:
    """A pid/tid written as a decimal string, as the number (PyTorch wrote both forms in one
    file: ``"tid": "25738"`` on slices, ``25738`` on flows and instants)."""
    if isinstance(value, str) and value.isdigit() and len(value) < 19:
        return int(value)
    return value


def _job_clock(analysis: Analysis, ranks: list[int]) -> dict[int, int]:
    """Per rank of a job, what its tf times lose to land on the output clock (ns): its clock
    offset (ns ahead of the job clock: its first device's, ``ranks``) plus the job's origin.

    The origin is the earliest event of the job on the job clock, floored to a whole second,
    less one second (the input's events tf does not keep, such as the profiler's own span,
    may begin a little earlier: a viewer drops negative times). From there times are small,
    so the viewers' doubles hold them to the ns (at epoch µs their steps are 0.25 µs: nested
    slices moved by a fraction of a µs would cross; Perfetto dropped 474 slices of
    hta/job128_sampled so)."""
    offsets: dict[int, int] = {}
    for (rank, _device), off in sorted(offset_of(analysis).items()):
        offsets.setdefault(rank, off)
    firsts = analysis.session.events.group_by("rank").agg(pl.col("start_ns").min()).rows()
    starts = [int(t) - offsets.get(int(r), 0) for r, t in firsts if t is not None]
    origin = (min(starts) // _SECOND - 1) * _SECOND if starts else 0
    return {r: offsets.get(r, 0) + origin for r in ranks}


_SECOND = 1_000_000_000


def _bases(analysis: Analysis) -> dict[int, int]:
    """Per rank, the time base tf added to the input's own times (Kineto
    ``baseTimeNanoseconds``; 0 for every other input)."""
    files = analysis.session.meta.extra.get("kineto") or {}
    out: dict[int, int] = {}
    for info in files.values():
        if isinstance(info, dict) and info.get("base_time_ns"):
            out[int(info.get("rank", 0))] = int(info["base_time_ns"])
    return out


def _top(analysis: Analysis, clock: dict[int, int], own: dict[int, int]) -> bytes:
    """The ``"traceforensics"`` key: what made the file, how to read its tracks and, for a
    job, the clock: per rank, ns tf's times lost (``shift_ns``: ``ts`` = tf time − it) and
    ns the file's own times lost (``moved_ns``)."""
    value = {
        "version": __version__,
        "tracks": "tf · GPU N: idle by cause (idle: CAUSE slices), steps, finding N: CATEGORY; "
        "flows (cat tf.evidence) from gaps to the host events that explain them",
        "idle_ns": {f"{d.rank}/{d.device}": d.idle_ns for d in analysis.devices},
        "shift_ns": {str(r): ns for r, ns in sorted(clock.items())},
        "moved_ns": {str(r): ns for r, ns in sorted(own.items())},
    }
    return b'"traceforensics": ' + orjson.dumps(value)
