"""One Kineto file's row columns (``Columns``), as batches of decoded events add to them.

The columns themselves, apart from the builder that fills them (``batches.ColumnBuilder``,
with the decoders it reads: the compiled scanner's results, parsed events): a
process that only receives columns built elsewhere (the early-scan child's answer, a decode
worker's batch) imports this module alone. What each column holds is in ``batches``' module
docstring.
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import numpy as np
import numpy.typing as npt

from traceforensics.ingest.kineto.flows import FlowPoints
from traceforensics.ingest.kineto.parts import ExternalPart, KeptPart, TextCodes
from traceforensics.ingest.kineto.timeconv import TimeValueError

if TYPE_CHECKING:
    from traceforensics.ingest.kineto.rows import RowRules


@dataclass
class Columns:
    """One file's row columns in file order (see the module docstring)."""

    cat: list[Any] = field(default_factory=list)
    kind: list[str] = field(default_factory=list)
    name: list[str] = field(default_factory=list)
    pid_raw: list[Any] = field(default_factory=list)
    tid_raw: list[Any] = field(default_factory=list)
    args: list[dict[str, Any]] = field(default_factory=list)
    correlation: list[int | None] = field(default_factory=list)
    start_parts: list[npt.NDArray[np.int64]] = field(default_factory=list)
    dur_parts: list[npt.NDArray[np.int64]] = field(default_factory=list)
    external_parts: list[ExternalPart] = field(default_factory=list)
    arg_parts: list[KeptPart] = field(default_factory=list)
    meta: list[dict[str, Any]] = field(default_factory=list)
    #: launch-flow endpoints by thread (``flows.add_flow_point``)
    flows: dict[Any, FlowPoints] = field(default_factory=dict)
    unknown_cats: Counter[str] = field(default_factory=Counter)
    float_timestamps: bool = False
    negative_dur: int = 0
    bad_times: int = 0
    bad_example: Any = None
    first_time_error: TimeValueError | None = None
    events_seen: int = 0
    #: the row rules already run on these columns (``rows.row_rules``, by the early-scan
    #: child: its raw lists, which they consumed, are then empty), else None
    rules: RowRules | None = None
    #: ``kind``/``name``/``cat`` as codes too (``ColumnBuilder(coded=True)``: every row
    #: scanned), else None; once the rules ran, the early-scan child sends these alone
    #: (``early.with_columns``: the three lists are then empty)
    coded: TextCodes | None = None

    @property
    def rows(self) -> int:
        return self.coded.rows if self.coded is not None else len(self.kind)

    def settle_durations(self, dur: npt.NDArray[np.int64], instant: npt.NDArray[np.bool_]) -> None:
        """``dur`` (ns, of the rows being added) made what the table holds, in place:
        instants last 0 ns, a negative duration is clamped to 0 (counted for the warning)."""
        dur[instant] = 0
        negative = int((dur < 0).sum())
        if negative:
            self.negative_dur += negative
            np.maximum(dur, 0, out=dur)

    def extend(self, later: Columns) -> None:
        """Append the columns of the events that follow these in the file (a batch built
        elsewhere, e.g. by a worker process); its kept-args positions are shifted. Neither
        may have had its row rules run (they need the whole file)."""
        if self.rules is not None or later.rules is not None:
            raise ValueError("columns whose row rules ran take no more rows")
        base = self.rows
        self.coded = None  # (the codes of one builder: the lists hold every row)
        for name in ("cat", "kind", "name", "pid_raw", "tid_raw", "args", "correlation"):
            getattr(self, name).extend(getattr(later, name))
        self.start_parts.extend(later.start_parts)
        self.dur_parts.extend(later.dur_parts)
        self.external_parts.extend(later.external_parts)
        self.arg_parts.extend(part.shifted(base) for part in later.arg_parts)
        self.meta.extend(later.meta)
        for key, (ts, ids) in later.flows.items():
            if key in self.flows:
                self.flows[key][0].extend(ts)
                self.flows[key][1].extend(ids)
            else:
                self.flows[key] = (ts, ids)
        self.unknown_cats.update(later.unknown_cats)
        self.float_timestamps = self.float_timestamps or later.float_timestamps
        self.negative_dur += later.negative_dur
        self.bad_times += later.bad_times
        if self.first_time_error is None:
            self.first_time_error = later.first_time_error
            self.bad_example = later.bad_example
        self.events_seen += later.events_seen


__all__ = ["Columns"]
