"""Analyse part of a trace: some steps (``--steps 3:``) or a time range (``--from``/``--to``).

The session is cut before the context is prepared, so every pass, every device record and every
finding describes only that part (and a pass called alone cuts it the same way).

Rules (integer ns, per rank):

- ``steps`` ``A:B`` (``A:``, ``:B``, ``A``; inclusive, by step number = the last integer of the
  step range's name, as the step detector numbers them): the rank's host step ranges
  (``steps.first_step_ranges``: the step pattern, else ``ProfilerStep#N``, else ranges named
  like steps) with a number in the range; the part kept is ``[first selected start, last
  selected end)``;
- ``start_ns``/``end_ns``: offsets from the session's first event;
- both: the intersection. Events overlapping the part are kept, clipped to it::

      trace:    |--step 1--|--step 2--|--step 3--|--step 4--|
      --steps 3:                      [ kept ........................)
      event:                      [=====]          -> [=]  (clipped at the start)

GPU work a selected step queued that runs past the last step's host end is cut there.
"""

from __future__ import annotations

import polars as pl

from traceforensics.analysis.options import StepRange
from traceforensics.analysis.steps import first_step_ranges, step_number
from traceforensics.model.errors import OptionError
from traceforensics.model.session import TraceSession


def restrict(
    session: TraceSession,
    steps: str | None,
    start_ns: int | None,
    end_ns: int | None,
    pattern: str | None = None,
) -> TraceSession:
    """``session`` cut to the part the options select (itself when they select everything)."""
    if steps is None and start_ns is None and end_ns is None:
        return session
    ev = session.events
    parts = _step_parts(ev, StepRange.parse(steps), pattern) if steps else None
    if start_ns is not None or end_ns is not None:
        t0 = int(ev.get_column("start_ns").min() or 0)  # type: ignore[arg-type]
        lo = t0 + (start_ns or 0)
        hi = t0 + end_ns if end_ns is not None else 2**62
        time = pl.DataFrame({"lo": [lo], "hi": [hi]})
        ranks = ev.select("rank").unique()
        whole = ranks.join(time, how="cross")
        parts = whole if parts is None else _intersect(parts, whole)
    assert parts is not None
    kept = (
        ev.join(parts, on="rank", how="inner")
        .with_columns((pl.col("start_ns") + pl.col("dur_ns")).alias("_end"))
        .filter(
            (pl.col("_end") > pl.col("lo")) & (pl.col("start_ns") < pl.col("hi"))
            | ((pl.col("dur_ns") == 0) & pl.col("start_ns").is_between("lo", "hi", closed="left"))
        )
        .with_columns(pl.max_horizontal("start_ns", "lo").alias("start_ns"))
        .with_columns(
            (pl.min_horizontal("_end", "hi") - pl.col("start_ns")).clip(0).alias("dur_ns")
        )
        .select(ev.columns)
    )
    if kept.height == 0:
        raise OptionError(
            f"{_what(steps, start_ns, end_ns)} selects no event of the trace; pick a part "
            "inside it",
            "steps" if steps else "start_ns",
        )
    ids = kept.get_column("event_id")
    args = session.args.filter(pl.col("event_id").is_in(ids.implode()))
    return TraceSession.from_frames(kept, session.meta, args)


def _what(steps: str | None, start_ns: int | None, end_ns: int | None) -> str:
    bits = [f"steps {steps}"] if steps else []
    if start_ns is not None or end_ns is not None:
        bits.append(f"time {start_ns or 0}..{'' if end_ns is None else end_ns} ns")
    return " and ".join(bits)


def _intersect(a: pl.DataFrame, b: pl.DataFrame) -> pl.DataFrame:
    both = a.join(b, on="rank", how="inner", suffix="_b")
    return both.select(
        "rank",
        pl.max_horizontal("lo", "lo_b").alias("lo"),
        pl.min_horizontal("hi", "hi_b").alias("hi"),
    ).filter(pl.col("hi") > pl.col("lo"))


def _step_parts(ev: pl.DataFrame, sel: StepRange, pattern: str | None) -> pl.DataFrame:
    """Per rank ``[lo, hi)`` of the selected host step ranges (the detector's sources, first
    that has steps per rank)."""
    host = ev.filter(pl.col("kind").cast(pl.String).is_in(["annotation", "cpu_op"]))
    found = first_step_ranges(host, pattern).select(
        pl.col("rank").cast(pl.Int32),
        step_number(pl.col("name").cast(pl.String)).alias("number"),
        pl.col("start_ns").alias("s"),
        (pl.col("start_ns") + pl.col("dur_ns")).alias("e"),
    )
    # only numbered ranges can be selected by number (``ProfilerStep#N`` always are)
    found = found.drop_nulls("number")
    if found.height == 0:
        raise OptionError(
            "steps: the trace has no step ranges (ProfilerStep#N or ranges named like steps); "
            "pass --from/--to instead",
            "steps",
        )
    lo = pl.lit(sel.first) if sel.first is not None else pl.lit(None, pl.Int64)
    hi = pl.lit(sel.last) if sel.last is not None else pl.lit(None, pl.Int64)
    pick = found.filter(
        (pl.col("number") >= lo).fill_null(True) & (pl.col("number") <= hi).fill_null(True)
    )
    if pick.height == 0:
        nums = found.get_column("number").to_list()
        raise OptionError(
            f"steps {_shown(sel.first)}:{_shown(sel.last)}: no step in that range; the trace "
            "has steps "
            f"{min(nums)} to {max(nums)}",
            "steps",
        )
    return pick.group_by("rank").agg(pl.col("s").min().alias("lo"), pl.col("e").max().alias("hi"))


def _shown(bound: int | None) -> str:
    """A range bound as typed: an open end is empty (``99:``, not ``99:None``)."""
    return "" if bound is None else str(bound)
