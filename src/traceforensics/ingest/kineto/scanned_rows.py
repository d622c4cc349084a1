"""A chunk the compiled scanner read (``colscan.Scanned``) added to ``columns.Columns``.

The scanner hands over codes into the chunk's distinct values and flat number arrays, so each
rule of ``classify`` runs once per distinct value and the rows are picked and converted with
array operations; the columns are exactly those ``ColumnBuilder.add_dicts`` builds from the
parsed events of the same text (``tests/test_colscan.py`` compares the two on generated and
real chunks)::

    event     0        1        2        3         codes: ph, cat, name, pid, tid, id
    class     row      meta     row      flow      <- once per distinct (ph, cat) pair
    rows      r0       -        r1       -         rows = [0, 2]: events of the chunk
    kept      (0, "Input Dims", t)                 -> (base + 0, "Input Dims", t)

Times take ``timeconv``'s exact rule on the number arrays (ints times 1000, doubles by the
shortest-repr rule); a chunk with a row whose ``ts``/``dur`` is not a plain number in range
takes the per-value path instead (``ColumnBuilder.convert_times``).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Final

import numpy as np
import numpy.typing as npt

from traceforensics.ingest.kineto import categories as cats
from traceforensics.ingest.kineto import classify, gpu
from traceforensics.ingest.kineto.colscan import (
    ARG_NUMBER_KEYS,
    ARG_VALUE_KEYS,
    CODED_KEYS,
    FLOAT,
    INT,
    KEPT_KEYS,
    MISSING,
    NUMBER_KEYS,
    OTHER,
    Scanned,
    slot_value,
)
from traceforensics.ingest.kineto.parts import KEPT_CODE, ROW_KINDS, ExternalPart, KeptPart
from traceforensics.ingest.kineto.timeconv import MID_LIMIT_US, floats_us_to_ns

if TYPE_CHECKING:
    from traceforensics.ingest.kineto.batches import ColumnBuilder

_PH, _CAT, _NAME, _PID, _TID, _ID = (CODED_KEYS.index(k) for k in CODED_KEYS)
_SLOTS: Final = (*NUMBER_KEYS, *ARG_NUMBER_KEYS)
_TS, _DUR, _EXT, _EXT_LOWER, _CORR = (_SLOTS.index(k) for k in _SLOTS)
_INT64_US_LIMIT: Final = (2**63 - 1) // 1000
_META_KEYS: Final = ("labels", "name")
_ARG_KEY: Final = {key: i for i, key in enumerate(ARG_VALUE_KEYS)}


def add_scanned(builder: ColumnBuilder, s: Scanned) -> None:
    """Add one scanned chunk's rows, metadata and launch-flow endpoints to ``builder``."""
    c = builder.c
    c.events_seen += s.n
    if not s.n:
        return
    cls = _classes(s)
    meta = np.flatnonzero(cls == classify.META)
    if meta.size:
        args = _arg_dicts(s, meta, _META_KEYS)
        builder.add_meta(_values(s, _NAME, meta), _values(s, _PID, meta), args)
    flows = np.flatnonzero(cls == classify.FLOW)
    if flows.size:
        if builder.deferred is not None:
            builder.deferred.append((s, flows))  # (``ColumnBuilder.settle_flows``)
        else:
            add_flow_events(builder, s, flows)
    rows = np.flatnonzero(cls == classify.ROW)
    if rows.size:
        _add_rows(builder, s, rows)


def add_flow_events(builder: ColumnBuilder, s: Scanned, flows: npt.NDArray[np.int64]) -> None:
    """Add the launch-flow endpoints of one scanned chunk (its events at ``flows``)."""
    pid, tid = (_values(s, col, flows) for col in (_PID, _TID))
    builder.add_flows(pid, tid, _slot_values(s, _TS, flows), _values(s, _ID, flows))


def _classes(s: Scanned) -> npt.NDArray[np.int8]:
    """``classify.class_of`` of each event, once per distinct (ph, cat) pair that occurs (a
    chunk has a handful of phases and a few dozen categories; a damaged one may have as many
    of each as events, and then only the pairs it holds are classed)."""
    ph_codes, ph_at = _present(s.codes[:, _PH], len(s.values))
    cat_codes, cat_at = _present(s.codes[:, _CAT], len(s.values))
    pair = ph_at * cat_codes.size + cat_at
    if ph_codes.size * cat_codes.size <= _DENSE_PAIRS:
        distinct, inverse = np.arange(ph_codes.size * cat_codes.size), pair
    else:
        distinct, inverse = np.unique(pair, return_inverse=True)
    ph_of, cat_of = np.divmod(distinct, cat_codes.size)
    table = [
        classify.class_of(s.values[p], s.values[c])
        for p, c in zip(ph_codes[ph_of].tolist(), cat_codes[cat_of].tolist(), strict=True)
    ]
    out: npt.NDArray[np.int8] = np.asarray(table, dtype=np.int8)[inverse.reshape(-1)]
    return out


#: Up to this many (phase, category) code pairs, every pair is classed (no sort).
_DENSE_PAIRS: Final = 4096


def _present(
    codes: npt.NDArray[np.int32], n_values: int
) -> tuple[npt.NDArray[np.int64], npt.NDArray[np.int64]]:
    """``(the distinct codes, ascending; each entry's index among them)``."""
    present = np.flatnonzero(np.bincount(codes, minlength=n_values))
    index = np.zeros(n_values, dtype=np.int64)
    index[present] = np.arange(present.size)
    return present, index[codes]


def _values(s: Scanned, col: int, events: npt.NDArray[np.int64]) -> list[Any]:
    """The Python values of coded column ``col`` at ``events``."""
    return list(map(s.values.__getitem__, s.codes[events, col].tolist()))


def _slot_values(s: Scanned, slot: int, events: npt.NDArray[np.int64]) -> list[Any]:
    """The Python values of number slot ``slot`` at ``events`` (missing and null: None)."""
    tags, raw = s.tags[events, slot], s.numbers[events, slot]
    if (tags == INT).all():
        return list(raw.tolist())
    if (tags == FLOAT).all():
        return list(raw.view(np.float64).tolist())
    pairs = zip(tags.tolist(), raw.tolist(), strict=True)
    return [None if t == MISSING else slot_value(t, r, s.values) for t, r in pairs]


def _arg_dicts(
    s: Scanned, events: npt.NDArray[np.int64], keys: tuple[str, ...]
) -> list[dict[str, Any] | None]:
    """Per event, a dict of its args value keys among ``keys`` (None when it has no args)."""
    out: list[dict[str, Any] | None] = [{} if a else None for a in s.has_args[events].tolist()]
    at = {e: i for i, e in enumerate(events.tolist())}
    wanted = [i for key, i in _ARG_KEY.items() if key in keys]
    hits = np.flatnonzero(np.isin(s.arg_events, events) & np.isin(s.arg_keys, wanted))
    for j in hits.tolist():
        d = out[at[int(s.arg_events[j])]]
        assert d is not None  # the scanner reads args keys of args objects only
        d[ARG_VALUE_KEYS[s.arg_keys[j]]] = s.values[s.arg_values[j]]
    return out


def _usable_times(tags: npt.NDArray[np.uint8], raw: npt.NDArray[np.int64]) -> bool:
    """Whether every row's ``ts`` is a number and its ``dur`` a number or absent, all within
    the ranges the array conversion takes (ints within int64 ns, doubles below 2**53 µs);
    ``tags``/``raw``: the rows' (ts, dur) slots."""
    if not np.isin(tags[:, 0], (INT, FLOAT)).all() or (tags[:, 1] == OTHER).any():
        return False
    ints = np.where(tags == INT, raw, 0)
    floats = np.where(tags == FLOAT, raw.view(np.float64), 0.0)
    # (not np.abs: the absolute value of INT64_MIN is INT64_MIN)
    in_range = (ints <= _INT64_US_LIMIT) & (ints >= -_INT64_US_LIMIT)
    return bool(in_range.all() and (np.abs(floats) < MID_LIMIT_US).all())


def _ns(tags: npt.NDArray[np.uint8], raw: npt.NDArray[np.int64]) -> npt.NDArray[np.int64]:
    """int64 ns of number slots (checked by ``_usable_times``); missing and null are 0."""
    out = np.where(tags == INT, raw * 1000, 0)
    floats = tags == FLOAT
    if floats.any():
        out[floats] = floats_us_to_ns(raw[floats].view(np.float64))
    return out


def _times(
    builder: ColumnBuilder, s: Scanned, rows: npt.NDArray[np.int64], is_x: npt.NDArray[np.bool_]
) -> tuple[npt.NDArray[np.int64], npt.NDArray[np.int64], npt.NDArray[np.int64]]:
    """``(rows kept, start_ns without the base, dur_ns)``: ``batches``' rule (instants last
    0 ns, a negative ``dur`` is clamped to 0, a row whose times do not convert is dropped)."""
    c = builder.c
    tags, raw = s.tags[rows][:, [_TS, _DUR]], s.numbers[rows][:, [_TS, _DUR]]
    if not _usable_times(tags, raw):
        ph = _values(s, _PH, rows)
        ts, dur = _slot_values(s, _TS, rows), _slot_values(s, _DUR, rows)
        start, dur_ns, keep = builder.convert_times(ph, ts, dur)
        return (rows, start, dur_ns) if keep is None else (rows[keep], start, dur_ns)
    start, dur_ns = _ns(tags[:, 0], raw[:, 0]), _ns(tags[:, 1], raw[:, 1])
    c.float_timestamps = c.float_timestamps or bool((tags[:, 0] == FLOAT).any())
    c.settle_durations(dur_ns, ~is_x)
    return rows, start, dur_ns


def _by_code(
    s: Scanned, col: int, rows: npt.NDArray[np.int64], memo: dict[Any, Any], fn: Any = None
) -> tuple[npt.NDArray[np.int32], npt.NDArray[Any]]:
    """``(codes of the column at rows, table)``: ``table[code]`` is ``fn(value)`` as one
    shared object per equal value (``batches._shared``: across chunks by ``memo``).

    Values that compare equal across types (``1``, ``1.0``, ``True``) share the object seen
    first, so when the column holds such a pair its codes are taken in the order each first
    occurs there, as the generic path meets them."""
    codes = s.codes[rows, col]
    present = _present(codes, len(s.values))[0]
    values = [s.values[code] for code in present.tolist()]
    if fn is not None:
        values = [fn(v) for v in values]
    if len(set(values)) < len(values):  # equal values under different codes
        distinct, first = np.unique(codes, return_index=True)
        order = np.argsort(first, kind="stable")
        present = distinct[order]
        values = [s.values[code] for code in present.tolist()]
        if fn is not None:
            values = [fn(v) for v in values]
    table = np.empty(len(s.values), dtype=object)
    table[present] = [memo.setdefault(v, v) for v in values]
    return codes, table


def _name(value: Any) -> str:
    return "" if value is None else value if type(value) is str else str(value)


def _is_x(value: Any) -> bool:
    return type(value) is str and value == "X"


def _add_rows(builder: ColumnBuilder, s: Scanned, rows: npt.NDArray[np.int64]) -> None:
    c, memo = builder.c, builder.memo
    is_x = _is_x_rows(s, rows)
    rows, start, dur = _times(builder, s, rows, is_x)
    if not rows.size:
        return
    if len(is_x) != len(rows):  # rows were dropped
        is_x = _is_x_rows(s, rows)
    base = c.rows
    cat_codes, cat = _by_code(s, _CAT, rows, memo)
    c.cat.extend(cat[cat_codes].tolist())
    # kinds as small codes: ``KINDS[code]``, from the category's value, ``marker`` for instants
    kind_of = np.zeros(len(s.values), dtype=np.int8)
    present = _present(cat_codes, len(s.values))[0]
    kind_of[present] = [_KIND_CODE[classify.kind_of(v)] for v in cat[present].tolist()]
    kind = np.where(is_x, kind_of[cat_codes], _KIND_CODE["marker"])
    c.kind.extend(_KIND_TABLE[kind].tolist())
    _count_unknown(c.unknown_cats, cat, cat_codes[is_x])
    name_codes, names = _by_code(s, _NAME, rows, memo, _name)
    c.name.extend(names[name_codes].tolist())
    for col, out in ((_PID, c.pid_raw), (_TID, c.tid_raw)):
        codes, table = _by_code(s, col, rows, memo)
        out.extend(table[codes].tolist())
    if c.coded is not None:  # the early-scan child's columns (``parts.TextCodes``)
        c.coded.add(kind, (name_codes, names), (cat_codes, cat))
    c.start_parts.append(start)
    c.dur_parts.append(dur)
    c.external_parts.append(_external_ids(s, rows))
    need = s.has_args[rows] & _IN_KINDS[classify.NEED_KINDS][kind]
    rule_rows = np.flatnonzero(need & _IN_KINDS[classify.RULE_KINDS][kind])
    c.args.extend(_rule_args(s, rows, rule_rows))
    corr_rows = np.flatnonzero(need & _IN_KINDS[cats.CORRELATED_KINDS][kind])
    c.correlation.extend(_correlation(s, rows, corr_rows))
    c.arg_parts.append(_kept_table(s, rows, _IN_KINDS[cats.ARGS_KINDS][kind], base))


def _is_x_rows(s: Scanned, rows: npt.NDArray[np.int64]) -> npt.NDArray[np.bool_]:
    codes = s.codes[rows, _PH]
    present = _present(codes, len(s.values))[0]
    table = np.zeros(len(s.values), dtype=bool)
    table[present] = [_is_x(s.values[code]) for code in present.tolist()]
    out: npt.NDArray[np.bool_] = table[codes]
    return out


#: Every kind a row can have (``parts.ROW_KINDS``), and its code in ``_add_rows``.
_KIND_TABLE: Final = np.asarray(ROW_KINDS, dtype=object)
_KIND_CODE: Final = {k: i for i, k in enumerate(_KIND_TABLE.tolist())}
#: Per set of kinds the rules ask about, membership by kind code.
_IN_KINDS: Final = {
    kinds: np.asarray([k in kinds for k in _KIND_TABLE.tolist()], dtype=bool)
    for kinds in (classify.NEED_KINDS, classify.RULE_KINDS, cats.CORRELATED_KINDS, cats.ARGS_KINDS)
}


def _count_unknown(unknown: Any, table: npt.NDArray[Any], x_codes: npt.NDArray[np.int32]) -> None:
    """Count the ``X`` rows of unknown categories (``classify.unknown_name``); ``table``:
    the category value of each code."""
    counts = np.bincount(x_codes, minlength=len(table))
    for code in np.flatnonzero(counts).tolist():
        if classify.kind_of(table[code]) == cats.UNKNOWN_KIND:
            name = classify.unknown_name(table[code])
            if name is not None:
                unknown[name] += int(counts[code])


def _external_ids(s: Scanned, rows: npt.NDArray[np.int64]) -> ExternalPart:
    """``args["External id"]`` (absent: the lower-case spelling) per row as an int64 part; a
    value that is not an int is read by ``gpu.parse_int`` (an all-digits string), else none."""
    tags, raw = s.tags[rows], s.numbers[rows]
    lower = tags[:, _EXT] == MISSING  # the other spelling
    tag = np.where(lower, tags[:, _EXT_LOWER], tags[:, _EXT])
    value = np.where(lower, raw[:, _EXT_LOWER], raw[:, _EXT])
    valid = tag == INT
    ids = np.where(valid, value, 0)
    for i in np.flatnonzero(tag == OTHER).tolist():
        parsed = gpu.parse_int(s.values[int(value[i])])
        if parsed is not None:
            ids[i] = parsed
            valid[i] = True
    return ExternalPart(ids, None if valid.all() else valid)


def _correlation(
    s: Scanned, rows: npt.NDArray[np.int64], corr_rows: npt.NDArray[np.int64]
) -> list[int | None]:
    """``args.correlation`` of the rows at ``corr_rows`` (``gpu.parse_int``), else None."""
    out = np.full(len(rows), None, dtype=object)
    events = rows[corr_rows]
    tags, raw = s.tags[events, _CORR], s.numbers[events, _CORR]
    ints = tags == INT
    out[corr_rows[ints]] = raw[ints]  # (Python ints, made in one call)
    for i in np.flatnonzero(tags == OTHER).tolist():
        out[corr_rows[i]] = gpu.parse_int(s.values[int(raw[i])])
    values: list[int | None] = out.tolist()
    return values


def _rule_args(
    s: Scanned, rows: npt.NDArray[np.int64], rule_rows: npt.NDArray[np.int64]
) -> list[dict[str, Any]]:
    """Per row, the ``classify.RULE_KEYS`` its args hold (rows at ``rule_rows`` only; others
    ``EMPTY_ARGS``): values as read, a kept key's as its JSON text in bytes."""
    out = [classify.EMPTY_ARGS] * len(rows)
    if not rule_rows.size:
        return out
    pos = np.full(s.n, -1, dtype=np.int64)
    pos[rows[rule_rows]] = rule_rows
    dicts: dict[int, dict[str, Any]] = {}
    arg_keys = [i for key, i in _ARG_KEY.items() if key in classify.RULE_KEYS]
    at = pos[s.arg_events]
    hits = np.flatnonzero((at >= 0) & np.isin(s.arg_keys, arg_keys))
    for row, key, value in zip(
        at[hits].tolist(), s.arg_keys[hits].tolist(), s.arg_values[hits].tolist(), strict=True
    ):
        dicts.setdefault(row, {})[ARG_VALUE_KEYS[key]] = s.values[value]
    kept_keys = [i for key, i in KEPT_CODE.items() if key in classify.RULE_KEYS]
    at = pos[s.kept_events]
    hits = np.flatnonzero((at >= 0) & np.isin(s.kept_keys, kept_keys))
    for row, key, text in zip(
        at[hits].tolist(), s.kept_keys[hits].tolist(), s.kept_values[hits].tolist(), strict=True
    ):
        dicts.setdefault(row, {})[KEPT_KEYS[key]] = s.kept_texts[text].encode()
    for row, d in dicts.items():
        out[row] = d
    return out


def _kept_table(
    s: Scanned, rows: npt.NDArray[np.int64], owner: npt.NDArray[np.bool_], base: int
) -> KeptPart:
    """The kept args of the rows whose kind keeps them (``owner``) as (row position, key,
    JSON text) sorted by (position, key): ``batches._kept_table``'s part."""
    pos = np.full(s.n, -1, dtype=np.int64)
    pos[rows[owner]] = base + np.flatnonzero(owner)
    at = pos[s.kept_events]
    keep = at >= 0
    at, key, value = at[keep], s.kept_keys[keep], s.kept_values[keep]
    # rows in event order already; within an event by key (``KEPT_KEYS`` is sorted)
    order = np.lexsort((key, at))
    return KeptPart(at[order], key[order], value[order], s.kept_texts)
