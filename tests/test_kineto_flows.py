"""Launch-flow endpoints grouped by thread (``decode.Decoded._add_flows``).

The grouping is done with arrays (a stable sort by thread); these tests rebuild it with a plain
loop over the events and compare, on interleaved threads, mixed ``"stream 7"``/``7`` spellings,
ids written as text, endpoints without an id, and ids beyond int64 (the checked path), for
both decoders' chunks: the compiled scanner's and the generic reader's parsed events."""

from __future__ import annotations

import json
import random
from typing import Any

import pytest

from traceforensics.ingest.kineto import colscan
from traceforensics.ingest.kineto.decode import Decoded
from traceforensics.ingest.kineto.flows import FlowPoints, thread_key
from traceforensics.ingest.kineto.generic import scanned_events
from traceforensics.ingest.kineto.gpu import parse_int

_THREADS: list[tuple[Any, Any]] = [(1, 1), (1, 2), (0, 7), (0, "stream 7"), ("1", 2), (0, 8)]


def _flow_events(n: int, seed: int, *, huge_id: bool = False) -> list[dict[str, Any]]:
    rng = random.Random(seed)
    events: list[dict[str, Any]] = []
    for i in range(n):
        pid, tid = rng.choice(_THREADS)
        flow_id: Any = rng.choice([i, i, str(i), None]) if i % 11 else None
        events.append(
            {
                "ph": rng.choice(["s", "f", "t"]),
                "cat": rng.choice(["ac2g", "async", "ac2g"]),
                "name": "ac2g",
                "id": flow_id,
                "pid": pid,
                "tid": tid,
                "ts": 1000 + rng.randrange(10**6) / 1000,
            }
        )
    if huge_id:
        events[n // 2]["id"] = 2**64
    return events


def _flows(events: list[dict[str, Any]], path: str) -> dict[Any, FlowPoints]:
    """The endpoints a decoded chunk of ``events`` holds: parsed (``generic``) or scanned."""
    if path == "generic":
        scanned = scanned_events(events)
    else:
        if not colscan.enabled():
            pytest.skip("the compiled scanner is not built (or turned off)")
        got = colscan.scan(json.dumps(events).encode())
        assert got is not None
        scanned = got
    decoded = Decoded()
    decoded.add(scanned)
    return decoded.flows


def _expected(events: list[dict[str, Any]]) -> dict[Any, tuple[list[int], list[int]]]:
    """Endpoints per thread key in file order, by a plain loop (ts exact in ns: the test's
    values have at most three decimals)."""
    out: dict[Any, tuple[list[int], list[int]]] = {}
    for e in events:
        flow_id = parse_int(e["id"])
        if flow_id is None or not -(2**63) <= flow_id < 2**63:
            continue
        key = (thread_key(e["pid"]), thread_key(e["tid"]))
        times, ids = out.setdefault(key, ([], []))
        times.append(round(e["ts"] * 1000))
        ids.append(flow_id)
    return out


@pytest.mark.parametrize("path", ["generic", "scanner"])
@pytest.mark.parametrize(("seed", "huge_id"), [(1, False), (2, False), (3, True)])
def test_flow_endpoints_grouped_by_thread_in_file_order(
    seed: int, huge_id: bool, path: str
) -> None:
    events = _flow_events(3000, seed, huge_id=huge_id)
    if huge_id and path == "scanner":  # (a JSON int beyond int64: the scanner refuses it)
        assert colscan.scan(json.dumps(events).encode()) is None
        return
    got = _flows(events, path)
    want = _expected(events)
    assert set(got) == set(want)
    # "stream 7" and 7 are one thread: five keys for six spellings
    assert len(got) == len({(thread_key(p), thread_key(t)) for p, t in _THREADS})
    for key, (times, ids) in want.items():
        assert list(got[key][0]) == times, key
        assert list(got[key][1]) == ids, key


@pytest.mark.parametrize("path", ["generic", "scanner"])
def test_no_usable_flow_id_gives_no_endpoints(path: str) -> None:
    events = _flow_events(50, 4)
    for e in events:
        e["id"] = None
    assert _flows(events, path) == {}
