"""A chunk of events as the scanner reads it (``colscan.Scanned``) into numpy row parts.

Every decoded batch takes this one path: the compiled scanner's chunks, and the generic
reader's parsed events after ``generic.scanned_events`` made them the same coded columns.
``Decoded.add`` sorts a chunk's events by what they are (a row, metadata, a launch-flow
endpoint, nothing: ``categories.class_of``), decided once per distinct (phase, category)
pair, and reduces its rows to arrays with gathers over the chunk's distinct values::

    event   0      1      2      3        codes (ph, cat, name, pid, tid, id) into values
    class   row    meta   row    flow     <- once per distinct (ph, cat) pair
    rows    kind, start_ns, dur_ns, name, category, pid, tid, correlation, external_id
    rule    device, stream, bytes, api_bytes, rocm_kind, grid, block, collective (GPU and
            runtime rows that carry args only, by row position ``pos``)
    kept    (pos, key, JSON text) of the args side table

Texts and raw ids are codes into the file's distinct values (``Decoded.distinct``: equal
values, by Python equality as dict keys, share one code, in the order first met); a nullable
number is two arrays, its values and ``<name>_valid``. Value-dependent rules (kinds, names,
ids, device and stream args) run once per distinct value of a chunk. A part holds only what
the table needs, so memory holds the parts, not the file; nothing here imports polars, so the
early-scan child decodes a file while the command imports it (``early``).
``rules.extract`` runs the rules that need the whole file over the parts.

Rows: ``X``/``i``/``I`` phases except the ``Trace`` span, kind from ``cat`` (``marker`` for
instants); times by ``timeconv``'s exact rule, a row whose ``ts``/``dur`` is not a number of µs
dropped (warned once), a negative ``dur`` clamped to 0 (warned), instants 0 ns.
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field
from itertools import chain, compress
from typing import Any, Final

import numpy as np
import numpy.typing as npt

from traceforensics.ingest.kineto import categories as cats
from traceforensics.ingest.kineto import gpu
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
    distinct_codes,
    slot_values,
)
from traceforensics.ingest.kineto.flows import FlowPoints, add_endpoints, metadata
from traceforensics.ingest.kineto.timeconv import (
    TimeValueError,
    slots_ns,
    slots_usable,
    us_to_ns,
    usable_us,
)

_PH, _CAT, _NAME, _PID, _TID, _ID = range(len(CODED_KEYS))
_SLOTS: Final = (*NUMBER_KEYS, *ARG_NUMBER_KEYS)
_TS, _DUR, _EXT, _EXT_LOWER, _CORR = range(len(_SLOTS))
_INT64_US_LIMIT: Final = (2**63 - 1) // 1000
_ARG_KEY: Final = {key: i for i, key in enumerate(ARG_VALUE_KEYS)}
_COLLECTIVE: Final = KEPT_KEYS.index("Collective name")
#: Every kind a row can have, sorted; a row's kind code indexes it.
ROW_KINDS: Final = tuple(sorted({*cats.KIND_BY_CAT.values(), cats.UNKNOWN_KIND, "marker"}))
_KIND_CODE: Final = {k: i for i, k in enumerate(ROW_KINDS)}


def _member(kinds: frozenset[str]) -> npt.NDArray[np.bool_]:
    return np.asarray([k in kinds for k in ROW_KINDS], dtype=bool)


_RULE, _CORRELATED, _KEEPS = (
    _member(k) for k in (cats.RULE_KINDS, cats.CORRELATED_KINDS, cats.ARGS_KINDS)
)


#: An array of a part: row codes, ids, ns, validity.
Array = npt.NDArray[Any]


@dataclass
class Decoded:
    """One file's decoded events, a chunk at a time (``add``): ``rows``, ``rule`` and
    ``kept``, each a column name -> the arrays of the chunks (see the module docstring);
    ``distinct``, per coded column (``name``, ``category``, raw ``pid``/``tid``, ``rocm_kind``,
    ``kept`` texts), the file's distinct values -> code; ``meta``, the metadata events;
    ``flows``, launch-flow endpoints by thread (``flows``)."""

    rows: dict[str, list[Array]] = field(default_factory=dict)
    rule: dict[str, list[Array]] = field(default_factory=dict)
    kept: dict[str, list[Array]] = field(default_factory=dict)
    distinct: dict[str, dict[Any, int]] = field(default_factory=dict)
    meta: list[dict[str, Any]] = field(default_factory=list)
    flows: dict[Any, FlowPoints] = field(default_factory=dict)
    #: per coded column, its values shared across chunks (``_by_code``)
    memo: dict[int, dict[Any, Any]] = field(default_factory=dict)
    unknown_cats: Counter[str] = field(default_factory=Counter)
    n_rows: int = 0
    events_seen: int = 0
    float_timestamps: bool = False
    negative_dur: int = 0
    bad_times: int = 0
    bad_example: Any = None
    first_time_error: TimeValueError | None = None

    def add(self, s: Scanned) -> None:
        """Take one chunk's events (in file order)."""
        self.events_seen += s.n
        if not s.n:
            return
        cls = _classes(s)
        self.meta += metadata(s, np.flatnonzero(cls == cats.META))
        add_endpoints(self.flows, s, np.flatnonzero(cls == cats.FLOW))
        rows = np.flatnonzero(cls == cats.ROW)
        if rows.size:
            self._add_rows(s, rows)

    def _times(
        self, s: Scanned, rows: npt.NDArray[np.int64], is_x: npt.NDArray[np.bool_]
    ) -> tuple[npt.NDArray[np.int64], npt.NDArray[np.int64], npt.NDArray[np.int64]]:
        """``(rows kept, start_ns without the base, dur_ns)``: a row whose times do not
        convert is dropped; instants last 0 ns; a negative ``dur`` is clamped to 0."""
        tags, raw = s.tags[rows][:, [_TS, _DUR]], s.numbers[rows][:, [_TS, _DUR]]
        if slots_usable(tags, raw):
            start, dur = slots_ns(tags[:, 0], raw[:, 0]), slots_ns(tags[:, 1], raw[:, 1])
            self.float_timestamps = self.float_timestamps or bool((tags[:, 0] == FLOAT).any())
        else:
            ts, dr = slot_values(s, _TS, rows), slot_values(s, _DUR, rows)
            try:
                start, dur = us_to_ns(ts), us_to_ns(dr, missing=0)
            except TimeValueError as exc:
                keep = [
                    a and b for a, b in zip(usable_us(ts), usable_us(dr, missing=0), strict=True)
                ]
                bad = keep.index(False)
                if self.first_time_error is None:
                    self.first_time_error = exc
                    self.bad_example = ts[bad] if not usable_us([ts[bad]])[0] else dr[bad]
                self.bad_times += keep.count(False)
                ts, dr = list(compress(ts, keep)), list(compress(dr, keep))
                rows, is_x = rows[keep], is_x[keep]
                start, dur = us_to_ns(ts), us_to_ns(dr, missing=0)
            self.float_timestamps = self.float_timestamps or float in set(map(type, ts))
        dur[~is_x] = 0
        negative = int((dur < 0).sum())
        if negative:
            self.negative_dur += negative
            np.maximum(dur, 0, out=dur)
        return rows, start, dur

    def _coded(self, column: str, codes: Array, table: Any, fn: Any = None) -> Array:
        """``codes`` (into the chunk's ``table``) as codes into the file's distinct values of
        ``column`` (``fn`` of each value, when given, is what is kept)."""
        distinct = self.distinct.setdefault(column, {})
        present = distinct_codes(codes, len(table))[0]
        values = [table[c] for c in present.tolist()]
        remap = np.zeros(len(table), dtype=np.uint32)
        remap[present] = [distinct.setdefault(v, len(distinct)) for v in map(fn or _same, values)]
        out: Array = remap[codes]
        return out

    def _put(self, part: dict[str, list[Array]], columns: dict[str, Array]) -> None:
        for name, values in columns.items():
            part.setdefault(name, []).append(values)

    def _add_rows(self, s: Scanned, rows: Array) -> None:
        is_x = _is_x(s, rows)
        rows, start, dur = self._times(s, rows, is_x)
        if not rows.size:
            return
        is_x = _is_x(s, rows)
        base = self.n_rows
        cat_codes, cat = _by_code(s, _CAT, rows, self.memo.setdefault(_CAT, {}))
        present = distinct_codes(cat_codes, len(s.values))[0]
        kind_of = np.zeros(len(s.values), dtype=np.int8)
        kind_of[present] = [_KIND_CODE[cats.kind_of(v)] for v in cat[present].tolist()]
        kind = np.where(is_x, kind_of[cat_codes], _KIND_CODE["marker"]).astype(np.int8)
        _count_unknown(self.unknown_cats, cat, cat_codes[is_x])
        name_codes, names = _by_code(s, _NAME, rows, self.memo.setdefault(_NAME, {}), _name)
        args = s.has_args[rows]
        correlation, corr_valid = _ints(s, rows, _CORR, np.flatnonzero(args & _CORRELATED[kind]))
        external, ext_valid = _external_ids(s, rows)
        self._put(
            self.rows,
            {
                "kind": kind,
                "start_ns": start,
                "dur_ns": dur,
                "name": self._coded("name", name_codes, names),
                "category": self._coded("category", cat_codes, cat, _text_or_none),
                "pid": self._coded(
                    "pid", *_by_code(s, _PID, rows, self.memo.setdefault(_PID, {})), gpu.key_of
                ),
                "tid": self._coded(
                    "tid", *_by_code(s, _TID, rows, self.memo.setdefault(_TID, {})), gpu.key_of
                ),
                "correlation": correlation,
                "correlation_valid": corr_valid,
                "external_id": external,
                "external_id_valid": ext_valid,
            },
        )
        rule_rows = np.flatnonzero(args & _RULE[kind])
        if rule_rows.size:
            self._put(self.rule, self._rule_part(s, rows, rule_rows, base))
        self._put(self.kept, self._kept_part(s, rows, _KEEPS[kind], base))
        self.n_rows += rows.size

    def _rule_part(self, s: Scanned, rows: Array, rule_rows: Array, base: int) -> dict[str, Array]:
        """The rule args of the rows at ``rule_rows`` (GPU and runtime rows with args), by row
        position: ``device`` (``gpu.parse_index``), ``stream`` (an int within int64),
        ``bytes`` (``gpu.parse_int``), ``api_bytes`` (the launching call's size: ``bytes``
        when the key is there, else ``size``), ``rocm_kind`` (a text ``kind``),
        ``grid``/``block`` (``_dims``), ``collective`` (a ``Collective name`` kept arg)."""
        pos = np.full(s.n, -1, dtype=np.int64)
        pos[rows[rule_rows]] = np.arange(rule_rows.size)
        at = pos[s.arg_events]
        hit = at >= 0
        at, keys, codes = at[hit], s.arg_keys[hit], s.arg_values[hit]

        def coded(key: str) -> Array:  # value codes of the key, -1 where absent
            out = np.full(rule_rows.size, -1, dtype=np.int64)
            mine = keys == _ARG_KEY[key]
            out[at[mine]] = codes[mine]
            return out

        nbytes = coded("bytes")
        kept = pos[s.kept_events]
        collective = np.zeros(rule_rows.size, dtype=bool)
        collective[kept[(kept >= 0) & (s.kept_keys == _COLLECTIVE)]] = True
        kind = coded("kind")
        out = {
            "pos": base + rule_rows,
            "rocm_kind": self._coded("rocm_kind", kind + 1, [None, *s.values], _text_or_none),
            "collective": collective,
        }
        for name, key_codes, fn in (
            ("device", coded("device"), gpu.parse_index),
            ("stream", coded("stream"), _stream_arg),
            ("bytes", nbytes, gpu.parse_int),
            ("api_bytes", np.where(nbytes >= 0, nbytes, coded("size")), gpu.parse_int),
        ):
            out[name], out[name + "_valid"] = _per_value(s, key_codes, fn)
        for name in ("grid", "block"):
            out[name], out[name + "_valid"] = _dims(s, coded(name))
        return out

    def _kept_part(self, s: Scanned, rows: Array, owner: Array, base: int) -> dict[str, Array]:
        """The kept args of the rows whose kind keeps them (``owner``) as (row position, key
        code in ``KEPT_KEYS``, text code) sorted by (position, key)."""
        pos = np.full(s.n, -1, dtype=np.int64)
        pos[rows[owner]] = base + np.flatnonzero(owner)
        at = pos[s.kept_events]
        keep = at >= 0
        at, key, value = at[keep], s.kept_keys[keep], s.kept_values[keep]
        order = np.lexsort((key, at))  # (``KEPT_KEYS`` is sorted)
        return {
            "pos": at[order],
            "key": key[order].astype(np.uint32),
            "value": self._coded("kept", value[order], s.kept_texts),
        }


def _classes(s: Scanned) -> npt.NDArray[np.int8]:
    """``cats.class_of`` of each event, once per distinct (ph, cat) code pair present."""
    ph_codes, ph_at = distinct_codes(s.codes[:, _PH], len(s.values))
    cat_codes, cat_at = distinct_codes(s.codes[:, _CAT], len(s.values))
    distinct, inverse = np.unique(ph_at * cat_codes.size + cat_at, return_inverse=True)
    ph_of, cat_of = np.divmod(distinct, cat_codes.size)
    table = [
        cats.class_of(s.values[p], s.values[c])
        for p, c in zip(ph_codes[ph_of].tolist(), cat_codes[cat_of].tolist(), strict=True)
    ]
    out: npt.NDArray[np.int8] = np.asarray(table, dtype=np.int8)[inverse.reshape(-1)]
    return out


def _by_code(
    s: Scanned, col: int, rows: npt.NDArray[np.int64], memo: dict[Any, Any], fn: Any = None
) -> tuple[npt.NDArray[np.int32], npt.NDArray[Any]]:
    """``(codes of the column at rows, table)``: ``table[code]`` is ``fn(value)`` as one
    shared object per equal value (across chunks by ``memo``). Values that compare equal
    across types (``1``, ``1.0``, ``True``) share the object seen first, so when the column
    holds such a pair its codes are taken in the order each first occurs; an unhashable value
    (the generic path's damaged events) is its own."""
    codes = s.codes[rows, col]
    present = distinct_codes(codes, len(s.values))[0]
    values = [s.values[code] for code in present.tolist()]
    values = values if fn is None else [fn(v) for v in values]
    hashable = all(map(_hashable, values))
    if hashable and len(set(values)) < len(values):  # equal values under different codes
        distinct, first = np.unique(codes, return_index=True)
        present = distinct[np.argsort(first, kind="stable")]
        values = [s.values[code] for code in present.tolist()]
        values = values if fn is None else [fn(v) for v in values]
    table = np.empty(len(s.values), dtype=object)
    table[present] = [memo.setdefault(v, v) if _hashable(v) else v for v in values]
    return codes, table


def _hashable(value: Any) -> bool:
    return not isinstance(value, list | dict)


def _name(value: Any) -> str:
    return "" if value is None else value if type(value) is str else str(value)


def _is_x(s: Scanned, rows: npt.NDArray[np.int64]) -> npt.NDArray[np.bool_]:
    codes = s.codes[rows, _PH]
    present = distinct_codes(codes, len(s.values))[0]
    table = np.zeros(len(s.values), dtype=bool)
    table[present] = [type(v := s.values[c]) is str and v == "X" for c in present.tolist()]
    out: npt.NDArray[np.bool_] = table[codes]
    return out


def _count_unknown(unknown: Counter[str], table: npt.NDArray[Any], x_codes: Any) -> None:
    """Count the ``X`` rows of unknown categories (``cats.unknown_name``)."""
    counts = np.bincount(x_codes, minlength=len(table))
    for code in np.flatnonzero(counts).tolist():
        if cats.kind_of(table[code]) == cats.UNKNOWN_KIND:
            name = cats.unknown_name(table[code])
            if name is not None:
                unknown[name] += int(counts[code])


def _ints(s: Scanned, rows: Array, slot: int, at: Array | None = None) -> tuple[Array, Array]:
    """Number slot ``slot`` of ``rows`` as (int64 values, valid), only at positions ``at``
    when given: an int, or ``gpu.parse_int`` of another value (an all-digits text)."""
    events = rows if at is None else rows[at]
    tags, raw = s.tags[events, slot], s.numbers[events, slot]
    ids, valid = np.where(tags == INT, raw, 0), tags == INT
    for i in np.flatnonzero(tags == OTHER).tolist():
        parsed = gpu.parse_int(s.values[int(raw[i])])
        if parsed is not None:
            ids[i], valid[i] = parsed, True
    if at is None:
        return ids, valid
    full, ok = np.zeros(len(rows), dtype=np.int64), np.zeros(len(rows), dtype=bool)
    full[at], ok[at] = ids, valid
    return full, ok


def _external_ids(s: Scanned, rows: Array) -> tuple[Array, Array]:
    """``args["External id"]`` (absent: the lower-case spelling) per row (``_ints``' rule)."""
    ids, valid = _ints(s, rows, _EXT)
    lower = s.tags[rows, _EXT] == MISSING
    if lower.any():
        other, other_valid = _ints(s, rows, _EXT_LOWER)
        ids, valid = np.where(lower, other, ids), np.where(lower, other_valid, valid)
    return ids, valid


def _per_value(s: Scanned, codes: Array, fn: Any) -> tuple[Array, Array]:
    """``fn`` (an int or None) of the values at ``codes`` (-1: absent, None) as (int64
    values, valid), once per distinct code."""
    present = np.unique(codes[codes >= 0])
    parsed = [fn(s.values[c]) for c in present.tolist()]
    table = np.zeros(len(s.values) + 1, dtype=np.int64)
    ok = np.zeros(len(s.values) + 1, dtype=bool)
    for c, v in zip(present.tolist(), parsed, strict=True):
        if v is not None:
            table[c + 1], ok[c + 1] = v, True
    return table[codes + 1], ok[codes + 1]


def _dims(s: Scanned, codes: Array) -> tuple[Array, Array]:
    """A kernel ``grid``/``block`` as (int32 [n, 3], valid): ``[x, y, z]`` of int32s, else
    none (``_dim3``). The scanner gives every array its own value: the clean case (every
    value three ints within int32) is checked on the whole column and converted at once."""
    at = np.flatnonzero(codes >= 0)
    values = [s.values[c] for c in codes[at].tolist()]
    lists = set(map(type, values)) <= {list}
    flat: list[Any] = list(chain.from_iterable(values)) if lists else []
    clean = (
        lists
        and set(map(len, values)) <= {3}
        and set(map(type, flat)) <= {int}
        and (not flat or (min(flat) >= -(2**31) and max(flat) < 2**31))
    )
    if not clean:
        dims = [_dim3(v) for v in values]
        at = at[[d is not None for d in dims]]
        flat = [x for d in dims if d is not None for x in d]
    block = np.zeros((codes.size, 3), dtype=np.int32)
    block[at] = np.asarray(flat, dtype=np.int32).reshape(-1, 3)
    valid = np.zeros(codes.size, dtype=bool)
    valid[at] = True
    return block, valid


def _dim3(value: Any) -> list[int] | None:
    """A kernel ``grid``/``block`` ``[x, y, z]`` of int32s, else None."""
    if (
        type(value) is list
        and len(value) == 3
        and all(type(v) is int and -(2**31) <= v < 2**31 for v in value)
    ):
        return value
    return None


def _stream_arg(value: Any) -> int | None:
    return value if type(value) is int and gpu.INT64_MIN <= value <= gpu.INT64_MAX else None


def _same(value: Any) -> Any:
    return value


def _text_or_none(value: Any) -> str | None:
    return value if isinstance(value, str) else None


__all__ = ["ROW_KINDS", "Decoded"]
