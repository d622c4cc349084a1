"""``generic.scanned_events``: parsed events as the compiled scanner's coded columns.

Two oracles: the compiled scanner itself (for every text it accepts, the same ``Scanned``
field by field: real traces, fixtures, generated traces, generated event lists of every
shape); and for values no parser-free oracle has (damaged or unhashable ones), the documented
rules themselves. (While the old generic decoder existed, damaged events were also checked to
give its columns: 300 hypothesis examples, all equal, when it was removed in issue 45.)
"""

from __future__ import annotations

import gzip
import itertools
import math
import random
import sys
from pathlib import Path
from typing import Any

import numpy as np
import orjson
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from tests.conftest import FIXTURES, ROOT, TRACES, kineto_trace_files
from traceforensics.ingest.kineto import colscan
from traceforensics.ingest.kineto.colscan import (
    ARG_NUMBER_KEYS,
    ARG_VALUE_KEYS,
    CODED_KEYS,
    FLOAT,
    INT,
    KEPT_KEYS,
    MISSING,
    NULL,
    NUMBER_KEYS,
    OTHER,
    Scanned,
)
from traceforensics.ingest.kineto.generic import scanned_events

sys.path.insert(0, str(ROOT / "tools"))

needs_scanner = pytest.mark.skipif(
    not colscan.enabled(), reason="the compiled scanner is not built (or turned off)"
)
_SLOTS = (*NUMBER_KEYS, *ARG_NUMBER_KEYS)


# -- comparisons ------------------------------------------------------------------------------


def _same(a: Any, b: Any) -> bool:
    """Equal with the same types throughout (``1``, ``1.0``, ``True`` differ; so do ``0.0``
    and ``-0.0``; NaN equals NaN; dicts in any key order)."""
    if type(a) is not type(b):
        return False
    if isinstance(a, list | tuple):
        return len(a) == len(b) and all(_same(x, y) for x, y in zip(a, b, strict=True))
    if isinstance(a, dict):
        return a.keys() == b.keys() and all(_same(a[k], b[k]) for k in a)
    if isinstance(a, float):
        return (math.isnan(a) and math.isnan(b)) or (a == b and np.signbit(a) == np.signbit(b))
    if isinstance(a, np.ndarray):
        return a.dtype == b.dtype and a.shape == b.shape and bool(np.array_equal(a, b))
    return bool(a == b)


def assert_same_scanned(got: Scanned, want: Scanned) -> None:
    """Every field equal, with types and dtypes."""
    assert got.n == want.n
    assert len(got.values) == len(want.values)
    for i, (a, b) in enumerate(zip(got.values, want.values, strict=True)):
        assert _same(a, b), f"values[{i}]: {a!r} != {b!r}"
    for name in (
        "codes",
        "tags",
        "numbers",
        "has_args",
        "arg_events",
        "arg_keys",
        "arg_values",
        "kept_events",
        "kept_keys",
        "kept_values",
    ):
        a, b = getattr(got, name), getattr(want, name)
        assert a.dtype == b.dtype and a.shape == b.shape, (name, a.dtype, b.dtype, a.shape)
        np.testing.assert_array_equal(a, b, err_msg=name)
    assert got.kept_texts == want.kept_texts


def check_like_scanner(events: list[Any]) -> bool:
    """``scanned_events`` equals the scanner on the compact text of ``events``; False when the
    scanner refuses the text (nothing to compare)."""
    want = colscan.scan(orjson.dumps(events))
    if want is None:
        return False
    assert_same_scanned(scanned_events(events), want)
    return True


# -- equal to the scanner: real and generated traces -----------------------------------------


def _events_of(path: Path) -> list[Any]:
    data = orjson.loads(gzip.decompress(path.read_bytes()))
    events: list[Any] = data["traceEvents"] if isinstance(data, dict) else data
    return events


def _chunks(events: list[Any], size: int = 3000) -> list[list[Any]]:
    """The first, a middle and the last ``size`` events."""
    mid = max(0, len(events) // 2 - size // 2)
    return [events[:size], events[mid : mid + size], events[-size:]]


@needs_scanner
@pytest.mark.parametrize("rel", kineto_trace_files() or ["(none)"])
def test_real_trace_chunks_equal_the_scanner(rel: str) -> None:
    if not (TRACES / rel).is_file():
        pytest.skip("../shared/traces not present (tests on real traces need ../shared)")
    for chunk in _chunks(_events_of(TRACES / rel)):
        assert check_like_scanner(chunk), "the scanner refused a real trace's chunk"


@needs_scanner
@pytest.mark.parametrize(
    "path", sorted((FIXTURES / "recorded").glob("*.json.gz")), ids=lambda p: p.name
)
def test_fixture_traces_equal_the_scanner(path: Path) -> None:
    for chunk in _chunks(_events_of(path)):
        assert check_like_scanner(chunk)


@needs_scanner
@pytest.mark.parametrize("scenario", ["training", "memcpy", "communication", "host_sync"])
def test_generated_traces_equal_the_scanner(scenario: str) -> None:
    import synth
    from synth_kineto import kineto_text

    trace = synth.training_loop() if scenario == "training" else synth.stall_scenario(scenario)
    events = orjson.loads(kineto_text(trace))["traceEvents"]
    assert check_like_scanner(events)


# -- equal to the scanner: every shape of event ----------------------------------------------

#: One value of each kind the scanner reads apart (types, signed zeros, int64 edges).
_KINDS: list[Any] = [None, 0, 1, -7, 2**63 - 1, -(2**63), 1.0, 0.0, -0.0, 2.5, 1e20, -3e-7]
_KINDS += ["", "1", "X", "kernel", 'é∑\n"\\', True, False]
_MISSING = object()


def _without_missing(event: dict[str, Any]) -> dict[str, Any]:
    return {k: v for k, v in event.items() if v is not _MISSING}


@needs_scanner
@pytest.mark.parametrize("key", [*CODED_KEYS, *NUMBER_KEYS])
def test_every_kind_of_value_at_every_top_level_key(key: str) -> None:
    """Each value kind (and absent) at one key of otherwise plain events; the key first, last
    and in the middle of the event, so that first occurrences tie inside one event."""
    base = {"ph": "X", "cat": "kernel", "name": "k", "pid": 1, "tid": 2, "ts": 5, "dur": 1}
    events: list[Any] = []
    for value, where in itertools.product([*_KINDS, _MISSING], range(3)):
        rest = {k: v for k, v in base.items() if k != key}
        items = list(rest.items())
        items.insert([0, len(items) // 2, len(items)][where], (key, value))
        events.append(_without_missing(dict(items)))
    assert check_like_scanner(events)
    assert check_like_scanner(events[::-1])


@needs_scanner
@pytest.mark.parametrize("key", [*ARG_NUMBER_KEYS, *ARG_VALUE_KEYS, *KEPT_KEYS])
def test_every_kind_of_value_at_every_args_key(key: str) -> None:
    arrays: list[Any] = [[], [1, 2], [[1], ["a", None, 2.5, True]], [1, 2]]
    events: list[Any] = []
    for value, args in itertools.product([*_KINDS, *arrays, _MISSING], range(4)):
        a = _without_missing({"device": 0, key: value, "stream": 7, "Input Dims": [[1]]})
        top: dict[str, Any] = {"ph": "X", "cat": "kernel", "name": "k", "pid": 0, "ts": 1}
        if args == 1:  # args first, then the top-level keys: args values come first
            top = {"args": a, **top}
        elif args == 2:
            top["args"] = a
        elif args == 3:
            top["args"] = None
        events.append(top)
    assert check_like_scanner(events)


@needs_scanner
def test_objects_under_kept_keys_and_args_left_unread() -> None:
    """Kept values may be anything (their text); args keys nobody reads are skipped."""
    events: list[Any] = [
        {"ph": "X", "args": {"Call stack": {"a": [1, {"b": None}]}, "other": {"x": 1}}},
        {"ph": "X", "args": {"Concrete Inputs": ["", "1"], "Input Dims": {}, "zz": [[]]}},
        {"ph": "i", "s": "t", "args": {}},
        {},
    ]
    assert check_like_scanner(events)


@needs_scanner
def test_keys_in_every_order_equal_the_scanner() -> None:
    """Events whose keys come in many orders (each object's own order is the text's)."""
    rng = random.Random(45)
    args = {"device": 0, "stream": 7, "correlation": 3, "External id": "4", "grid": [1, 1, 1]}
    args |= {"Input Dims": [[1]], "Call stack": "a;b", "kind": None}
    base = {"ph": "X", "cat": "kernel", "name": "k", "pid": 1, "tid": 2, "ts": 5, "dur": 1}
    events: list[Any] = []
    for i in range(600):
        top, inner = list({**base, "args": args}.items()), list(args.items())
        rng.shuffle(top)
        rng.shuffle(inner)
        event = {k: dict(inner) if k == "args" else v for k, v in top}
        event["name"] = f"k{i % 7}"
        events.append(event)
    assert len({tuple(e) for e in events}) > 64
    assert check_like_scanner(events)


_text = st.text(st.characters(codec="utf-8"), max_size=6)  # (no lone surrogates)
_scalar = (
    st.none()
    | st.booleans()
    | st.integers(-(2**63), 2**63 - 1)
    | st.floats(allow_nan=False, allow_infinity=False)
    | _text
    | st.sampled_from([0, 1, 1.0, 0.0, -0.0, True, "1", "X", 7, "7"])
)
_arg_keys = st.sampled_from(
    [*ARG_NUMBER_KEYS, *ARG_VALUE_KEYS, *KEPT_KEYS[:6], "External ID", "other", "args"]
)
_args = st.dictionaries(
    _arg_keys,
    _scalar | st.lists(_scalar | st.lists(_scalar, max_size=2), max_size=3),
    max_size=7,
)
_event = st.dictionaries(
    st.sampled_from([*CODED_KEYS, *NUMBER_KEYS, "args", "s", "bp", "other"]),
    _scalar | _args,  # (an object at a read top-level key: the scanner refuses it)
    max_size=10,
)
_kineto_like = st.fixed_dictionaries(
    {"ph": st.sampled_from(["X", "i", "s", "f", "M", "B"])},
    optional={
        "cat": st.sampled_from(["kernel", "cpu_op", "ac2g", "gpu_memcpy", "cuda_runtime"]),
        "name": st.sampled_from(["process_name", "thread_name", "aten::mm", "k"]),
        "pid": st.integers(0, 3) | st.just("Spans"),
        "tid": st.integers(0, 3),
        "ts": st.integers(0, 99) | st.floats(0, 99).map(lambda v: round(v, 3)),
        "dur": st.integers(0, 9),
        "id": st.integers(0, 9),
        "bp": st.just("e"),
        "args": st.none() | _args,
    },
)


@needs_scanner
@settings(max_examples=400, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.lists(_event | _kineto_like, max_size=12))
def test_generated_event_lists_equal_the_scanner(events: list[Any]) -> None:
    check_like_scanner(events)


# -- the rules, where no oracle reads the input ----------------------------------------------


def test_non_objects_are_no_events_and_tokens_share_as_the_scanner_shares_them() -> None:
    events: list[Any] = [
        1,
        "x",
        None,
        [{"ph": "X"}],
        {"ph": 1, "cat": 1.0, "name": True, "pid": None, "tid": "1", "id": 1},
        {"ph": -0.0, "cat": 0.0, "name": math.nan, "pid": math.nan, "tid": 2**64},
        {"ph": 2**64},
    ]
    s = scanned_events(events)
    assert s.n == 3
    want = [None, 1, 1.0, True, None, "1", -0.0, 0.0, math.nan, 2**64]
    assert _same(s.values, want)
    assert s.codes.tolist() == [[1, 2, 3, 4, 5, 1], [6, 7, 8, 8, 9, 0], [9, 0, 0, 0, 0, 0]]


def test_number_slots_of_any_value() -> None:
    events: list[Any] = [
        {"ts": 5, "dur": 2.5, "args": {"External id": "7", "correlation": None}},
        {"ts": True, "dur": 2**63, "args": {"external id": math.nan, "correlation": [1]}},
        {"ts": None, "args": [1, 2]},
        {"ts": -(2**63), "dur": math.inf, "args": "x"},
    ]
    s = scanned_events(events)
    assert s.tags.tolist() == [
        [INT, FLOAT, OTHER, MISSING, NULL],
        [OTHER, OTHER, MISSING, FLOAT, OTHER],
        [NULL, MISSING, MISSING, MISSING, MISSING],
        [INT, FLOAT, MISSING, MISSING, MISSING],
    ]
    assert s.has_args.tolist() == [True, True, False, False]
    assert [s.slot(k, 0) for k in _SLOTS] == [5, 2.5, "7", colscan.UNSET, None]
    assert s.slot("ts", 1) is True and s.slot("dur", 1) == 2**63
    assert math.isnan(s.slot("external id", 1)) and s.slot("correlation", 1) == [1]
    assert s.slot("ts", 3) == -(2**63) and s.slot("dur", 3) == math.inf


def test_unhashable_values_are_entries_of_their_own() -> None:
    """Lists and dicts where a scalar belongs (damaged) are coded by position, never hashed;
    equal ones do not share."""
    pid, tid, name = [1], [1], {"a": [2]}
    events: list[Any] = [
        {"ph": "X", "pid": pid, "tid": tid, "name": name, "ts": [3], "id": {}},
        {"ph": "X", "pid": pid, "args": {"device": {"d": 1}, "grid": [1], "correlation": {}}},
        {"ph": "X", "args": {"Input Dims": {"x": [math.nan]}, "External id": [[]]}},
    ]
    s = scanned_events(events)
    codes = s.codes.tolist()
    assert codes[0][3] != codes[1][3] and codes[0][3] != codes[0][4]
    assert s.values[codes[0][3]] is pid and s.values[codes[1][3]] is pid
    assert s.values[codes[0][2]] is name and s.values[codes[0][5]] == {}
    assert s.slot("ts", 0) == [3] and s.tags[0, 0] == OTHER
    assert s.slot("correlation", 1) == {} and s.slot("External id", 2) == [[]]
    devices = {
        ARG_VALUE_KEYS[k]: s.values[v] for k, v in zip(s.arg_keys, s.arg_values, strict=True)
    }
    assert devices == {"device": {"d": 1}, "grid": [1]}
    assert s.kept_texts == ['{"x":[null]}']
    assert len(s.values) == 1 + 11  # "X" once, every list and dict its own
