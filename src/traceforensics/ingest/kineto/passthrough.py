"""A Kineto file's own events, copied into another Chrome trace (``tf analyze --annotate``).

Two ways, both keeping every original event:

- ``splice``: one well-formed file is copied byte for byte, with the events given inserted
  first in its event list (and a ``"traceforensics"`` key before it); memory holds one piece
  of the file at a time::

      {"schemaVersion": 1, ..., "traceforensics": {...}, "traceEvents": [<ours>,
       <the file's events, unchanged> ], "baseTimeNanoseconds": ...}

  An array-format file (``[ev, ev, ...``) gets ours after its ``[``.
- ``moved_events``: a rank file of a job, each event re-encoded with only its place changed:
  ``pid``/``tid`` to the track the caller picks, ``ts`` moved by ``shift_ns`` (exact: the
  value read to integer ns by ``timeconv`` and written back as decimal µs), flow ``id`` to one
  unique across ranks; every other field (name, cat, dur, args, ...) as it was. ``process_name``
  / ``thread_name`` metadata become names of the new tracks (``on_name``).
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterable, Iterator
from pathlib import Path
from typing import Any, BinaryIO

import orjson

from traceforensics.ingest.kineto.reader import read_trace
from traceforensics.ingest.kineto.text import (
    BOM,
    EVENTS_KEY,
    HEADER_LIMIT,
    NotStreamableError,
    pieces,
)
from traceforensics.ingest.kineto.timeconv import us_to_ns
from traceforensics.model.errors import CorruptTraceError, UnsupportedFormatError
from traceforensics.model.units import us_text

Track = Callable[[Any, Any], tuple[int, int]]


def splice(path: Path, out: BinaryIO, insert: Iterable[bytes], top: bytes = b"") -> None:
    """Copy ``path``'s JSON text to ``out`` with the blocks of ``insert`` (each: events joined
    by commas, no trailing comma; written as they come) first in its event list and ``top``
    (``"key": value`` text) as a key before it (module docstring). Raises
    ``CorruptTraceError`` when the event list is not found within ``HEADER_LIMIT`` bytes."""
    it = pieces(path)
    head, at, key = _list_start(path, it)
    top = top if key >= 0 else b""  # the Chrome array format: no key beside the list
    start = len(BOM) if head.startswith(BOM) else 0
    if top:
        out.write(head[start:key] + top + b", " + head[key:at])
    else:
        out.write(head[start:at])
    rest = head[at:]
    while not rest.strip():  # is the list empty? (then no comma after ours)
        nxt = next(it, None)
        if nxt is None:
            break
        rest += nxt
    empty = rest.lstrip().startswith(b"]")
    first = True
    for block in insert:
        if block:
            out.write((b"\n" if first else b",\n") + block)
            first = False
    if not first:
        out.write(b"\n" if empty else b",\n")
    out.write(rest)
    for piece in it:
        out.write(piece)


def refuse_annotated(path: Path) -> None:
    """Raise ``UnsupportedFormatError`` when ``path`` is a file ``--annotate`` wrote (its
    ``"traceforensics"`` key before the event list): annotating it again would stack a
    second set of tf's tracks on the first."""
    try:
        head, _at, key = _list_start(path, pieces(path))
    except (CorruptTraceError, NotStreamableError):  # (the copy's fallback reads it)
        return
    if key >= 0 and b'"traceforensics"' in head[:key]:
        raise UnsupportedFormatError(
            f"{path}: already annotated by tf (it holds tf's tracks); annotate the original trace"
        )


#: Text read to tell how a file writes its slices' pids and tids (``id_forms``).
ID_SAMPLE_BYTES = 4 << 20
_X_EVENT = re.compile(rb'"ph"\s*:\s*"X"[^{}]{0,800}')
_ID = re.compile(rb'"(pid|tid)"\s*:\s*("?)-?\d+[,}\s"]')


def id_forms(path: Path) -> tuple[bool, bool]:
    """Whether ``path``'s slices (``ph: X``) write numeric pids, and tids, mostly as strings
    (``"tid": "25738"``, PyTorch <= 1.9), from its first ``ID_SAMPLE_BYTES``."""
    text = b""
    for piece in pieces(path):
        text += piece
        if len(text) >= ID_SAMPLE_BYTES:
            break
    votes = {b"pid": [0, 0], b"tid": [0, 0]}
    for event in _X_EVENT.finditer(text):
        for key, quote in _ID.findall(event.group()):
            votes[key][bool(quote)] += 1
    return votes[b"pid"][1] > votes[b"pid"][0], votes[b"tid"][1] > votes[b"tid"][0]


def _list_start(path: Path, it: Iterator[bytes]) -> tuple[bytes, int, int]:
    """``(text read, offset just past the event list's "[", offset of its key; -1 in the
    Chrome array format)``."""
    head = b""
    for piece in it:
        head += piece
        body = head.removeprefix(BOM).lstrip()
        if body.startswith(b"["):
            return head, len(head) - len(body) + 1, -1
        m = EVENTS_KEY.search(head)
        if m is not None:
            return head, m.end(), m.start()
        if len(head) > HEADER_LIMIT:
            break
    raise CorruptTraceError(f"{path}: no traceEvents list found; cannot copy its events")


#: Events re-encoded per block of text (one write of the output per block, not per event).
MOVED_BLOCK = 10_000


def moved_events(
    path: Path,
    track: Track,
    shift_ns: int,
    flow_id: Callable[[Any], Any],
    on_name: Callable[[str, Any, Any, str], None] | None,
) -> Iterator[bytes]:
    """The events of rank file ``path`` re-placed (module docstring): ``track(pid, tid)`` ->
    the output (pid, tid), asked once per thread; ``flow_id(id)`` -> the output id;
    ``on_name(kind, pid, tid, name)`` is told each ``process_name``/``thread_name`` (kind
    ``process``/``thread``) and no metadata event is copied (without ``on_name``, all are,
    placed by ``track``). Yields blocks of up to ``MOVED_BLOCK`` events' JSON texts joined by
    a comma and a newline."""
    raw = read_trace(path)
    places: dict[tuple[Any, Any], tuple[Any, Any]] = {}
    batch: list[dict[str, Any]] = []
    for e in raw.events:
        if not isinstance(e, dict):
            continue
        if on_name is not None and e.get("ph") == "M":
            if e.get("name") in ("process_name", "thread_name"):
                name = (e.get("args") or {}).get("name")
                kind = "process" if e["name"] == "process_name" else "thread"
                on_name(kind, e.get("pid"), e.get("tid"), str(name))
            continue  # sort indexes and labels of tracks that no longer exist as such
        batch.append(e)
        if len(batch) == MOVED_BLOCK:
            yield _moved_block(batch, track, places, shift_ns, flow_id)
            batch = []
    if batch:
        yield _moved_block(batch, track, places, shift_ns, flow_id)


def _moved_block(
    batch: list[dict[str, Any]],
    track: Track,
    places: dict[tuple[Any, Any], tuple[Any, Any]],
    shift_ns: int,
    flow_id: Callable[[Any], Any],
) -> bytes:
    """One block of ``moved_events``: the times converted together (``timeconv.us_to_ns``:
    the same exact rule as the reader's)."""
    stamped = [i for i, e in enumerate(batch) if e.get("ts") is not None]
    ns = us_to_ns([batch[i]["ts"] for i in stamped]) - shift_ns
    ts_text = dict(zip(stamped, (us_text(int(v)) for v in ns.tolist()), strict=True))
    out: list[bytes] = []
    for i, e in enumerate(batch):
        moved = dict(e)
        where = (e.get("pid"), e.get("tid"))
        place = places.get(where)
        if place is None:
            place = places[where] = track(*where)
        moved["pid"], moved["tid"] = place
        if "id" in moved and moved.get("ph") in ("s", "t", "f"):
            moved["id"] = flow_id(moved["id"])
        moved.pop("ts", None)
        text = orjson.dumps(moved, option=orjson.OPT_SERIALIZE_NUMPY)
        t = ts_text.get(i)
        out.append(text if t is None else b'{"ts":' + t.encode() + b"," + text[1:])
    return b",\n".join(out)
