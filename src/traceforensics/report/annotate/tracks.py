"""tf's tracks of the annotated trace, per device: idle by cause, steps, one per finding, and
flow arrows from gaps to the host events that explain them.

    tf · GPU 0
      idle by cause   [idle: data_loading][idle: launch_overhead]   [idle: host_sync]
      steps           [ProfilerStep#3 ........................][ProfilerStep#4 .........
      finding 1: ...  [data_loading]                 [data_loading]
    python 25738      ......[enumerate(DataLoader)#__next__]....       <- flow from the gap

- idle: one slice per piece of ``analysis.idle.pieces`` (a gap's time of one cause, placed
  where the attribution rule puts it), named ``idle: CAUSE``; ``args``: ``cause``,
  ``start_ns``/``dur_ns`` (tf's clock, exact: the pieces of a device sum per cause to its
  ``idle_by_cause``), ``gap_start_ns``; ``cname``: the cause's colour (``cnames``).
- steps: the device's steps (``idle.steps``) with busy, idle by cause and exposed comm in
  ``args``; overlapping steps go to further ``steps`` tracks.
- findings: for each finding of the device, in report order, a track ``finding N: CATEGORY``
  with a slice over every interval it covers (``coverage``); ``args``: title, remedy,
  recoverable_ns, share_of_window, confidence.
- flows (``cat`` ``tf.evidence``): for every gap with evidence (the largest gaps and one
  example per cause), an arrow between each host event of the evidence and the gap's piece
  of the evidence's cause (else its first piece), always forward in time (Perfetto and the
  Chrome viewer drop an arrow whose end is earlier than its start): from the event's start
  into the piece (``ph: s`` on the event's thread, ``ph: f`` with ``bp: e`` at
  ``max(piece start, event start)``) when the event began by the piece's end, else from the
  piece's middle to the event's start. Evidence the event table does not hold as a host row
  is left without an arrow.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any, Final

import orjson
import polars as pl

from traceforensics.analysis.findings.results import Finding
from traceforensics.analysis.idle.results import Gap
from traceforensics.analysis.pipeline import Analysis
from traceforensics.report.annotate.cnames import CAUSE_CNAME
from traceforensics.report.annotate.coverage import covered
from traceforensics.report.annotate.layout import Layout
from traceforensics.report.annotate.lines import event_lines
from traceforensics.report.lanes import device_lanes

#: First id of tf's flow arrows: far from the input's own flow ids (CUPTI correlation ids).
FLOW_ID_BASE: Final = 1 << 52
_HOST_KINDS: Final = ("cuda_api", "cpu_op", "annotation", "python", "os_call", "overhead")


def tf_tracks(analysis: Analysis, pieces: pl.DataFrame, layout: Layout) -> Iterator[bytes]:
    """tf's events of every device (module docstring), as JSON text blocks, made as they are
    written (a block of ``lines.BLOCK_ROWS`` events at a time)."""
    for lanes in device_lanes(analysis):
        r, d, zero = lanes.rank, lanes.device, layout.ts_ns(lanes.rank, 0)
        mine = pieces.filter((pl.col("rank") == r) & (pl.col("device") == d))
        track = _Tracks(layout, r, d)
        yield from event_lines(_idle(mine, track.at(0, "idle by cause"), zero, layout))
        del mine
        steps = [s for s in analysis.idle.steps if (s.rank, s.device) == (r, d)]
        yield from event_lines(_steps(steps, track, zero, layout))
        for n, f in enumerate(analysis.findings, start=1):
            if (f.rank, f.device) == (r, d):
                s, e = covered(analysis, f, lanes, pieces)
                at = track.next(f"finding {n}: {f.category}")
                yield from event_lines(_slices(at, s, e - s, zero, layout, f.category, _about(f)))
    yield from _flows(analysis, pieces, layout)


def _about(f: Finding) -> dict[str, Any]:
    """The ``args`` of a finding's slices (their own start and length added)."""
    return {
        "category": f.category,
        "rank": f.rank,
        "device": f.device,
        "title": f.title,
        "remedy": f.remedy,
        "recoverable_ns": f.recoverable_ns,
        "share_of_window": round(f.share_of_window, 6),
        "confidence": f.confidence,
    }


class _Tracks:
    """tf's track numbers of one device, in order of use."""

    def __init__(self, layout: Layout, rank: int, device: int) -> None:
        self.layout, self.rank, self.device, self.count = layout, rank, device, 0

    def at(self, k: int, name: str) -> tuple[int, int]:
        key = ("tf", self.device, k)
        label = f"tf · GPU {self.device} · {name}" if self.layout.job else name
        self.layout.name_track(self.rank, key, label, tf=True)
        self.count = max(self.count, k + 1)
        return self.layout.pid_tid(self.rank, key)

    def next(self, name: str) -> tuple[int, int]:
        return self.at(self.count, name)


def _span(zero: int, layout: Layout) -> list[pl.Expr]:
    """``ts_ns`` and ``dur_ns`` of slices ``[start_ns, start_ns + dur_ns)`` (tf ns) on the
    output clock (``zero``: the output time of tf's time 0), on the layout's grid."""
    start = layout.snap(pl.col("start_ns") + zero)
    end = layout.snap(pl.col("start_ns") + pl.col("dur_ns") + zero)
    return [start.alias("ts_ns"), (end - start).alias("dur_ns")]


def _idle(mine: pl.DataFrame, at: tuple[Any, Any], zero: int, layout: Layout) -> pl.DataFrame:
    """The idle slices of one device (``zero``: the output time of tf's time 0)."""
    return mine.select(
        pl.lit("X").alias("ph"),
        pl.lit(at[0], pl.Int64).alias("pid"),
        pl.lit(at[1], pl.Int64).alias("tid"),
        *_span(zero, layout),
        (pl.lit("idle: ") + pl.col("cause")).alias("name"),
        pl.lit("tf.idle").alias("cat"),
        pl.col("cause").replace_strict(CAUSE_CNAME, default=None).alias("cname"),
        pl.struct("cause", "rank", "device", "start_ns", "dur_ns", "gap_start_ns").alias("args"),
    )


def _slices(
    at: tuple[Any, Any],
    start: Any,
    dur: Any,
    zero: int,
    layout: Layout,
    name: str,
    args: dict[str, Any],
) -> pl.DataFrame:
    """Slices ``[start, start + dur)`` (tf ns) on track ``at``, all with ``name`` and ``args``
    (plus their own ``start_ns``/``dur_ns``)."""
    frame = pl.DataFrame(
        {"start_ns": start, "dur_ns": dur}, schema={"start_ns": pl.Int64, "dur_ns": pl.Int64}
    )
    fixed = pl.struct(*[pl.lit(v).alias(k) for k, v in args.items()], "start_ns", "dur_ns")
    return frame.select(
        pl.lit("X").alias("ph"),
        pl.lit(at[0], pl.Int64).alias("pid"),
        pl.lit(at[1], pl.Int64).alias("tid"),
        *_span(zero, layout),
        pl.lit(name).alias("name"),
        pl.lit("tf.finding").alias("cat"),
        fixed.alias("args"),
    )


def _steps(steps: list[Any], track: _Tracks, zero: int, layout: Layout) -> pl.DataFrame:
    """The step slices of one device; a step overlapping the previous one on a track goes to
    the next ``steps`` track (greedy: the first track free at its start)."""
    frames: list[pl.DataFrame] = []
    ends: list[int] = []  # end of the last step on each steps track
    ats: list[tuple[int, int]] = []
    for s in sorted(steps, key=lambda s: (s.start_ns, s.dur_ns)):
        lane = next((i for i, end in enumerate(ends) if end <= s.start_ns), None)
        if lane is None:
            lane = len(ends)
            ends.append(0)
            ats.append(track.next("steps" if lane == 0 else f"steps ({lane + 1})"))
        ends[lane] = s.start_ns + s.dur_ns
        busy = {k: v for k, v in s.idle_by_cause.items() if v}
        frames.append(
            _slices(
                ats[lane],
                [s.start_ns],
                [s.dur_ns],
                zero,
                layout,
                s.name,
                {
                    "busy_ns": s.busy_ns,
                    "idle_ns": s.idle_ns,
                    "exposed_comm_ns": s.exposed_comm_ns,
                    "idle_by_cause": _pairs(busy),
                },
            ).with_columns(pl.lit("tf.step").alias("cat"))
        )
    return pl.concat(frames) if frames else pl.DataFrame()


def _pairs(value: dict[str, int]) -> str:
    """A small dict as compact text (one ``args`` field of a fixed type for every step)."""
    return ", ".join(f"{k}={v}" for k, v in value.items()) or "none"


def _flows(analysis: Analysis, pieces: pl.DataFrame, layout: Layout) -> Iterator[bytes]:
    """The flow arrows of every gap with evidence (module docstring)."""
    gaps: list[Gap] = [*analysis.idle.gaps, *analysis.idle.examples]
    rows: list[dict[str, Any]] = []
    for g in gaps:
        for e in g.evidence:
            if e.tid is None or e.kind not in _HOST_KINDS:
                continue
            rows.append(
                {
                    "rank": g.rank,
                    "device": g.device,
                    "gap_start_ns": g.start_ns,
                    "cause": e.cause,
                    "tid": e.tid,
                    "ev_start_ns": e.start_ns,
                    "ev_dur_ns": e.dur_ns,
                    "ev_name": e.name,
                    "ev_kind": e.kind,
                }
            )
    if not rows:
        return
    want = pl.DataFrame(rows).unique(maintain_order=True)
    host = (
        analysis.session.events.lazy()
        .filter(pl.col("kind").is_in(_HOST_KINDS) & pl.col("tid").is_not_null())
        .select(
            "rank",
            "tid",
            pl.col("start_ns").alias("ev_start_ns"),
            pl.col("dur_ns").alias("ev_dur_ns"),
            pl.col("name").cast(pl.String).alias("ev_name"),
            pl.col("pid").fill_null(0),
        )
        .unique(["rank", "tid", "ev_start_ns", "ev_dur_ns", "ev_name"], keep="first")
        .collect()
    )
    found = want.join(
        host, on=["rank", "tid", "ev_start_ns", "ev_dur_ns", "ev_name"], how="inner"
    ).join(_gap_piece(pieces), on=["rank", "device", "gap_start_ns", "cause"], how="left")
    found = found.join(
        _gap_piece(pieces, first=True), on=["rank", "device", "gap_start_ns"], how="left"
    )
    found = found.filter(pl.col("p_start").is_not_null() | pl.col("f_start").is_not_null())
    out: list[dict[str, Any]] = []
    for i, row in enumerate(found.iter_rows(named=True)):  # tens of arrows, not events
        r = int(row["rank"])
        gap = layout.pid_tid(r, ("tf", int(row["device"]), 0))
        on = layout.pid_tid(r, layout.host_key(int(row["pid"]), int(row["tid"]), row["ev_kind"]))
        first = row["p_start"] is None
        start = row["f_start"] if first else row["p_start"]
        # the piece as written (on the grid) and the event as the input has it, output clock
        p0 = layout.snap_ns(layout.ts_ns(r, start))
        p1 = layout.snap_ns(layout.ts_ns(r, start + (row["f_dur"] if first else row["p_dur"])))
        ev = layout.ts_ns(r, int(row["ev_start_ns"]))
        common = {"cat": "tf.evidence", "name": f"evidence: {row['cause']}", "id": FLOW_ID_BASE + i}
        # viewers keep an arrow only forward in time: from the event into the gap when the
        # event began by the piece's end (the usual case: the cause came first), else from
        # the piece to the later event (a launch call ending the gap)
        ends: tuple[tuple[tuple[Any, Any], int], ...]
        if ev <= p1:
            ends = ((on, ev), (gap, max(p0, ev)))
        else:
            ends = ((gap, p0 + (p1 - p0) // 2), (on, ev))
        for ph, (at, t) in zip(("s", "f"), ends, strict=True):
            out.append(
                {
                    "ph": ph,
                    # JSON text: a host end keeps the file's own form ("25738" or 25738)
                    "pid": orjson.dumps(at[0]).decode(),
                    "tid": orjson.dumps(at[1]).decode(),
                    "ts_ns": t,
                    **common,
                    **({"bp": "e"} if ph == "f" else {}),
                }
            )
    yield from event_lines(pl.DataFrame(out)) if out else iter(())


def _gap_piece(pieces: pl.DataFrame, first: bool = False) -> pl.DataFrame:
    """Per gap (and cause, unless ``first``), its first piece: ``p_start``/``p_dur`` (or
    ``f_start``/``f_dur`` for the gap's first piece of any cause)."""
    keys = ["rank", "device", "gap_start_ns"] + ([] if first else ["cause"])
    p = "f" if first else "p"
    return (
        pieces.sort("start_ns")
        .group_by(keys, maintain_order=True)
        .agg(
            pl.col("start_ns").first().alias(f"{p}_start"),
            pl.col("dur_ns").first().alias(f"{p}_dur"),
        )
    )
