"""One-off vs steady state, read from the trace's own structure: which parts of each device's
analysis window happen once per run (set-up, warm-up, wind-down) rather than every step.

A device's one-off windows (ns, trace clock, clipped to its analysis window) are the union of:

1. **set-up ranges**: host ranges (``annotation``: NVTX / ``record_function``; ``cpu_op`` that
   are not ``ns::op`` operators) whose name carries a sign of set-up (``SETUP_RE``, the one list:
   init / initialise / setup, warm-up / warmup, compile / compilation, restore, load of a
   model / checkpoint / weights / state_dict, ``torch.load``, ``from_pretrained``,
   ``model.to``), on the device's rank. A range's device span runs from its start to the later
   of its end and the end of the last GPU op of the device launched while it was open. A range
   that reaches the device's last GPU work is not set-up (it wraps the run: no steady state
   follows it);
2. **the lead-in**: from the window's start to the device's first kernel (or collective), when it
   lasts at least ``LEAD_IN_MIN_NS``: start-up copies, context creation, a first ``cudaFree``,
   imports; a steady loop does not wait a second for its first kernel;
3. with steps (``AnalysisContext.steps``): **before the first step** and **after the last**;
   **warm-up steps**: a step named with a set-up sign (``Warm-up Step 1``), and the device's
   first step when it has at least ``WARMUP_MIN_STEPS`` steps and lasts more than
   ``WARMUP_STEP_FACTOR`` times the median of the others (worker start-up of a multiprocess
   DataLoader, autotuning, lazy module loading)::

       window:   [lead-in..|init_model....)|=step 1 (slow)=|=step 2=|=step 3=|..wind-down..)
       one-off:  [.............................................)            [.............)
       steady:                                              [=step 2=|=step 3=)

Idle, copies and kernels inside them happen once per run: they are reported apart (the
``one_off`` finding, naming each window) and never as a change to the steady state.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Final

import numpy as np
import polars as pl

from traceforensics.analysis.busy import COMMUNICATION, KERNEL
from traceforensics.analysis.context import AnalysisContext
from traceforensics.analysis.intervals import union
from traceforensics.analysis.names import matching
from traceforensics.model.units import I64

#: Signs of one-off set-up in a range's name (case-insensitive, whole words: ``init_model``,
#: ``warmup``, ``Warm-up Step 1``, ``load_checkpoint``, ``model.to``; not ``Torch-Compiled
#: Region`` nor ``CompiledFunction``, which run every step).
SETUP_RE: Final = (
    r"(?i)(^|[^a-z])("
    r"init|initiali[sz]e|initiali[sz]ation|initiali[sz]ing|setup|set[_ -]up"
    r"|warm[_ -]?up|warming[_ -]up|compile|compilation|restore|restoring"
    r"|load(ing)?[_ ]?(the[_ ])?(model|checkpoint|ckpt|weights|state_dict|pretrained)"
    r"|(model|checkpoint|ckpt|weights|state_dict)[_ ]?load(ing)?"
    r"|torch\.load|from_pretrained|model\.to"
    r")([^a-z]|$)"
)
#: A lead-in (window start to the first kernel) at least this long is one-off start-up.
LEAD_IN_MIN_NS: Final = 1_000_000_000
#: The first step is warm-up when it lasts more than this many times the median other step...
WARMUP_STEP_FACTOR: Final = 3.0
#: ...and the device has at least this many steps (a median of two or more others).
WARMUP_MIN_STEPS: Final = 3
#: Labels of the structural windows (``OneOffSpan.label``); set-up ranges carry their name.
LEAD_IN: Final = "lead-in before the first kernel"
BEFORE_STEPS: Final = "before the first step"
AFTER_STEPS: Final = "after the last step"
WARMUP_STEP: Final = "warm-up step"
_RANGE_KINDS: Final = ("annotation", "cpu_op")


@dataclass(frozen=True)
class OneOffSpan:
    """One one-off window of a device (ns, clipped to its analysis window); ``label``: the
    set-up range's name, or one of ``LEAD_IN``, ``BEFORE_STEPS``, ``AFTER_STEPS``,
    ``WARMUP_STEP`` (with the step's name)."""

    label: str
    start_ns: int
    end_ns: int


@dataclass(frozen=True)
class OneOffWindows:
    """The one-off windows of one device: ``spans`` as found (may overlap), ``lo``/``hi`` their
    disjoint sorted union."""

    spans: list[OneOffSpan]
    lo: I64
    hi: I64


def one_off_windows(ctx: AnalysisContext, g: int) -> OneOffWindows:
    """The one-off windows of device ``g`` (index into ``ctx.devices``), computed once per
    context (the transfer and the steady-state rules both read them)."""
    cache: dict[int, OneOffWindows] = vars(ctx).setdefault("_one_off_windows", {})
    if g not in cache:
        cache[g] = _windows(ctx, g, _setup_ranges(ctx))
    return cache[g]


def _setup_ranges(ctx: AnalysisContext) -> pl.DataFrame:
    """The set-up ranges of the session (``rank, name, start_ns, end_ns``), read once."""
    got: pl.DataFrame | None = vars(ctx).get("_setup_ranges")
    if got is not None:
        return got
    ev = ctx.session.events
    kind = pl.col("kind").cast(pl.String)
    rows = ev.filter(
        kind.is_in(_RANGE_KINDS)
        & matching(ev, SETUP_RE)
        & ~pl.col("name").cast(pl.String).str.contains("::", literal=True)
    ).select(
        "rank",
        pl.col("name").cast(pl.String),
        "start_ns",
        (pl.col("start_ns") + pl.col("dur_ns").clip(0)).alias("end_ns"),
    )
    vars(ctx)["_setup_ranges"] = rows
    return rows


def _windows(ctx: AnalysisContext, g: int, setup: pl.DataFrame) -> OneOffWindows:
    rank, _device = ctx.devices[g]
    w_lo, w_hi = int(ctx.window_lo[g]), int(ctx.window_hi[g])
    last_work = _last_work(ctx, g)
    mine = setup.filter(pl.col("rank") == rank)
    starts = mine.get_column("start_ns").to_numpy().astype(np.int64)
    ends = np.maximum(mine.get_column("end_ns").to_numpy().astype(np.int64), starts)
    ends = np.maximum(ends, _launched_ends(ctx, g, starts, ends))
    # a range reaching the last GPU work wraps the run: no steady state follows it
    spans = [
        OneOffSpan(str(n), int(s), int(e))
        for n, s, e in zip(mine.get_column("name").to_list(), starts, ends, strict=True)
        if e < last_work
    ]
    first = _first_compute(ctx, g)
    if first is not None and first - w_lo >= LEAD_IN_MIN_NS:
        spans.append(OneOffSpan(LEAD_IN, w_lo, first))
    spans += _step_spans(ctx, g, w_lo, w_hi)
    kept = [
        OneOffSpan(sp.label, max(sp.start_ns, w_lo), min(sp.end_ns, w_hi))
        for sp in spans
        if min(sp.end_ns, w_hi) > max(sp.start_ns, w_lo)
    ]
    kept.sort(key=lambda sp: (sp.start_ns, sp.end_ns, sp.label))
    lo, hi = union(
        np.array([sp.start_ns for sp in kept], dtype=np.int64),
        np.array([sp.end_ns for sp in kept], dtype=np.int64),
    )
    return OneOffWindows(kept, lo, hi)


def _step_spans(ctx: AnalysisContext, g: int, w_lo: int, w_hi: int) -> list[OneOffSpan]:
    """The warm-up steps of device ``g``, and the time before the first and after the last of
    its other steps (none when every step is warm-up: the steady state is then what no set-up
    range holds)."""
    st = ctx.steps.filter(pl.col("dev") == g).sort("start_ns")
    if st.height == 0:
        return []
    starts = st.get_column("start_ns").to_numpy().astype(np.int64)
    ends = st.get_column("end_ns").to_numpy().astype(np.int64)
    names = st.get_column("name").cast(pl.String).to_list()
    warm = st.select(matching(st, SETUP_RE)).to_series().to_numpy().copy()
    dur = ends - starts
    if dur.size >= WARMUP_MIN_STEPS and dur[0] > WARMUP_STEP_FACTOR * float(np.median(dur[1:])):
        warm[0] = True
    out = [
        OneOffSpan(f"{WARMUP_STEP} {names[i]}", int(starts[i]), int(ends[i]))
        for i in np.flatnonzero(warm)
    ]
    if (~warm).any():
        out.append(OneOffSpan(BEFORE_STEPS, w_lo, int(starts[~warm].min())))
        out.append(OneOffSpan(AFTER_STEPS, int(ends[~warm].max()), w_hi))
    return out


def _first_compute(ctx: AnalysisContext, g: int) -> int | None:
    """Start (ns) of the device's first kernel or collective; None without any."""
    firsts = [
        int(s[0]) for s, _ in (ctx.busy.kind(g, c) for c in (KERNEL, COMMUNICATION)) if s.size
    ]
    return min(firsts) if firsts else None


def _last_work(ctx: AnalysisContext, g: int) -> int:
    """End (ns) of the device's last GPU work (its window's end without any)."""
    _, e = ctx.dev_union(g)
    return int(e[-1]) if e.size else int(ctx.window_hi[g])


def _launched_ends(ctx: AnalysisContext, g: int, s: I64, e: I64) -> I64:
    """Per range ``[s[k], e[k])``: the end (ns) of the last GPU op of device ``g`` launched
    inside it; ``e[k]`` when none. One sort and one ``maximum.reduceat`` for all ranges."""
    a, b = int(ctx.dev_lo[g]), int(ctx.dev_hi[g])
    if s.size == 0 or b <= a:
        return e
    launch = ctx.ops.launch_start[a:b]
    order = np.argsort(launch, kind="stable")
    at = launch[order]
    # a sentinel row so that every slice bound (up to the row count) is a valid index
    op_end = np.append(ctx.ops.end[a:b][order], np.iinfo(np.int64).min)
    lo = np.searchsorted(at, s, side="left")
    hi = np.searchsorted(at, e, side="left")
    # reduceat over interleaved bounds: element 2k is the max over rows [lo[k], hi[k])
    maxes = np.maximum.reduceat(op_end, np.ravel(np.column_stack((lo, hi))))[::2]
    out: I64 = np.where(hi > lo, maxes, e)
    return out
