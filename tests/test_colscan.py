"""The compiled column scanner (``ingest/kineto/_colscan.c``) against a JSON parser.

Whatever text the scanner accepts it must read exactly as ``json.loads`` does (the same values
of the same types; each kept arg's text as written in the input); whatever it refuses goes to
the generic path. Events are generated (hypothesis), cut, damaged, and taken from real traces;
the frames a scanned chunk gives (``decode.Decoded``, then the whole-file rules:
``rules.extract``) are compared with those of its parsed events (``generic.scanned_events``).
"""

from __future__ import annotations

import json
import shutil
import sys
from pathlib import Path
from typing import Any

import numpy as np
import orjson
import polars as pl
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from polars.testing import assert_frame_equal

from tests.conftest import kineto_trace_files, shared_trace
from traceforensics.ingest.kineto import colscan, load_kineto
from traceforensics.ingest.kineto import text as kt
from traceforensics.ingest.kineto.colscan import KEPT_KEYS as _KEPT
from traceforensics.ingest.kineto.decode import Decoded
from traceforensics.ingest.kineto.generic import scanned_events
from traceforensics.ingest.kineto.rules import Extracted, extract
from traceforensics.ingest.kineto.scanner import RULE_FIELDS
from traceforensics.model.session import TraceSession

needs_scanner = pytest.mark.skipif(
    not colscan.AVAILABLE, reason="the column scanner was not built (no C compiler at install)"
)


def test_the_scanner_is_built_where_a_compiler_is() -> None:
    """CI and this machine have a C compiler: the compiled path must be the one tested."""
    if shutil.which("cc") is None and shutil.which("gcc") is None:
        pytest.skip("no C compiler on this machine")
    assert colscan.AVAILABLE, "pip install -e . did not build _colscan (see setup.py)"


# -- values ---------------------------------------------------------------------------------

_text = st.text(
    st.characters(codec="utf-8", exclude_categories=("Cs",))
    | st.sampled_from('"\\/\b\f\n\r\t\x00\x1f'),
    max_size=12,
)
_scalar = (
    st.none()
    | st.booleans()
    | st.integers(-(2**63), 2**63 - 1)
    | st.floats(allow_nan=False, allow_infinity=False)
    | _text
)
_json = st.recursive(
    _scalar,
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(_text, inner, max_size=3),
    max_leaves=8,
)
_RULE_KEYS = list(RULE_FIELDS.values())
_KEPT_KEYS = list(_KEPT)
_arg_value = st.none() | st.booleans() | st.integers(-(2**63), 2**63 - 1) | _text
_clean_args = st.dictionaries(
    st.sampled_from([*_RULE_KEYS, *_KEPT_KEYS, "other", "Ev Idx"]),
    st.one_of(_arg_value, st.lists(_arg_value, max_size=3), _json),
    max_size=6,
).map(lambda d: {k: v for k, v in d.items() if k not in RULE_FIELDS.values() or _plain(v)})
#: The top-level keys the scanner reads.
_READ_KEYS = (*colscan.CODED_KEYS, *colscan.NUMBER_KEYS)
_EVENT_KEYS = [*_READ_KEYS, "s", "bp", "other"]


def _plain(value: Any) -> bool:
    """A value the scanner builds for a rule key: a scalar or (nested) lists of scalars."""
    if isinstance(value, list):
        return all(_plain(v) for v in value)
    return not isinstance(value, dict)


def _clean_event() -> st.SearchStrategy[dict[str, Any]]:
    top = st.dictionaries(st.sampled_from(_EVENT_KEYS), _scalar, max_size=9)
    args = st.none() | _clean_args
    return st.tuples(top, st.booleans(), args).map(
        lambda t: {**t[0], "args": t[2]} if t[1] else t[0]
    )


_wild_event = st.dictionaries(
    st.sampled_from([*_EVENT_KEYS, "args", "p\\u0068"]),
    # lone surrogates too: json.dumps writes them as \\u escapes, which msgspec refuses
    _json | st.integers(min_value=2**63, max_value=2**70) | st.text(st.characters(), max_size=4),
    max_size=8,
)


def _dump(events: list[Any], style: int) -> bytes:
    if style == 0:
        return json.dumps(events, separators=(",", ":"), ensure_ascii=False).encode(
            errors="surrogatepass"
        )
    if style == 1:
        return json.dumps(events, indent=2, ensure_ascii=True).encode()
    return json.dumps(events, indent="\t", separators=(" ,\r\n", " : "), ensure_ascii=False).encode(
        errors="surrogatepass"
    )  # a lone surrogate as invalid UTF-8: refused


# -- expectations from a JSON parser ----------------------------------------------------------

UNSET = colscan.UNSET


def decode_events(text: bytes) -> list[Any]:
    """The events of a chunk as the generic path parses them."""
    events: list[Any] = json.loads(text)
    return events


def _canonical(value: Any) -> str:
    """One text per value and type (``1``, ``1.0`` and ``True`` differ; key order kept)."""
    return json.dumps(value, ensure_ascii=True)


def _same(a: Any, b: Any) -> bool:
    """Equal with the same types throughout (``1``, ``1.0`` and ``True`` differ)."""
    if type(a) is not type(b):
        return False
    if isinstance(a, list):
        return len(a) == len(b) and all(_same(x, y) for x, y in zip(a, b, strict=True))
    if isinstance(a, dict):
        return a.keys() == b.keys() and all(_same(a[k], b[k]) for k in a)
    if isinstance(a, float):
        return a == b and bool(np.signbit(a) == np.signbit(b))
    return bool(a == b)


def _expected(text: bytes) -> tuple[list[list[Any]], list[Any], set[tuple[int, str, str]]]:
    events = decode_events(text)
    columns = [[e.get(key) for e in events] for key in _READ_KEYS]
    rule: list[Any] = []
    kept: set[tuple[int, str, str]] = set()
    for i, e in enumerate(events):
        a = e.get("args")
        if a is None:
            rule.append(None)
            continue
        rule.append({key: a[key] for key in RULE_FIELDS.values() if key in a})
        for key in _KEPT:
            if key in a:
                kept.add((i, key, _canonical(a[key])))
    return columns, rule, kept


def _as_read(got: colscan.Scanned) -> tuple[list[list[Any]], list[Any]]:
    """The scanned chunk as the parser's values: columns of ``_READ_KEYS`` and per
    event the rule args present (None without args)."""
    columns = [
        [got.values[c] for c in got.codes[:, j].tolist()] for j in range(len(colscan.CODED_KEYS))
    ]
    for key in colscan.NUMBER_KEYS:
        slots = [got.slot(key, i) for i in range(got.n)]
        columns.append([None if v is UNSET else v for v in slots])
    rule: list[Any] = [{} if a else None for a in got.has_args.tolist()]
    for i, d in enumerate(rule):
        if d is None:
            continue
        for key in colscan.ARG_NUMBER_KEYS:
            v = got.slot(key, i)
            if v is not UNSET:
                d[key] = v
    for e, k, v in zip(got.arg_events, got.arg_keys, got.arg_values, strict=True):
        d = rule[int(e)]
        assert d is not None, "an args value of an event without args"
        assert colscan.ARG_VALUE_KEYS[k] not in d, "a key read twice"
        d[colscan.ARG_VALUE_KEYS[k]] = got.values[v]
    return columns, rule


def _check(text: bytes, got: colscan.Scanned) -> None:
    columns, rule, kept = _expected(text)
    assert got.n == len(columns[0])
    assert got.values[0] is None
    mine_columns, mine_rule = _as_read(got)
    for mine, theirs in zip(mine_columns, columns, strict=True):
        assert len(mine) == len(theirs)
        assert all(_same(a, b) for a, b in zip(mine, theirs, strict=True)), (mine, theirs)
    assert len(mine_rule) == len(rule)
    for mine_d, theirs_d in zip(mine_rule, rule, strict=True):
        assert (mine_d is None) == (theirs_d is None)
        if mine_d is not None:
            assert mine_d.keys() == theirs_d.keys()
            assert all(_same(mine_d[k], theirs_d[k]) for k in mine_d)
    triples = {
        (int(e), colscan.KEPT_KEYS[k], _canonical(json.loads(got.kept_texts[v])))
        for e, k, v in zip(got.kept_events, got.kept_keys, got.kept_values, strict=True)
    }
    assert len(triples) == len(got.kept_events)
    assert triples == kept
    # each kept text as written in the input
    assert all(t.encode() in text for t in got.kept_texts), got.kept_texts


@needs_scanner
@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.lists(_clean_event(), max_size=6), st.integers(0, 2))
def test_clean_events_read_as_the_parser_reads_them(
    events: list[dict[str, Any]], style: int
) -> None:
    """Objects of scalars (any strings, escapes, numbers of int64, floats) with args of
    scalars and lists: always accepted, and read as ``json.loads`` reads them."""
    text = _dump(events, style)
    got = colscan.scan(text)
    assert got is not None, text
    _check(text, got)


@needs_scanner
@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.lists(_wild_event | _clean_event(), max_size=5), st.integers(0, 2))
def test_any_json_is_read_the_same_or_left_to_the_generic_path(
    events: list[dict[str, Any]], style: int
) -> None:
    text = _dump(events, style)
    got = colscan.scan(text)
    if got is not None:
        _check(text, got)


@needs_scanner
@settings(max_examples=150, deadline=None)
@given(st.lists(_clean_event(), min_size=1, max_size=4), st.data())
def test_cut_or_damaged_text_is_refused(events: list[dict[str, Any]], data: st.DataObject) -> None:
    """A text cut anywhere, or with a byte replaced by one that breaks it, is never read (the
    stream relies on a wrong cut failing to decode)."""
    text = _dump(events, data.draw(st.integers(0, 2)))
    cut = data.draw(st.integers(0, len(text) - 1))
    assert colscan.scan(text[:cut]) is None
    at = data.draw(st.integers(0, len(text) - 1))
    bad = (
        text[:at] + data.draw(st.sampled_from([b"\xff", b"\xc0\x80", b"\xed\xa0\x80"])) + text[at:]
    )
    assert colscan.scan(bad) is None


@needs_scanner
@pytest.mark.parametrize(
    "text",
    [
        b'[{"ph": "X"}] x',  # trailing text
        b'[{"ph": "X",}]',  # trailing comma
        b'[{"ph": "X"} {"ph": "X"}]',
        b'[{"ph": 01}]',
        b'[{"ph": 1.}]',
        b'[{"ph": -}]',
        b'[{"ph": "\\x"}]',  # bad escape
        b'[{"ph": "\\ud800"}]',  # lone surrogate
        b'[{"ph": "a\tb"}]',  # raw control character
        b'[{"ph": tru}]',
        b"[1]",  # an element that is not an object (the generic path's case)
        b'[{"ph": [1]}]',  # a nested top-level value
        b'[{"args": [1]}]',  # args that are not an object
        b'[{"ph": "X", "ph": "i"}]',  # duplicate key
        b'[{"id": 9223372036854775808}]',  # beyond int64
        b'[{"ts": 1e400}]',  # overflows a double
        b'[{"p\\u0068": "X"}]',  # escaped key
        b'[{"zz": "\\ud800"}]',  # a lone surrogate, even in a value nobody reads
        b'[{"args": {"Call stack": "\\udc00"}}]',  # ... or in a kept value
        b'[{"args": {"o": "\\ud83d\\u0041"}}]',  # a high surrogate without its low half
        b'[{"ts": 1' + b"0" * 2000 + b"e-2000}]",  # a number too long for the fast parse
    ],
)
def test_texts_outside_the_clean_case_are_refused(text: bytes) -> None:
    assert colscan.scan(text) is None


@needs_scanner
def test_the_switch_turns_the_scanner_off(monkeypatch: pytest.MonkeyPatch) -> None:
    text = b'[{"ph": "X", "name": "a"}]'
    assert colscan.scan(text) is not None
    monkeypatch.setenv("TRACEFORENSICS_PURE_DECODE", "1")
    assert colscan.scan(text) is None


# -- frames of real chunks --------------------------------------------------------------------


def _parsed(text: bytes) -> colscan.Scanned:
    """A chunk's events as the generic path reads them: parsed (orjson, as ``reader``), then
    coded (``generic.scanned_events``)."""
    return scanned_events(orjson.loads(text))


def _decoded(chunks: list[colscan.Scanned]) -> Decoded:
    decoded = Decoded()
    for chunk in chunks:
        decoded.add(chunk)
    return decoded


def _canonical_args(args: pl.DataFrame) -> pl.DataFrame:
    """The args table with each value's JSON text in one spelling (the scanner keeps the text
    as written, the generic path re-encodes it compactly)."""
    values = args.get_column("value").cast(pl.String).to_list()
    return args.with_columns(
        pl.col("key").cast(pl.String),
        pl.Series("value", [_canonical(json.loads(v)) for v in values], dtype=pl.String),
    )


def _extracted(decoded: Decoded) -> Extracted | str:
    """The file's frames by the whole-file rules (``rules.extract``), or the error they raise
    (a chunk of no usable row, GPU rows none of which has a device: refused)."""
    try:
        return extract(Path("chunk.json"), decoded, 0, 0, None)
    except Exception as exc:
        return f"{type(exc).__name__}: {exc}"


def _assert_same_frames(a: Decoded, b: Decoded) -> None:
    """The same decoded state and, by ``rules.extract``, the same events and args frames."""
    # with the types: ``1 == 1.0 == True``, but a pid shared as True is no pid downstream
    assert _same(a.meta, b.meta)
    assert {k: (list(t), list(i)) for k, (t, i) in a.flows.items()} == {
        k: (list(t), list(i)) for k, (t, i) in b.flows.items()
    }
    for name in ("unknown_cats", "float_timestamps", "negative_dur", "bad_times", "events_seen"):
        assert getattr(a, name) == getattr(b, name), name
    assert a.n_rows == b.n_rows
    assert _same(a.bad_example, b.bad_example)
    assert repr(a.first_time_error) == repr(b.first_time_error)
    got, want = _extracted(a), _extracted(b)
    if isinstance(got, str) or isinstance(want, str):
        assert got == want
        return
    assert_frame_equal(got.events, want.events, check_exact=True, categorical_as_str=True)
    assert_frame_equal(_canonical_args(got.args), _canonical_args(want.args), check_exact=True)
    for name in (
        "devices_seen",
        "runtime_names",
        "legacy_categories",
        "float_timestamps",
        "flow_filled",
        "ids_used",
        "warnings",
    ):
        assert getattr(got, name) == getattr(want, name), name


def _kineto_event(i: int) -> st.SearchStrategy[dict[str, Any]]:
    """A Kineto-like event: the phases and categories the rules sort on, ids that link."""
    cats = [
        "cpu_op",
        "kernel",
        "cuda_runtime",
        "gpu_memcpy",
        "ac2g",
        "user_annotation",
        "python_function",
        "Trace",
        "nonsense",
        None,
        3,
    ]
    args = st.fixed_dictionaries(
        {},
        optional={
            # (an id beyond int64 is no id; as a JSON int the scanner refuses it: see below)
            "External id": st.integers(0, 50)
            | st.sampled_from(["7", "99999999999999999999", 1.5, True]),
            "external id": st.integers(0, 50),
            "correlation": st.integers(0, 50)
            | st.sampled_from(["8", "18446744073709551616", None]),
            "device": st.integers(0, 3),
            "stream": st.integers(0, 9),
            "bytes": st.integers(0, 10**9),
            "grid": st.lists(st.integers(1, 9), min_size=3, max_size=3),
            "labels": _text,
            "name": _text,
            "Input Dims": st.lists(st.lists(st.integers(0, 64), max_size=3), max_size=3),
            "Collective name": st.sampled_from(["allreduce", "broadcast"]),
            "Call stack": _text,
            "Sequence number": st.integers(0, 99),
        },
    )
    return st.fixed_dictionaries(
        {
            "ph": st.sampled_from(["X", "X", "X", "i", "M", "s", "f", "B"]),
            "cat": st.sampled_from(cats),
            "name": _text,
            "pid": st.integers(0, 3) | st.sampled_from(["Spans", ""]),
            "tid": st.integers(0, 3) | st.just("stream 7"),
            # mostly plain numbers; now and then one that takes the per-value path (a text,
            # beyond int64 ns, beyond 2**53 µs, more than three decimals, none at all)
            "ts": st.integers(0, 10**9)
            | st.floats(0, 1e9).map(lambda v: round(v, 3))
            | st.sampled_from(["12.5", None, 2**62, -(2**62), 1e300, 12.3456789, "x"]),
        },
        optional={
            "dur": st.integers(-5, 10**6)
            | st.floats(0, 1e6).map(lambda v: round(v, 3))
            | st.sampled_from(["5", None, 1e17, 0.0004, -2.5]),
            "id": st.integers(0, 50),
            "args": st.none() | args,
        },
    )


@needs_scanner
@settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.lists(st.integers(0, 1).flatmap(_kineto_event), max_size=30), st.integers(0, 2))
def test_a_chunk_gives_the_frames_of_the_generic_path(events: list[Any], style: int) -> None:
    """Rows, kinds, rule args, correlations, kept args, flows, metadata and times: the events
    and args frames of a scanned chunk equal those of its parsed events."""
    text = _dump(events, style)
    scanned = colscan.scan(text)
    assert scanned is not None
    _assert_same_frames(_decoded([scanned]), _decoded([_parsed(text)]))


#: Values that compare equal across types (``1``, ``1.0``, ``True``), signed zeros, escaped
#: spellings of the same text: the cases where sharing one object per value could pick another.
_odd = st.sampled_from(
    [0, 1, True, False, 1.0, 0.0, -0.0, None, "", "1", "X", "\u0058", 7, 7.0, "7", 2**63 - 1]
)


def _odd_event() -> st.SearchStrategy[dict[str, Any]]:
    number = (
        st.integers(-(2**63), 2**63 - 1) | st.floats(allow_nan=False, allow_infinity=False) | _odd
    )
    return st.fixed_dictionaries(
        {},
        optional={
            "ph": st.sampled_from(["X", "X", "i", "I", "M", "s", "f", "B", None, 1, "\u0058"]),
            "cat": st.sampled_from(
                ["cpu_op", "kernel", "cuda_runtime", "ac2g", "Trace", "nonsense", None, 3, True]
            ),
            "name": _text | _odd,
            "pid": _odd | st.integers(0, 3),
            "tid": _odd | st.just("stream 7"),
            "ts": number,
            "dur": number,
            "id": _odd | st.integers(0, 9),
            "args": st.none()
            | st.fixed_dictionaries(
                {},
                optional={
                    key: _odd | st.lists(_odd, max_size=3)
                    for key in ("External id", "external id", "correlation", "device", "stream")
                }
                | {"grid": st.lists(st.integers(0, 9), max_size=3) | _odd, "labels": _odd | _text}
                | {"Input Dims": _odd, "Collective name": _odd | _text},
            ),
        },
    )


@needs_scanner
@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.lists(st.lists(_odd_event(), max_size=12), min_size=1, max_size=4), st.data())
def test_chunks_of_odd_values_give_the_frames_of_the_generic_path(
    chunks: list[list[Any]], data: st.DataObject
) -> None:
    """Several chunks into one ``Decoded`` (the shared values carried from chunk to chunk),
    each scanned or parsed as drawn: the same frames, with the same types, as all parsed."""
    mixed, parsed_only = Decoded(), Decoded()
    for events in chunks:
        text = _dump(events, data.draw(st.integers(0, 2)))
        scanned = colscan.scan(text) if data.draw(st.booleans()) else None
        mixed.add(scanned if scanned is not None else _parsed(text))
        parsed_only.add(_parsed(text))
    _assert_same_frames(mixed, parsed_only)


@needs_scanner
def test_equal_values_of_two_types_are_shared_in_the_order_the_column_meets_them() -> None:
    """``tid`` 1.0 is read before ``pid`` 1 (so its code is the lower), but the pid column
    meets 1 first: as on the generic path, the pid column holds the int 1 twice; each column
    shares its own values (a ``tid`` 1.0 does not make a ``pid`` 1 a float)."""
    text = b'[{"ph":"X","cat":"cpu_op","name":"a","tid":1.0,"pid":1,"ts":0},' + (
        b'{"ph":"X","cat":"cpu_op","name":"a","tid":2,"pid":1.0,"ts":1}]'
    )
    scanned = colscan.scan(text)
    assert scanned is not None
    got, want = _decoded([scanned]), _decoded([_parsed(text)])
    # (the raw pid and tid values, each column's met in the order its rows have them)
    assert [type(v) for v in want.distinct["pid"]] == [int]
    assert [type(v) for v in want.distinct["tid"]] == [float, int]
    for column in ("pid", "tid"):
        assert _same(list(got.distinct[column]), list(want.distinct[column]))
    _assert_same_frames(got, want)


@needs_scanner
@pytest.mark.parametrize("path", ["scanner", "generic"])
def test_chunks_share_one_code_per_name_in_the_order_rows_first_have_it(path: str) -> None:
    """Each distinct row name is one code across chunks, numbered in the order of the first
    row that has it (a metadata or flow event's name is no row's); every row keeps its own
    name and kind."""

    def row(name: str, cat: str, ts: int, ph: str = "X") -> dict[str, Any]:
        return {"ph": ph, "cat": cat, "name": name, "pid": 1, "tid": 1, "ts": ts, "dur": 1}

    first = [
        {"ph": "M", "name": "process_labels", "pid": 1, "args": {"labels": "CPU"}},
        {"ph": "s", "cat": "ac2g", "name": "flow", "id": 1, "pid": 1, "tid": 1, "ts": 0},
        row("b", "cpu_op", 0),
        row("a", "user_annotation", 1),
        row("b", "cpu_op", 2, "i"),
    ]
    second = [row("c", "python_function", 3), row("a", "cpu_op", 4), row("b", "nonsense", 5)]
    decoded = Decoded()
    for events in (first, second):
        text = _dump(events, 0)
        chunk = colscan.scan(text) if path == "scanner" else _parsed(text)
        assert chunk is not None
        decoded.add(chunk)
    assert list(decoded.distinct["name"]) == ["b", "a", "c"]
    assert decoded.n_rows == 6
    table = extract(Path("t.json"), decoded, 0, 0, None).events
    assert table["name"].cast(pl.String).to_list() == ["b", "a", "b", "c", "a", "b"]
    kinds = ["cpu_op", "annotation", "marker", "python", "cpu_op", "annotation"]
    assert table["kind"].cast(pl.String).to_list() == kinds


def test_many_distinct_phases_and_categories_stay_linear() -> None:
    """A damaged chunk with a new (ph, cat) pair per event is classed per pair it holds, not
    per pair of every phase with every category (that was 7 s for 6000 events)."""
    events = [{"ph": f"p{i}", "cat": f"c{i}", "name": "a", "ts": i} for i in range(20_000)]
    text = _dump(events, 0)
    scanned = colscan.scan(text)
    if scanned is None:
        pytest.skip("the column scanner is not built")
    decoded = Decoded()
    decoded.add(scanned)  # quadratic, this would not finish for minutes
    assert decoded.n_rows == 0 and decoded.events_seen == 20_000


def test_ids_beyond_int64_are_no_ids(tmp_path: Any) -> None:
    """An External id, correlation, stream or tid beyond int64 (a JSON int the scanner
    refuses, or a text; zero-padded to thousands of digits too) and a grid beyond int32 are
    read as no value, not a crash building the column (the trace was refused, exit 2)."""
    events = [
        {
            "ph": "X",
            "cat": "cpu_op",
            "name": "a",
            "pid": 1,
            "tid": 1,
            "ts": 0,
            "dur": 5,
            "args": {"External id": 2**63},
        },
        {
            "ph": "X",
            "cat": "cuda_runtime",
            "name": "cudaLaunchKernel",
            "pid": 1,
            "tid": 1,
            "ts": 1,
            "dur": 2,
            "args": {"External id": "99999999999999999999", "correlation": 2**64},
        },
        {
            "ph": "X",
            "cat": "kernel",
            "name": "k",
            "pid": 0,
            "tid": 7,
            "ts": 2,
            "dur": 3,
            "args": {"device": 0, "stream": 7, "correlation": 3, "External id": 4},
        },
        {  # a kernel: stream beyond int64 (the tid's instead), grid beyond int32
            "ph": "X",
            "cat": "kernel",
            "name": "k2",
            "pid": 0,
            "tid": 9,
            "ts": 6,
            "dur": 1,
            "args": {"device": 0, "stream": 2**64, "grid": [2**40, 1, 1], "block": [1, 1, 1]},
        },
        {  # a host op: tid beyond int64, a zero-padded External id of 5000 digits
            "ph": "X",
            "cat": "cpu_op",
            "name": "b",
            "pid": 1,
            "tid": 2**64,
            "ts": 8,
            "dur": 1,
            "args": {"External id": "0" * 5000 + "12"},
        },
    ]
    path = tmp_path / "big_ids.json"
    path.write_text(json.dumps({"traceEvents": events}))
    table = load_kineto([path]).events.sort("start_ns")
    assert table["external_id"].to_list() == [None, None, 4, None, 12]
    assert table["correlation"].to_list() == [None, None, 3, None, None]
    assert table["stream"].to_list() == [None, None, 7, 9, None]
    assert table["tid"].to_list() == [1, 1, None, None, None]
    assert table["grid"].to_list()[3] is None and table["block"].to_list()[3] == [1, 1, 1]


def _same_session(a: TraceSession, b: TraceSession) -> None:
    """The same tables; kept-arg values compared decoded (the scanner keeps each as written,
    the generic path re-encodes it compactly)."""
    assert a.events.equals(b.events)

    def decoded(s: TraceSession) -> list[tuple[int, str, Any]]:
        rows = s.args.with_columns(pl.col(pl.Categorical).cast(pl.String))
        return [
            (e, k, json.loads(v)) for e, k, v in rows.select("event_id", "key", "value").iter_rows()
        ]

    assert decoded(a) == decoded(b)
    assert a.meta.warnings == b.meta.warnings
    assert a.meta.devices == b.meta.devices


# -- floats read without the GIL (Clinger's fast path, else strtod_l) -----------------------

_digits = st.text("0123456789", min_size=1, max_size=24)
_float_text = st.builds(
    lambda sign, whole, frac, exp: (
        f"{sign}{whole.lstrip('0') or '0'}"
        + (f".{frac}" if frac is not None else "")
        + (f"{exp[0]}{exp[1]}{exp[2]}" if exp is not None else "")
    ),
    st.sampled_from(["", "-"]),
    _digits,
    st.none() | _digits,
    st.none()
    | st.tuples(
        st.sampled_from("eE"), st.sampled_from(["", "+", "-"]), st.integers(0, 340).map(str)
    ),
).filter(lambda t: "." in t or "e" in t.lower())
#: Texts at the edges of the fast path: 2^53 and one past it, 10^22 and 10^23, 15-19 and 20
#: digits, zeros of both signs, subnormals, the largest double, overflow (refused).
_FLOAT_EDGES = [
    "9007199254740992.0",
    "9007199254740993.0",
    "9007199254740993e-3",
    "1e22",
    "1e23",
    "1e-22",
    "1e-23",
    "123456789012345.6",
    "1234567890123456789.0",
    "12345678901234567890.0",
    "0.0",
    "-0.0",
    "0e999",
    "-0e-999",
    "0.000000000000000000000001",
    "4.9e-324",
    "2.5e-324",
    "1.7976931348623157e308",
    "1.7976931348623158e308",
    "1e309",
    "-1e400",
    "1699999999999.123",
    "0.1",
    "0.30000000000000004",
    "2.2250738585072011e-308",
    "5e-324",
]


def _scanned_float(text: str) -> float | None:
    """``ts`` of one event whose ts is ``text``, as the scanner reads it (None: refused)."""
    event = f'{{"ts": {text}, "name": {text}, "args": {{"Input Dims": [1]}}}}'
    out = colscan.scan(f"[{event}]".encode())
    if out is None:
        return None
    tag = int(out.tags[0, 0])
    assert tag == colscan.FLOAT, text
    slot = colscan.slot_value(tag, int(out.numbers[0, 0]), out.values)
    # the same text as a coded value (made after the scan from what the scan read)
    coded = out.values[int(out.codes[0, colscan.CODED_KEYS.index("name")])]
    assert isinstance(coded, float) and _same_bits(coded, slot), (text, coded, slot)
    return float(slot)


def _reads_as_python(text: str) -> None:
    expected = float(text)
    got = _scanned_float(text)
    if expected in (float("inf"), float("-inf")):
        assert got is None, text
    else:
        assert got is not None and _same_bits(got, expected), (text, got, expected)


def _same_bits(a: float, b: float) -> bool:
    return bool(np.float64(a).tobytes() == np.float64(b).tobytes())


@needs_scanner
@settings(max_examples=3000, deadline=None)
@given(_float_text)
def test_float_texts_read_as_python_reads_them(text: str) -> None:
    """Every float text the scanner accepts has the bits ``float()`` gives it (correct
    rounding, the sign of zero); one that overflows is refused, as before."""
    _reads_as_python(text)


@needs_scanner
@pytest.mark.parametrize("text", _FLOAT_EDGES)
def test_float_texts_at_the_edges_of_the_fast_path(text: str) -> None:
    _reads_as_python(text)


@needs_scanner
def test_scans_on_threads_at_once_read_what_one_scan_reads() -> None:
    """The scan runs without the GIL: four threads scanning chunks at the same time (each its
    own chunks, one text shared by two) give what the same scans give one after another."""
    import threading

    trace = shared_trace("kineto/resnet50_v100_workers0.pt.trace.json.gz")
    import gzip

    events = json.loads(gzip.decompress(trace.read_bytes()))["traceEvents"]
    step = len(events) // 6
    texts = [json.dumps(events[i * step : (i + 1) * step]).encode() for i in range(6)]
    texts.append(texts[0])
    alone = [colscan.scan(t) for t in texts]
    assert all(a is not None for a in alone)
    together: list[colscan.Scanned | None] = [None] * len(texts)

    def run(i: int) -> None:
        for _ in range(3):
            together[i] = colscan.scan(texts[i])

    threads = [threading.Thread(target=run, args=(i,)) for i in range(len(texts))]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    for a, b in zip(alone, together, strict=True):
        assert a is not None and b is not None
        assert a.values == b.values and a.kept_texts == b.kept_texts
        for name in ("codes", "tags", "numbers", "has_args", "arg_events", "arg_values"):
            assert np.array_equal(getattr(a, name), getattr(b, name)), name


@needs_scanner
@pytest.mark.parametrize("path", kineto_trace_files() or ["(no ../shared)"])
def test_real_traces_load_the_same_with_and_without_the_scanner(
    path: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Every real Kineto trace loads to the same table with the scanner as by the generic path
    alone, and the scanner read at least one chunk of each (else it tested nothing)."""
    trace = shared_trace(path)
    scanned = [0]
    real = colscan.scan

    def counting(text: bytes) -> colscan.Scanned | None:
        out = real(text)
        scanned[0] += out is not None
        return out

    monkeypatch.setattr(kt, "CHUNK_BYTES", 1 << 20)  # several chunks even for small files
    monkeypatch.setattr(colscan, "scan", counting)
    with_scanner = load_kineto([trace])
    assert scanned[0] > 0, f"{path}: no chunk was scanned"
    monkeypatch.setenv("TRACEFORENSICS_PURE_DECODE", "1")
    _same_session(with_scanner, load_kineto([trace]))


if __name__ == "__main__":  # pragma: no cover
    sys.exit(pytest.main([__file__, "-q"]))
