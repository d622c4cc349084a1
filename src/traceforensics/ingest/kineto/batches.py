"""Columns of one Kineto file, built a batch of decoded events at a time.

The streaming reader hands over the events of one chunk of the file at a time, as the compiled
scanner's coded columns (``colscan.Scanned``, turned into these columns by ``scanned_rows``:
``ColumnBuilder.add``); the generic reader hands over a file's parsed events in batches
(``ColumnBuilder.add_dicts``). Only what the event table needs is kept and the batch let go,
so a streamed load holds one chunk plus compact columns, never the whole file:

- low-cardinality fields (``cat``, ``kind``, ``name``, raw ``pid``/``tid``) as lists of shared
  objects (each distinct value stored once), 8 bytes per row;
- ``start_ns``/``dur_ns`` as int64 arrays per batch (``timeconv``'s exact rule; the file's
  ``baseTimeNanoseconds``, which may come after the events, is added at the end);
- ``external_id`` as int64 arrays per batch (``parts.ExternalPart``), ``correlation`` for the
  correlated kinds (a value that is not an int, or an all-digits text, within int64 is no
  value: ``gpu.parse_int``);
- the rule args (device, stream, bytes, grid, ...) as small dicts for GPU and runtime rows only;
- the kept args (shapes, stacks, collectives) as coded rows of the args side table per batch
  (``parts.KeptPart``);
- metadata events as small dicts, launch-flow endpoints as (thread, ts ns, id) arrays.

Row rules are those of ``events``: ``X``/``i``/``I`` phases except the ``Trace`` span, kind from
``cat``, an event whose ``ts``/``dur`` is not a number of µs dropped (warned once).

Nothing here imports polars (``events.extract`` makes the polars columns): the early-scan child
builds a small file's columns while the command still imports it (``early``). ``Columns`` is
in ``columns`` (the builder's only import of it), so that a process that only receives built
columns does not import the decoders.
"""

from __future__ import annotations

from itertools import compress
from typing import Any

import numpy as np
import numpy.typing as npt

from traceforensics.ingest.kineto import categories as cats
from traceforensics.ingest.kineto import classify, gpu
from traceforensics.ingest.kineto.colscan import Scanned
from traceforensics.ingest.kineto.columns import Columns
from traceforensics.ingest.kineto.flows import (
    add_flow_arrays,
    add_flow_points,
    thread_key,
)
from traceforensics.ingest.kineto.parts import (
    KEPT_CODE,
    ExternalPart,
    KeptPart,
    TextCodes,
    external_part,
    json_texts,
)
from traceforensics.ingest.kineto.scanned_rows import add_scanned
from traceforensics.ingest.kineto.timeconv import TimeValueError, us_to_ns, usable_us

_INT_OR_NONE = {int, type(None)}


def _shared(values: list[Any], memo: dict[Any, Any]) -> list[Any]:
    """``values`` with equal values replaced by one shared object (a name decoded a million
    times is stored once); unhashable (damaged) values are kept as they are."""
    try:
        return list(map(memo.setdefault, values, values))
    except TypeError:
        return [memo.setdefault(v, v) if isinstance(v, str | int | float) else v for v in values]


class ColumnBuilder:
    """Accumulates ``Columns`` from batches of decoded events, scanned or parsed (see the
    module docstring); ``memo`` shares equal values across batches."""

    def __init__(self, *, defer_flows: bool = False, coded: bool = False) -> None:
        self.c = Columns(coded=TextCodes() if coded else None)
        self.memo: dict[Any, Any] = {}
        #: with ``defer_flows``, the launch-flow endpoints of scanned chunks (the chunk, its
        #: endpoint events) left to ``settle_flows``: the early-scan child groups them only
        #: when a row needs the correlation fallback (``rows.row_rules``; the chunks are held
        #: there anyway, and a trace whose rows all carry a correlation never needs them)
        self.deferred: list[tuple[Scanned, npt.NDArray[np.int64]]] | None = (
            [] if defer_flows else None
        )

    def settle_flows(self) -> None:
        """Group the deferred launch-flow endpoints into ``c.flows``, in file order: the same
        endpoints, in the same order, as without deferring."""
        from traceforensics.ingest.kineto.scanned_rows import add_flow_events

        deferred = self.deferred or []
        self.deferred = None if self.deferred is None else []
        for scanned, events in deferred:
            add_flow_events(self, scanned, events)

    def add(self, events: Scanned) -> None:
        """Take the coded columns of one chunk the compiled scanner read (in file order;
        ``scanned_rows``)."""
        add_scanned(self, events)

    def add_dicts(self, events: list[Any]) -> None:
        """Take one batch of parsed events (in file order; the generic path: ``orjson``'s
        dicts of the whole file). Elements that are not objects are no events.

        Each field is read once into a column list and the events sorted by what they are (a
        row, metadata, a launch-flow endpoint, nothing) from their few distinct (phase,
        category) pairs; every later step works on columns."""
        events = [e for e in events if type(e) is dict]
        c = self.c
        c.events_seen += len(events)
        if not events:
            return
        cols = [[e.get(f) for e in events] for f in _FIELDS]
        codes = classify.classes(cols[0], cols[1])
        present = set(codes)
        if classify.META in present:
            self.add_meta(*_pick(cols, codes, classify.META, (2, 3, 7)))
        if classify.FLOW in present:
            self.add_flows(*_pick(cols, codes, classify.FLOW, (3, 4, 5, 8)))
        if classify.ROW not in present:
            return
        ph, cat, name, pid, tid, ts, dur, args = _pick(cols, codes, classify.ROW, tuple(range(8)))
        start, dur_ns, keep = self.convert_times(ph, ts, dur)
        if keep is not None:
            ph, cat, name, pid, tid, args = (
                list(compress(col, keep)) for col in (ph, cat, name, pid, tid, args)
            )
        if ph:
            self._add_rows(ph, cat, name, pid, tid, args, start, dur_ns)

    def add_meta(self, name: list[Any], pid: list[Any], args: list[Any]) -> None:
        """Keep metadata events (device labels): a small share of a trace."""
        for n, p, a in zip(name, pid, args, strict=True):
            kept = {k: a[k] for k in ("labels", "name") if k in a} if type(a) is dict else {}
            self.c.meta.append({"name": n, "pid": p, "args": kept})

    def add_flows(self, pid: list[Any], tid: list[Any], ts: list[Any], ids: list[Any]) -> None:
        """Keep launch-flow endpoints (the correlation fallback), grouped by thread."""
        number = [type(v) in (int, float) for v in ts]
        if not all(number):
            pid, tid, ts, ids = (list(compress(col, number)) for col in (pid, tid, ts, ids))
            if not ts:
                return
        try:
            ts_ns = us_to_ns(ts).tolist()
        except TimeValueError:  # a NaN/huge ts: that endpoint is not one
            ok = usable_us(ts)
            pid, tid, ts, ids = (list(compress(col, ok)) for col in (pid, tid, ts, ids))
            ts_ns = us_to_ns(ts).tolist()
        if not set(map(type, ids)) <= {int}:
            ids = [gpu.parse_int(v) for v in ids]
        if None in ids:  # an endpoint without a usable id is not one
            has_id = [v is not None for v in ids]
            pid, tid, ts_ns, ids = (list(compress(col, has_id)) for col in (pid, tid, ts_ns, ids))
        try:
            pairs = list(zip(pid, tid, strict=True))
            distinct = set(pairs)
        except TypeError:  # a list or dict pid/tid (damaged): keyed by its repr
            pairs = list(zip(map(gpu.key_of, pid), map(gpu.key_of, tid), strict=True))
            distinct = set(pairs)
        threads = {p: (thread_key(p[0]), thread_key(p[1])) for p in distinct}
        try:
            times = np.array(ts_ns, dtype=np.int64)
            flow_ids = np.array(ids, dtype=np.int64)
        except OverflowError:  # an id beyond int64 (damaged): checked one by one
            self._flows_by_thread(pairs, threads, ts_ns, ids)
            return
        # one code per thread, then each thread's endpoints in file order (stable sort)
        codes: dict[Any, int] = {}
        pair_code = {p: codes.setdefault(key, len(codes)) for p, key in threads.items()}
        code = np.fromiter(map(pair_code.__getitem__, pairs), dtype=np.int64, count=len(pairs))
        order = np.argsort(code, kind="stable")
        cuts = np.searchsorted(code[order], np.arange(len(codes) + 1))
        for key, c in codes.items():
            rows = order[cuts[c] : cuts[c + 1]]
            add_flow_arrays(self.c.flows, key, times[rows], flow_ids[rows])

    def _flows_by_thread(
        self,
        pairs: list[tuple[Any, Any]],
        threads: dict[tuple[Any, Any], Any],
        ts_ns: list[int],
        ids: list[int],
    ) -> None:
        """The grouping one endpoint at a time, for ids that do not fit int64 (dropped by
        ``add_flow_points``)."""
        grouped: dict[Any, tuple[list[int], list[int]]] = {}
        for pair, t, flow_id in zip(pairs, ts_ns, ids, strict=True):
            key = threads[pair]
            if key not in grouped:
                grouped[key] = ([], [])
            grouped[key][0].append(t)
            grouped[key][1].append(flow_id)
        for key, (times, flow_ids) in grouped.items():
            add_flow_points(self.c.flows, key, times, flow_ids)

    def convert_times(
        self, ph: list[Any], ts: list[Any], dr: list[Any]
    ) -> tuple[npt.NDArray[np.int64], npt.NDArray[np.int64], list[bool] | None]:
        """``(start_ns without the base, dur_ns, rows kept or None for all)``; instants last
        0 ns, a negative ``dur`` is clamped to 0, an event whose times do not convert is
        dropped."""
        c = self.c
        keep: list[bool] | None = None
        try:
            start = us_to_ns(ts)
            dur = us_to_ns(dr, missing=0)
        except TimeValueError as exc:
            keep = [a and b for a, b in zip(usable_us(ts), usable_us(dr, missing=0), strict=True)]
            bad = keep.index(False)
            if c.first_time_error is None:
                c.first_time_error = exc
                c.bad_example = ts[bad] if not usable_us([ts[bad]])[0] else dr[bad]
            c.bad_times += keep.count(False)
            ph, ts, dr = (list(compress(col, keep)) for col in (ph, ts, dr))
            start = us_to_ns(ts)
            dur = us_to_ns(dr, missing=0)
        if not c.float_timestamps:
            c.float_timestamps = float in set(map(type, ts))
        c.settle_durations(dur, np.fromiter(map("X".__ne__, ph), dtype=bool, count=len(ph)))
        return start, dur, keep

    def _add_rows(
        self,
        ph: list[Any],
        cat_raw: list[Any],
        names: list[Any],
        pid: list[Any],
        tid: list[Any],
        args: list[Any],
        start: npt.NDArray[np.int64],
        dur: npt.NDArray[np.int64],
    ) -> None:
        """Append the rows of parsed events (``args``: their args values, read when objects)."""
        c, memo = self.c, self.memo
        c.coded = None  # (codes come from scanned chunks only: the lists hold every row)
        base, n = c.rows, len(ph)
        cat = _shared(cat_raw, memo)
        kind = classify.kinds(ph, cat, c.unknown_cats)
        if set(map(type, names)) != {str}:
            names = ["" if v is None else str(v) for v in names]
        c.cat.extend(cat)
        c.kind.extend(kind)
        c.name.extend(_shared(names, memo))
        c.pid_raw.extend(_shared(pid, memo))
        c.tid_raw.extend(_shared(tid, memo))
        c.start_parts.append(start)
        c.dur_parts.append(dur)
        c.external_parts.append(_external_ids(args))
        need = [i for i, k in enumerate(kind) if k in classify.NEED_KINDS and type(args[i]) is dict]
        dicts: list[dict[str, Any]] = [args[i] for i in need]
        rule = [classify.EMPTY_ARGS] * n
        correlation: list[int | None] = [None] * n
        owners: list[tuple[int, dict[str, Any]]] = []
        for i, d in zip(need, dicts, strict=True):
            k = kind[i]
            if k in classify.RULE_KINDS:
                keys = classify.RULE_KEYS.intersection(d)
                if keys:
                    rule[i] = {key: d[key] for key in keys}
                if k in cats.CORRELATED_KINDS:
                    correlation[i] = gpu.parse_int(d.get("correlation"))
            if k in cats.ARGS_KINDS:
                owners.append((base + i, d))
        c.args.extend(rule)
        c.correlation.extend(correlation)
        c.arg_parts.append(_kept_table(owners))


#: The event keys ``add_dicts`` reads (a missing key is None), one pass per key.
_FIELDS = ("ph", "cat", "name", "pid", "tid", "ts", "dur", "args", "id")


def _pick(
    cols: list[list[Any]], codes: list[int], code: int, fields: tuple[int, ...]
) -> list[list[Any]]:
    """Columns ``fields`` (positions in ``_FIELDS``) of the events of class ``code``."""
    mask = list(map(code.__eq__, codes))
    return [list(compress(cols[f], mask)) for f in fields]


def build_batch(events: Scanned | list[Any]) -> Columns:
    """The columns of one batch of events on their own: a scanned chunk, or parsed events."""
    builder = ColumnBuilder()
    if isinstance(events, Scanned):
        builder.add(events)
    else:
        builder.add_dicts(events)
    return builder.c


def _external_ids(args: list[Any]) -> ExternalPart:
    """``args["External id"]`` (else the lower-case spelling) of each row's args object as an
    int64 part (not an int or an all-digits string within int64: no id, ``gpu.parse_int``)."""
    ids = [
        (a["External id"] if "External id" in a else a.get("external id"))
        if type(a) is dict
        else None
        for a in args
    ]
    if not set(map(type, ids)) <= _INT_OR_NONE:
        ids = [v if type(v) is int else gpu.parse_int(v) for v in ids]
    try:
        return external_part(ids)
    except OverflowError:  # an int beyond int64 (damaged): no id
        return external_part(list(map(gpu.parse_int, ids)))


def _kept_table(owners: list[tuple[int, dict[str, Any]]]) -> KeptPart:
    """Kept args (``KEPT_ARG_KEYS``) of ``(event position, args)`` as (position, key, JSON
    text) rows sorted by (position, key); each value encoded compactly (``parts.json_texts``)."""
    kept = cats.KEPT_ARG_KEYS
    triples = [(pos, key, a[key]) for pos, a in owners for key in sorted(kept.intersection(a))]
    texts = json_texts([t[2] for t in triples])
    # each distinct text once (shapes and stacks repeat): the part holds the file's texts as
    # Python strings until the table is built, as the scanner's do
    distinct: dict[str, int] = {}
    codes = [distinct.setdefault(t, len(distinct)) for t in texts]
    n = len(triples)
    return KeptPart(
        np.fromiter((t[0] for t in triples), dtype=np.int64, count=n),
        np.fromiter((KEPT_CODE[t[1]] for t in triples), dtype=np.int32, count=n),
        np.array(codes, dtype=np.int32),
        list(distinct),
    )
