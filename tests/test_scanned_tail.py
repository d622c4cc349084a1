"""The end of a file (its last events, then the keys after the event list) split by the scanner
(``kt.scanned_tail``: the stream and the early-scan child) gives what a JSON parser reads
there, and refuses what is not plain JSON or not the scanner's clean case (the file then goes
to the generic reader, which reads it as a JSON parser does)."""

from __future__ import annotations

import orjson
import pytest

from traceforensics.ingest.kineto import scanner
from traceforensics.ingest.kineto import text as kt

needs_scanner = pytest.mark.skipif(not scanner.enabled(), reason="the scanner is off")

EVENT = b'{"ph": "X", "name": "a]}\\"[", "ts": 1, "dur": 2, "args": {"shape": [[1, 2]]}}'
TAILS = {
    "keys after": b"["
    + EVENT
    + b', {"ph": "i", "ts": 3}\n], "traceName": "t", "n": [1, {"x": 2}]}',
    "no keys": b"[" + EVENT + b"]}",
    "white space": b"[ \n" + EVENT + b' \r\n]\t,\n "k" : 1 }\n\n',
    "empty list": b'[], "k": null}',
    # not plain JSON, or not the end of one object: refused by both
    "trailing comma": b"[" + EVENT + b"],}",
    "no comma": b"[" + EVENT + b'] "k": 1}',
    "garbage after": b"[" + EVENT + b'], "k": 1} x',
    "unclosed": b"[" + EVENT + b', "k": 1}',
    "vertical tab": b"[" + EVENT + b"]\x0b}",
}


def _parsed(tail: bytes) -> tuple[dict[str, object], object] | None:
    """What a JSON parser reads in ``tail``: (the keys but traceEvents, the events)."""
    try:
        whole = orjson.loads(b'{"traceEvents":' + tail)
    except orjson.JSONDecodeError:
        return None
    return {k: v for k, v in whole.items() if k != "traceEvents"}, whole["traceEvents"]


@needs_scanner
@pytest.mark.parametrize("case", sorted(TAILS))
def test_the_scanner_splits_a_tail_as_json_reads_it(case: str) -> None:
    tail = TAILS[case]
    want = _parsed(tail)
    got = kt.scanned_tail(bytearray(tail))
    if want is None:
        assert got is None
    else:
        assert got is not None
        keys, events = got
        assert (keys, orjson.loads(events)) == want


@needs_scanner
def test_a_second_event_list_is_left_to_the_generic_reader() -> None:
    # (JSON's last value wins there; the scanner's split would have kept the first)
    tail = b"[" + EVENT + b'], "traceEvents": [], "k": 1}'
    assert kt.scanned_tail(bytearray(tail)) is None


@needs_scanner
def test_events_the_scanner_refuses_are_left_to_the_generic_reader() -> None:
    # an integer beyond int64: valid JSON the scanner does not read
    tail = b'[{"ph": "X", "ts": 99999999999999999999}], "k": 2}'
    assert kt.scanned_tail(bytearray(tail)) is None
