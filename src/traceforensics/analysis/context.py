"""The prepared context: everything the passes share, built once per session and options.

``prepare(session, options)`` filters the event table once and derives, with no per-event
Python loops:

- ``work``: every GPU op (kernel, memcpy, memset) sorted by (rank, device, start, end, id),
  with its launch link (``links.launch_links``: one rule for every consumer), its launching
  thread and dispatch start;
- ``busy``: the per-device busy union (``intervals.grouped_union``), and per kind;
- ``windows``: the analysis window of each device (``IdleOptions.window``);
- ``steps``: the step table (``steps.detect_steps``, honouring the step pattern);
- ``host``: host rows classified into causes, as a per-thread timeline (``host_classes``);
- ``tree``: the host op tree (``optree.host_tree``) without its leaves, the launch calls:
  once the launches are linked, no pass reads them (one row per launch call less);
- ``cpu_ops`` and ``args``: the operator rows and the args (shapes, dtypes, sequence numbers)
  the FLOPs model reads.

Passes take the context (``AnalysisContext``) and never recompute any of these.
"""

from __future__ import annotations

from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from functools import cached_property

import numpy as np
import polars as pl

from traceforensics.analysis.busy import DeviceBusy, device_busy
from traceforensics.analysis.classify import launch_part_cause
from traceforensics.analysis.host_classes import (
    HostClasses,
    classify_rows,
    host_classes,
    stream_wait_flags,
)
from traceforensics.analysis.intervals import pack_shift
from traceforensics.analysis.links import launch_links
from traceforensics.analysis.names import matching
from traceforensics.analysis.options import AnalysisOptions
from traceforensics.analysis.optree import TreeIndex, host_tree
from traceforensics.analysis.program import Program, name_counts, program_from
from traceforensics.analysis.restrict import restrict
from traceforensics.analysis.steps import detect_steps
from traceforensics.model.errors import OptionError
from traceforensics.model.memory import nulls_as_constants, release_free_memory
from traceforensics.model.schema import (
    ARG_CONCRETE_INPUTS,
    ARG_INPUT_DIMS,
    ARG_INPUT_TYPE,
    ARG_SEQUENCE,
    BUSY_KINDS,
)
from traceforensics.model.session import TraceSession
from traceforensics.model.units import I8, I64, Mask

#: Kinds whose rows can be step ranges (left out of the trace window: the profiler may leave a
#: step open until it stops).
STEP_RANGE_KINDS = ("annotation", "cpu_op", "gpu_annotation")
#: Args side-table keys the passes read: the FLOPs model's shapes, dtypes and scalar inputs,
#: and the sequence numbers the conv links follow (``kernels.throughput.FLOP_ARG_KEYS``).
ANALYSIS_ARG_KEYS = (ARG_INPUT_DIMS, ARG_INPUT_TYPE, ARG_CONCRETE_INPUTS, ARG_SEQUENCE)
#: ``work`` columns only ``prepare`` reads (the launch linker, the step detector, the busy
#: unions), left out of ``AnalysisContext.work``: 8 bytes per GPU op each (400 MB at 10M GPU
#: ops). The launching thread's pid and tid follow from ``l_thr``
#: (``HostClasses.thread_tid``), an op's device index from ``dev_lo``/``dev_hi`` (or
#: ``device_table``), and its correlation id is read from the event table when shown
#: (``correlations``).
PREPARE_ONLY_COLUMNS = ("pid", "external_id", "correlation", "l_pid", "dev")
#: The first of them, read by the launch linker only: dropped as soon as the links exist; the
#: rest once the step detector and the busy unions have run.
LINKER_ONLY_COLUMNS = PREPARE_ONLY_COLUMNS[:3]
STEP_ONLY_COLUMNS = PREPARE_ONLY_COLUMNS[3:]
#: A GPU op's duration (ns) in ``AnalysisContext.work``, which holds its start and end only (the
#: event table's ``dur_ns`` is ``end_ns - start_ns`` exactly: 80 MB less at 10M GPU ops).
OP_DUR_NS = (pl.col("end_ns") - pl.col("start_ns")).alias("dur_ns")
#: Columns of the prepared host rows that ``host_classes.host_classes`` reads.
HOST_CLASS_COLUMNS = ("event_id", "thr", "kind", "name", "tid", "start_ns", "end_ns")
#: Host kinds that can explain idle time (each host row belongs to one thread).
HOST_KINDS = ("cpu_op", "annotation", "python", "os_call", "cuda_api", "overhead")


@dataclass
class OpTable:
    """GPU work as numpy columns, row i = row i of ``AnalysisContext.work``.

    ``thr``: the launching thread's index (-1: no launch call known); ``launch_start`` /
    ``launch_end``: the launch call (ns); ``launch_cause``: class of the time inside the call;
    ``dispatch_start``: start of the outermost operator enclosing the call (``launch_start`` when
    none); ``wait_ok``: a stream-wait record precedes the launch.
    """

    start: I64
    end: I64
    stream: I64
    is_comm: Mask
    thr: I64
    launch_start: I64
    launch_end: I64
    launch_cause: I8
    dispatch_start: I64
    wait_ok: Mask


@dataclass
class AnalysisContext:
    """One session prepared for every pass (see module docstring). Times are integer ns."""

    session: TraceSession
    options: AnalysisOptions
    t0_ns: int
    shift: int
    devices: list[tuple[int, int]]
    dev_lo: I64
    dev_hi: I64
    work: pl.DataFrame
    ops: OpTable
    host: HostClasses
    tree: pl.DataFrame
    busy: DeviceBusy
    window_lo: I64
    window_hi: I64
    steps: pl.DataFrame
    trace_span: tuple[int, int]
    cpu_ops: pl.DataFrame
    args: pl.DataFrame

    @cached_property
    def name_counts(self) -> pl.DataFrame:
        """Rows per distinct (kind, name) of the session (``program.name_counts``),
        counted once: the program detection reads them, and a rank analysed apart sends them
        on to be summed over the job."""
        return name_counts(self.session)

    @cached_property
    def program(self) -> Program:
        """The program the trace comes from (framework, vendor), detected once."""
        return program_from(self.name_counts, self.session.meta)

    @cached_property
    def tree_index(self) -> TreeIndex:
        """The op tree as positions (``optree.TreeIndex``), built on first use."""
        return TreeIndex.of(self.tree)

    @property
    def device_table(self) -> pl.DataFrame:
        """``rank, device, dev``: each device and its index into ``devices``."""
        return pl.DataFrame(
            {
                "rank": [r for r, _ in self.devices],
                "device": [d for _, d in self.devices],
                "dev": list(range(len(self.devices))),
            },
            schema={"rank": pl.Int32, "device": pl.Int32, "dev": pl.Int64},
        )

    def correlations(self, rows: I64) -> list[int | None]:
        """The correlation id of the GPU ops ``rows`` of ``work`` (-1: None), read from the
        event table in one pass (for the few ops evidence names)."""
        ids = self.work.get_column("event_id").gather(pl.Series(np.maximum(rows, 0)))
        found = dict(
            self.session.events.filter(pl.col("event_id").is_in(ids.implode()))
            .select("event_id", "correlation")
            .iter_rows()
        )
        return [found.get(e) if r >= 0 else None for r, e in zip(rows.tolist(), ids, strict=True)]

    def dev_union(self, g: int) -> tuple[I64, I64]:
        """Busy union of device ``g`` (index into ``devices``)."""
        return self.busy.of(g)

    def __repr__(self) -> str:
        return (
            f"AnalysisContext({len(self.devices)} device(s), {self.work.height} GPU ops, "
            f"{self.host.frame.height} host rows, {self.steps.height} step windows)"
        )


def host_rows(ev: pl.LazyFrame) -> pl.LazyFrame:
    """Host rows that can explain idle time (``ev``: the event table with ``end_ns``), with
    ``thr``: threads numbered in (rank, pid, tid) order. Sorted by (thr, start, -end, event
    id): one sort serves the op tree and the host classes."""
    return (
        ev.filter(pl.col("kind").is_in(HOST_KINDS) & pl.col("tid").is_not_null())
        .select(
            "event_id",
            "rank",
            pl.col("pid").fill_null(-1),
            "tid",
            "kind",
            "name",
            "start_ns",
            "end_ns",
            "correlation",
            "is_comm",
        )
        .with_columns(
            (pl.struct("rank", "pid", "tid").rank("dense") - 1).cast(pl.Int64).alias("thr")
        )
        .sort(["thr", "start_ns", "end_ns", "event_id"], descending=[False, False, True, False])
    )


def _queries(session: TraceSession, window: str) -> dict[str, pl.LazyFrame]:
    """The slices of the event table the context needs, as lazy queries run together."""
    ev = session.events.lazy().with_columns((pl.col("start_ns") + pl.col("dur_ns")).alias("end_ns"))
    kind = pl.col("kind")
    out = {
        "bounds": ev.select(pl.col("start_ns").min(), pl.col("end_ns").max()),
        "host": host_rows(ev),
        "work": ev.filter(kind.is_in(BUSY_KINDS) & pl.col("device").is_not_null()).select(
            "event_id",
            "rank",
            "device",
            "stream",
            "pid",
            "kind",
            "name",
            "start_ns",
            "end_ns",
            "is_comm",
            "correlation",
            "external_id",
            "copy_kind",
            "bytes",
            "src_mem",
            "dst_mem",
        ),
        "calls": ev.filter((kind == "cuda_api") & pl.col("correlation").is_not_null()).select(
            "event_id", "rank", "correlation", "pid", "start_ns", "end_ns", "name"
        ),
        "ext": ev.filter((kind == "cpu_op") & pl.col("external_id").is_not_null())
        .group_by("rank", "external_id")
        .agg(pl.col("event_id").min().alias("ext_op")),
        "waits": ev.filter((kind == "gpu_sync") & pl.col("stream").is_not_null()).select(
            "rank", "device", "stream", "name", "start_ns"
        ),
        "ranges": ev.filter(kind.is_in(["gpu_annotation", "annotation", "cpu_op"])).select(
            "kind", "rank", "device", "pid", "name", "start_ns", "end_ns", "external_id"
        ),
    }
    out["cpu_ops"] = ev.filter(kind == "cpu_op").select("event_id", "rank", "name")
    # the args any rule reads (shapes, dtypes, sequence numbers), out of the whole side table
    out["args"] = session.args.lazy().filter(pl.col("key").is_in(ANALYSIS_ARG_KEYS))
    if window == "trace":
        out["spans"] = (
            ev.filter(kind != "marker")
            .group_by("rank", "name", kind.is_in(STEP_RANGE_KINDS).alias("is_range"))
            .agg(pl.col("start_ns").min(), pl.col("end_ns").max())
        )
    return out


def as_context(
    source: AnalysisContext | TraceSession, options: AnalysisOptions | None
) -> AnalysisContext:
    """The context a pass runs on: ``source`` itself when it is one (``options`` must then be
    None or the options it was prepared with), else ``prepare(source, options)``."""
    if isinstance(source, AnalysisContext):
        if options is not None and options != source.options:
            raise OptionError(
                "this context was prepared with other options; pass the session instead, or "
                "prepare(session, options) first",
                "options",
            )
        return source
    return prepare(source, options)


#: Event rows above which independent steps of the analysis run one after another: each
#: holds hundreds of MB of working set at 3M events, and side by side they peak together
#: (40x ResNet: 1.67 GB side by side, 1.45-1.5 GB one at a time). Below, they share the cores.
SIDE_BY_SIDE_MAX_ROWS = 1_500_000


def side_by_side(rows: int) -> bool:
    """Whether steps of the analysis of a table of ``rows`` events may run concurrently."""
    return rows <= SIDE_BY_SIDE_MAX_ROWS


def prepare(session: TraceSession, options: AnalysisOptions | None = None) -> AnalysisContext:
    """Build the context of ``session`` for ``options`` (defaults when None)."""
    opts = options or AnalysisOptions()
    opts.check()
    r = opts.range  # the part of the trace asked for (``restrict``), before anything else
    session = restrict(session, r.steps, r.start_ns, r.end_ns, opts.steps.pattern)
    queries = _queries(session, opts.idle.window)
    f = dict(zip(queries, pl.collect_all(list(queries.values()), engine="in-memory"), strict=True))
    first, last = f["bounds"].row(0)
    t0 = int(first or 0)
    trace_span = (t0, int(last or 0))
    host = f.pop("host")
    shift = pack_shift(trace_span[1] - t0 + 1, max(host.get_column("thr").n_unique(), 1))
    # the host rows are classified on a second thread while the GPU side is linked (on a
    # big table one after the other, ``side_by_side``); the blocking-copy rule needs the
    # links, so it runs once they exist
    together = side_by_side(session.events.height)
    with ThreadPoolExecutor(max_workers=1) as pool:
        rows_f = pool.submit(classify_rows, host, opts.idle.data_patterns, opts.steps.marker_re)
        if not together:
            rows_f.result()
        tree = host_tree(host)
        if not together:
            # classified and in the tree: the host classes read these columns only (21 bytes
            # per host row less while the links are joined)
            host = host.select(HOST_CLASS_COLUMNS)
            # the tree's lifting tables (~150 MB at 1.4M ranges), before the links
            release_free_memory()
        work = _gpu_work(f.pop("work"), f.pop("calls"), f.pop("ext"), tree)  # not needed again
        blocking = work.filter(
            (pl.col("copy_kind") == "d2h") & pl.col("api_id").is_not_null()
        ).get_column("api_id")
        # linked: what only the linker read goes before the busy unions and the steps, the
        # launch calls of the tree (leaves, never a parent) with them
        work = work.drop(LINKER_ONLY_COLUMNS)
        tree = tree.filter(pl.col("kind") != "cuda_api")
        classes_f = (
            pool.submit(
                lambda: host_classes(host, rows_f.result(), blocking, t0_ns=t0, shift=shift)
            )
            if together
            else None
        )
        gpu = _gpu_side(f, tree, work, opts, t0, trace_span)
        del work, tree  # held by ``gpu`` now
        f.pop("ranges")  # the step ranges, used by the step detector only
        # what only the step detector and the busy unions read goes before the host classes
        # are built
        dev = np.asarray(gpu.work.get_column("dev").to_numpy(), dtype=np.int64)
        n = np.arange(len(gpu.devices))
        dev_lo = np.searchsorted(dev, n, side="left").astype(np.int64)
        dev_hi = np.searchsorted(dev, n, side="right").astype(np.int64)
        del dev
        gpu.work = nulls_as_constants(gpu.work.drop(STEP_ONLY_COLUMNS))
        if classes_f is None:  # one at a time: the GPU side's working set is gone now
            release_free_memory()
            classes = host_classes(host, rows_f.result(), blocking, t0_ns=t0, shift=shift)
        else:
            classes = classes_f.result()
    ops = _op_table(gpu.work, classes, f["waits"], t0, shift)
    # the intermediate frames and arrays are garbage now; glibc keeps their pages (its mmap
    # threshold grows with use) unless asked: ~380 MB at 3M events, before the passes peak
    release_free_memory()
    return AnalysisContext(
        session=session,
        options=opts,
        t0_ns=t0,
        shift=shift,
        devices=gpu.devices,
        dev_lo=dev_lo,
        dev_hi=dev_hi,
        work=gpu.work,
        ops=ops,
        host=classes,
        tree=gpu.tree,
        busy=gpu.busy,
        window_lo=gpu.window_lo,
        window_hi=gpu.window_hi,
        steps=gpu.steps,
        trace_span=trace_span,
        cpu_ops=f["cpu_ops"],
        args=f["args"],
    )


@dataclass
class _GpuSide:
    """What ``prepare`` derives from the GPU ops while the host rows are being classified."""

    tree: pl.DataFrame
    work: pl.DataFrame
    devices: list[tuple[int, int]]
    busy: DeviceBusy
    window_lo: I64
    window_hi: I64
    steps: pl.DataFrame


def _gpu_side(
    f: dict[str, pl.DataFrame],
    tree: pl.DataFrame,
    work: pl.DataFrame,
    opts: AnalysisOptions,
    t0: int,
    trace_span: tuple[int, int],
) -> _GpuSide:
    """Devices, busy unions, windows and the step table of the linked GPU ops ``work``."""
    devices_df = work.select("rank", "device", "dev").unique("dev").sort("dev")
    devices = [(int(r), int(d)) for r, d, _ in devices_df.iter_rows()]
    busy = device_busy(work, len(devices), t0, trace_span[1] - t0 + 1)
    lo, hi = _windows(f.get("spans"), devices, busy, opts.steps.marker_re)
    # a query: only host step ranges need it (40 bytes per GPU op when collected)
    launched = (
        work.lazy()
        .filter(pl.col("l_thr").is_not_null())
        .select("rank", "device", "l_pid", "launch_start_ns", "start_ns", "end_ns")
    )
    steps = detect_steps(f["ranges"], launched, devices_df, opts.steps.pattern, opts.steps.window)
    return _GpuSide(tree, work, devices, busy, lo, hi, steps)


def _gpu_work(
    work: pl.DataFrame, calls: pl.DataFrame, ext: pl.DataFrame, tree: pl.DataFrame
) -> pl.DataFrame:
    """GPU ops with their launch link, launching thread (``l_thr``) and device index ``dev``,
    sorted by (rank, device, start, end, event id)."""
    work = launch_links(work, calls, ext, tree).sort(
        "rank", "device", "start_ns", "end_ns", "event_id"
    )
    # sorted by (rank, device): a device's index counts the changes of the pair so far (a
    # dense rank of the pair would hash every row again)
    new_device = pl.col("rank").ne_missing(pl.col("rank").shift()) | pl.col("device").ne_missing(
        pl.col("device").shift()
    )
    return work.with_columns((new_device.cum_sum() - 1).cast(pl.Int64).alias("dev"))


def _op_table(
    work: pl.DataFrame, classes: HostClasses, waits: pl.DataFrame, t0: int, shift: int
) -> OpTable:
    def col(name: str, fill: int = 0) -> I64:
        # a view of the column when it is int64 without nulls (4-8 of these at 8 bytes per
        # GPU op: ~300 MB at 10M kernels if copied); read-only, the passes never write them
        column = work.get_column(name)
        if column.null_count():  # (a fill copies the column even when it holds no null)
            column = column.fill_null(fill)
        return np.asarray(column.to_numpy(), dtype=np.int64)

    thr, start, end = col("l_thr", -1), col("launch_start_ns"), col("launch_end_ns")
    return OpTable(
        start=col("start_ns"),
        end=col("end_ns"),
        stream=col("stream", -1),
        is_comm=work.get_column("is_comm").fill_null(False).to_numpy().astype(bool),
        thr=thr,
        launch_start=start,
        launch_end=end,
        launch_cause=launch_part_cause(work.get_column("l_name"), end - start),
        dispatch_start=classes.dispatch_start(thr, start, t0, shift),
        wait_ok=stream_wait_flags(work, waits).to_numpy().astype(bool),
    )


def _windows(
    spans: pl.DataFrame | None, devices: list[tuple[int, int]], busy: DeviceBusy, marker_re: str
) -> tuple[I64, I64]:
    """Analysis window per device: first to last GPU work (``device``: ``spans`` is None), or
    the rank's first to last recorded interval, instant markers and step ranges excluded
    (``trace``: ``spans`` holds each (rank, name, is_range)'s first start and last end; only
    ranges can be step markers, never GPU work). A device whose
    work all has zero length has an empty window at its first op."""
    lo, hi = busy.first_start.copy(), busy.first_start.copy()
    has = busy.has_work()
    lo[has], hi[has] = busy.span_lo[has], busy.span_hi[has]
    if spans is None or not devices:
        return lo, hi
    per_rank = (
        spans.filter(~(pl.col("is_range") & matching(spans, marker_re)))
        .group_by("rank")
        .agg(pl.col("start_ns").min(), pl.col("end_ns").max())
    )
    rank_span = {int(r): (int(a), int(b)) for r, a, b in per_rank.iter_rows()}
    for g, (rank, _device) in enumerate(devices):
        if rank in rank_span:
            lo[g], hi[g] = rank_span[rank]
        elif not has[g]:  # nothing recorded on the rank but zero-length work
            lo[g], hi[g] = 0, 0
    return lo, hi
