"""The phases of a step: where its GPU busy time and its host time went, by what launched it.

One phase rule for every report (``STEP_PHASES``: ``data_loading``, ``h2d``, ``forward``,
``backward``, ``optimizer``, ``communication``, ``other``); the host breakdown of a trace
without GPU work (``host_steps``) uses the same range classes.

Range classes of host ranges (``annotation`` and ``cpu_op`` rows; never a step range: the
step detector's names, ``ProfilerStep#N``, ``--step-pattern``, "step N"), first that applies::

    data_loading   DataLoader ranges (``BUILTIN_DATA_RE``) and user ranges named by the
                   ``data_patterns`` words (as the idle classifier reads them) that name no
                   pass or module ("nn.Module: BatchNorm2d" is not loading)
    communication  collectives recorded on the host (the idle classifier's communication
                   class: ``is_comm`` rows, NCCL/RCCL/gloo/c10d/record_param_comms names)
    optimizer      ``Optimizer.step#``/``zero_grad`` and ranges saying optimizer
    backward       autograd nodes (``*Backward0``, ``evaluate_function: *``,
                   ``AccumulateGrad``), ranges saying backward
    forward        ranges saying forward, ``nn.Module: *``
    forward        any other operator (``cpu_op``): outside loading, backward and the
                   optimizer, the operators of a step are its forward pass and loss
    other          any other named range (``annotation``: a user range, logging)

GPU ns of a step (``PhaseTime.gpu_ns``): each GPU op has one phase — ``communication`` when
flagged as such, ``h2d`` for a host-to-device copy, else the class of the host ranges open on
its launching thread when the launch call started (by the order above), else, when none is
open there, on any thread of its process (an autograd thread without ranges of its own while
the main thread's NVTX range says backward); ``other`` without a known launch or range. Each
busy ns of the step window goes to the first phase, in ``GPU_ORDER``, among the ops running
then: compute first, then copies, then communication, so ``h2d`` and ``communication`` hold
only the time no compute overlaps (their exposed part)::

    stream 7:  |==fwd==|==bwd==========|==opt==|
    stream 9:        |====nccl====|        |===nccl===|
    gpu_ns:    fwd.... bwd............ opt.... comm.....

Host ns of a step: over the threads that launch the device's work, each ns of the step window
goes to the first class above covering it on any of them, with the launch calls of the step's
host-to-device copies as ``h2d`` (before ``communication``) and those of communication ops as
``communication``; the rest is ``other``. So per step the GPU ns sum to the step's busy ns and
the host ns to its duration, exactly.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Final

import numpy as np
import polars as pl

from traceforensics.analysis import intervals
from traceforensics.analysis.cause_table import CAUSE_INDEX, COMMUNICATION
from traceforensics.analysis.classify import data_regex
from traceforensics.analysis.context import HOST_KINDS, AnalysisContext
from traceforensics.analysis.names import BUILTIN_DATA_RE, OPTIMIZER_RE, matching
from traceforensics.analysis.options import AnalysisOptions
from traceforensics.analysis.steps import GENERIC_STEP_RE
from traceforensics.model.units import I8, I64

#: The phases of a step (``StepStats.phases`` keys, in report order; the JSON contract).
STEP_PHASES: Final[tuple[str, ...]] = (
    "data_loading",
    "h2d",
    "forward",
    "backward",
    "optimizer",
    "communication",
    "other",
)


@dataclass(frozen=True)
class PhaseTime:
    """One phase of one step: GPU busy ns and host ns (the module's rule)."""

    gpu_ns: int
    host_ns: int

    def to_json(self) -> dict[str, int]:
        return {"gpu_ns": self.gpu_ns, "host_ns": self.host_ns}


#: Autograd's nodes (``autograd::engine::evaluate_function: *``, ``AccumulateGrad`` too) and
#: ranges saying backward.
BACKWARD_RE: Final = r"(?i)backward|AccumulateGrad|^autograd::engine::evaluate_function: "
FORWARD_RE: Final = r"(?i)forward|^nn\.Module: "
#: Host kinds holding named ranges and operators.
RANGE_KINDS: Final = ("annotation", "cpu_op")
#: The phase of each range class, in priority order (index = class; ``range_classes``). The
#: ``h2d`` class holds the launch calls of host-to-device copies (added by the caller).
CLASS_PHASE: Final[tuple[str, ...]] = (
    "data_loading",
    "h2d",
    "communication",
    "optimizer",
    "backward",
    "forward",
    "forward",
    "other",
)
H2D_CLASS: Final = CLASS_PHASE.index("h2d")
COMM_CLASS: Final = CLASS_PHASE.index("communication")
#: The GPU phases in the order a busy ns shared by several ops is given (compute first).
GPU_ORDER: Final[tuple[str, ...]] = (
    "data_loading",
    "forward",
    "backward",
    "optimizer",
    "other",
    "h2d",
    "communication",
)


def range_classes(frame: pl.DataFrame, options: AnalysisOptions) -> I8:
    """The range class (index into ``CLASS_PHASE``) of each row of ``frame`` (columns
    ``kind``, ``name``, ``is_comm``); -1 for a step range and for rows of other kinds (API
    calls, Python frames), which are never a phase by themselves. Classified once per distinct
    (kind, name, is_comm), then joined back to the rows."""
    if frame.height == 0:
        return np.zeros(0, np.int8)
    keys = ["kind", "name", "is_comm"]
    # (the key columns keep their dtypes, categorical included: no string per row)
    rows = frame.select("kind", "name", pl.col("is_comm").fill_null(False))
    distinct = rows.unique()
    name, kind = pl.col("name").cast(pl.String), pl.col("kind").cast(pl.String)
    user_range = (kind == "annotation") | (
        (kind == "cpu_op") & ~name.str.contains("::") & ~name.str.contains(r"Backward\d*$")
    )
    named_pass = matching(distinct, FORWARD_RE)
    # a data word in a range that names a pass or a module is not loading ("BatchNorm2d")
    data = matching(distinct, BUILTIN_DATA_RE) | (
        user_range
        & name.str.contains(data_regex(options.idle.data_patterns))
        & ~named_pass
        & ~matching(distinct, BACKWARD_RE)
    )
    steps = matching(distinct, options.steps.marker_re) | matching(distinct, GENERIC_STEP_RE)
    rule = (
        pl.when(~kind.is_in(RANGE_KINDS) | steps)
        .then(-1)
        .when(data)
        .then(0)
        .when(pl.col("is_comm"))
        .then(COMM_CLASS)
        .when(matching(distinct, OPTIMIZER_RE))
        .then(3)
        .when(matching(distinct, BACKWARD_RE))
        .then(4)
        .when(named_pass)
        .then(5)
        .when(kind == "cpu_op")
        .then(6)
        .otherwise(7)
    )
    classes = distinct.with_columns(rule.fill_null(-1).cast(pl.Int8).alias("cls"))
    joined = rows.join(classes, on=keys, how="left", nulls_equal=True, maintain_order="left")
    out: I8 = joined.get_column("cls").fill_null(-1).to_numpy().astype(np.int8)
    return out


def split_by_class(
    starts: I64, ends: I64, cls: I8, order: tuple[int, ...], lo: I64, hi: I64
) -> I64:
    """ns of each window ``[lo[i], hi[i])`` (N) given to each class of ``order`` (N, len(order)):
    class ``order[j]`` holds what the union of classes ``order[:j+1]`` covers beyond the union
    of ``order[:j]`` (so a ns covered by several classes goes to the first); the columns sum to
    the union of every interval of a class in ``order``, clipped to the window."""
    out = np.zeros((lo.size, len(order)), np.int64)
    covered = np.zeros(lo.size, np.int64)
    rank = np.full(128, len(order), np.int64)  # any int8 class; -1 (the last) never taken
    rank[list(order)] = np.arange(len(order))
    pos = rank[cls.astype(np.int64)]  # a class not in ``order`` is never taken
    for j in range(len(order)):
        keep = pos <= j
        us, ue = intervals.union(starts[keep], ends[keep])
        now = intervals.cumulative(us, ue, hi) - intervals.cumulative(us, ue, lo)
        out[:, j] = now - covered
        covered = now
    return out


def step_phases(ctx: AnalysisContext, dev: I64, lo: I64, hi: I64) -> list[dict[str, PhaseTime]]:
    """The phases of each step window (device index ``dev[i]``, ``[lo[i], hi[i])`` ns): one
    dict over ``STEP_PHASES`` per window (see the module's rule)."""
    out: list[dict[str, PhaseTime]] = [{} for _ in range(dev.size)]
    if dev.size == 0:
        return out
    ops = ctx.ops
    host = ctx.host.frame
    # (the host table may have left ``is_comm`` out: its cause says communication the same)
    comm = pl.col("cause") == CAUSE_INDEX[COMMUNICATION]
    hcls = range_classes(host.select("kind", "name", comm.alias("is_comm")), ctx.options)
    hthr = ctx.host.thr
    op_phase = _op_phases(ctx, hcls)
    copy_h2d = _is_h2d(ctx.work)
    gpu_order = tuple(STEP_PHASES.index(p) for p in GPU_ORDER)
    host_order = tuple(range(len(CLASS_PHASE)))
    for g in np.unique(dev).tolist():
        at = np.flatnonzero(dev == g)
        a, b = int(ctx.dev_lo[g]), int(ctx.dev_hi[g])
        gpu = split_by_class(ops.start[a:b], ops.end[a:b], op_phase[a:b], gpu_order, lo[at], hi[at])
        # the host: ranges of the threads that launch this device's work, and its launch calls
        threads = np.unique(ops.thr[a:b])
        threads = threads[threads >= 0]
        mine = np.flatnonzero(np.isin(hthr, threads) & (hcls >= 0))
        calls = np.flatnonzero((ops.thr[a:b] >= 0) & (copy_h2d[a:b] | ops.is_comm[a:b])) + a
        hs = np.concatenate((ctx.host.start[mine], ops.launch_start[calls]))
        he = np.concatenate((ctx.host.end[mine], ops.launch_end[calls]))
        call_cls = np.where(copy_h2d[calls], H2D_CLASS, COMM_CLASS).astype(np.int8)
        hc = np.concatenate((hcls[mine], call_cls))
        by_class = split_by_class(hs, he, hc, host_order, lo[at], hi[at])
        host_ns = {p: np.zeros(at.size, np.int64) for p in STEP_PHASES}
        for k, phase in enumerate(CLASS_PHASE):
            host_ns[phase] += by_class[:, k]
        host_ns["other"] += (hi[at] - lo[at]) - by_class.sum(axis=1)
        for i, row in enumerate(at.tolist()):
            out[row] = {
                p: PhaseTime(int(gpu[i, gpu_order.index(STEP_PHASES.index(p))]), int(host_ns[p][i]))
                for p in STEP_PHASES
            }
    return out


def _is_h2d(work: pl.DataFrame) -> np.ndarray:
    """Host-to-device copies among the GPU ops ``work`` (bool per row)."""
    if "copy_kind" not in work.columns:
        return np.zeros(work.height, bool)
    kinds = work.get_column("copy_kind").cast(pl.String)
    return np.asarray((kinds == "h2d").fill_null(False).to_numpy(), dtype=bool)


def _op_phases(ctx: AnalysisContext, hcls: I8) -> I8:
    """The phase (index into ``STEP_PHASES``) of every GPU op of ``ctx.work``: its flags, else
    the first class covering its launch on its own thread, else on any thread of its process
    (an autograd thread launching while the main thread's NVTX range says backward)."""
    ops = ctx.ops
    phase = np.full(ops.start.size, STEP_PHASES.index("other"), np.int8)
    launched = np.flatnonzero(ops.thr >= 0)
    if launched.size and (hcls >= 0).any():
        left = _classify_launches(ctx.host.thr, ops.thr[launched], ctx, hcls, launched, phase)
        if left.size:  # no range of its own thread: the ranges of its process
            proc = _process_of_thread(ctx)
            _classify_launches(proc[ctx.host.thr], proc[ops.thr[left]], ctx, hcls, left, phase)
    phase[_is_h2d(ctx.work)] = STEP_PHASES.index("h2d")
    phase[ops.is_comm] = STEP_PHASES.index("communication")
    return phase


def _classify_launches(
    host_group: I64, op_group: I64, ctx: AnalysisContext, hcls: I8, rows: I64, phase: I8
) -> I64:
    """Give the ops ``rows`` (launch groups ``op_group``: a thread or a process index) the
    phase of the first class whose ranges of the same group (``host_group`` per host row)
    cover the launch's start; returns the rows none covers."""
    shift, t0 = ctx.shift, ctx.t0_ns
    key = (op_group << shift) | (ctx.ops.launch_start[rows] - t0)
    found = np.zeros(rows.size, bool)
    hkeys_s = (host_group << shift) | (ctx.host.start - t0)
    hkeys_e = (host_group << shift) | (ctx.host.end - t0)
    for k, name in enumerate(CLASS_PHASE):
        if k in (H2D_CLASS, COMM_CLASS):
            continue  # an op's copy or communication flag says these, not its launch
        sel = hcls == k
        if not sel.any():
            continue
        us, ue = intervals.union(hkeys_s[sel], hkeys_e[sel])
        if us.size == 0:  # only zero-length ranges: they cover no launch
            continue
        j = np.searchsorted(us, key, side="right") - 1
        inside = (j >= 0) & (ue[np.maximum(j, 0)] > key) & ~found
        phase[rows[inside]] = STEP_PHASES.index(name)
        found |= inside
    out: I64 = rows[~found]
    return out


def _process_of_thread(ctx: AnalysisContext) -> I64:
    """The process index (dense over (rank, pid)) of every host thread index ``thr`` (threads
    are numbered in (rank, pid, tid) order: ``context.host_rows``)."""
    threads = (
        ctx.session.events.lazy()
        .filter(pl.col("kind").is_in(HOST_KINDS) & pl.col("tid").is_not_null())
        .select("rank", pl.col("pid").fill_null(-1), "tid")
        .unique()
        .sort("rank", "pid", "tid")
        .collect()
    )
    proc = threads.select((pl.struct("rank", "pid").rank("dense") - 1).cast(pl.Int64))
    out: I64 = proc.to_series().to_numpy()
    return out
