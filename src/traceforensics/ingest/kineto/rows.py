"""The row rules of one file's columns (``columns.Columns``), without polars.

The rules that need the whole file, run on Python lists and numpy arrays: host ids from raw
pid/tid, GPU placement (device labels come from metadata events that may follow the rows), the
correlation fallback from launch flows, copy sizes and kinds, kernel grid/block, communication
marks, and what the trace's metadata needs from the rows. ``events.extract`` then makes the
polars columns of them::

    Columns   kind, name, pid_raw, tid_raw, args, correlation, flows, meta, start/dur parts
       |  row_rules (this process, or the early-scan child after it built the columns)
    RowRules  pid, tid, device, stream, correlation, Payload, start_ns/dur_ns, lost rows, ...
       |  events.extract (polars)
    the partial event table

Nothing here imports polars: the early-scan child (``early.with_columns``) runs these rules
while the command still imports the analysis, and sends their lists instead of the raw ones
(a row's rule args are a dict of small lists: ~9 ms to unpickle for the 1x ResNet-50 trace,
docs/benchmarks.md). The rules are the same functions either way, so a load gives the same
table with or without the early scan. Value-dependent rules (names, pids, tids) run once per
distinct value.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from itertools import compress
from typing import Any, TypeVar

import numpy as np
import numpy.typing as npt

from traceforensics.ingest.kineto import categories as cats
from traceforensics.ingest.kineto import gpu
from traceforensics.ingest.kineto.columns import Columns
from traceforensics.ingest.kineto.flows import cpu_pid, fill_correlation_from_flows, gpu_labels
from traceforensics.ingest.kineto.payload import Payload, gpu_payload, place_gpu_rows

T = TypeVar("T")


#: A row list of ``RowRules``: ints, None where the row has no value.
IntRows = list[int | None]


@dataclass
class RowRules:
    """What the row rules made of one file's columns (row lists in file order).

    ``start_ns``/``dur_ns``: int64 ns, ``start_ns`` without the file's base (it may come after
    the events); ``pid``/``tid``: host ids, None on GPU rows for ``tid`` and the recording
    process for ``pid``; ``device``/``stream``: GPU rows only; ``correlation`` with the launch
    flows' fallback filled (``flow_filled`` rows); ``lost``: positions of GPU work rows with no
    device index, of ``gpu_work`` such rows."""

    start_ns: npt.NDArray[np.int64]
    dur_ns: npt.NDArray[np.int64]
    pid: IntRows
    tid: IntRows
    device: IntRows
    stream: IntRows
    correlation: IntRows
    pay: Payload
    lost: list[int]
    gpu_work: int
    devices_seen: list[int]
    runtime_names: list[str]
    legacy_categories: bool
    flow_filled: int


def map_unique(values: Sequence[Any], fn: Callable[[Any], T]) -> list[T]:
    """``[fn(v) for v in values]`` computed once per distinct value."""
    try:
        distinct = set(values)
    except TypeError:  # an unhashable value (malformed event): no memo
        return [fn(v) for v in values]
    # ints within int64 parse to themselves: the common case for pid/tid (the range checked
    # on the few distinct values; the types on every value: ``True`` equals ``1``)
    if (
        fn is gpu.parse_int
        and set(map(type, values)) <= {int}
        and (not distinct or None not in (gpu.int64(min(distinct)), gpu.int64(max(distinct))))
    ):
        return list(values)
    table = {v: fn(v) for v in distinct}
    return list(map(table.__getitem__, values))


def positions(kind: list[str], kinds: frozenset[str]) -> list[int]:
    """Row positions whose kind is one of ``kinds`` (decided once per distinct kind)."""
    member = {k: k in kinds for k in set(kind)}
    return list(compress(range(len(kind)), map(member.__getitem__, kind)))


def _concat(parts: list[npt.NDArray[np.int64]]) -> npt.NDArray[np.int64]:
    return np.concatenate(parts) if parts else np.zeros(0, dtype=np.int64)


def row_rules(c: Columns, settle_flows: Callable[[], None] | None = None) -> RowRules:
    """The row rules of ``c`` (see the module docstring). ``c`` is consumed: the raw lists
    (pid/tid, rule args, launch flows, time parts, correlation) are let go as soon as what they
    feed is made (at 10M rows each list is ~80 MB before its values); ``kind``, ``name``,
    ``cat`` and the External id and kept-args parts stay for the table. ``settle_flows``:
    groups launch-flow endpoints left ungrouped (``ColumnBuilder(defer_flows=True)``), called
    only when a row lacks the correlation they stand in for."""
    kind = c.kind
    start_ns, dur_ns = _concat(c.start_parts), _concat(c.dur_parts)
    c.start_parts, c.dur_parts = [], []
    # host ids for every row, then GPU rows get device/stream instead of an OS thread
    pid: list[int | None] = map_unique(c.pid_raw, gpu.parse_int)
    tid: list[int | None] = map_unique(c.tid_raw, gpu.parse_int)
    gpu_idx = positions(kind, cats.GPU_ROW_KINDS)
    device, stream = place_gpu_rows(
        gpu_idx,
        c.args,
        pid_raw=c.pid_raw,
        tid_raw=c.tid_raw,
        labels=gpu_labels(c.meta),
        host_pid=cpu_pid(c.meta),
        pid=pid,
        tid=tid,
    )
    correlation = c.correlation
    candidates = positions(kind, cats.CORRELATED_KINDS)
    if settle_flows is not None and None in map(correlation.__getitem__, candidates):
        settle_flows()
    flow_filled = fill_correlation_from_flows(
        c.flows,
        candidates,
        correlation,
        pid_raw=c.pid_raw,
        tid_raw=c.tid_raw,
        start_ns=start_ns,
        dur_ns=dur_ns,
    )
    c.pid_raw, c.tid_raw, c.flows, c.correlation = [], [], {}, []
    pay = gpu_payload(kind, c.name, c.args, gpu_idx, correlation)
    c.args = []
    work = [i for i in gpu_idx if kind[i] in cats.WORK_KINDS]
    return RowRules(
        start_ns=start_ns,
        dur_ns=dur_ns,
        pid=pid,
        tid=tid,
        device=device,
        stream=stream,
        correlation=correlation,
        pay=pay,
        lost=[i for i in work if device[i] is None],
        gpu_work=len(work),
        devices_seen=sorted({d for d in device if d is not None}),
        runtime_names=sorted(set(compress(c.name, map("cuda_api".__eq__, kind)))),
        legacy_categories=any(x in cats.LEGACY_CATEGORIES for x in set(map_unique(c.cat, str))),
        flow_filled=flow_filled,
    )
