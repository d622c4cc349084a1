"""Parsed events (the generic path) as the compiled scanner's coded columns (``Scanned``).

The generic reader (``reader``: the array format, NaN literals, cut or damaged files, no C
compiler) parses a file into Python values; ``scanned_events`` turns them into the one format
the decoder reads (``decode``), so every file takes the same rules after this point. For what
the compiled scanner accepts (strict JSON in its clean case) the result equals
``colscan.scan(orjson.dumps(events))``; the rules a consumer can rely on:

- events: the elements that are dicts, in list order (``n`` counts them);
- ``values``: ``values[0]`` is None (a missing key), then each distinct value read (at a coded
  key, an args value key, or an ``OTHER`` number slot) in order of first occurrence in the
  text: event by event, each object's keys in their order. Values share an entry when their
  JSON tokens are equal: ``1``, ``1.0`` and ``true`` are three entries, floats are compared by
  their bits (``-0.0`` apart from ``0.0``), ``null`` read at a key is an entry of its own. A
  list or dict never shares (each occurrence is its own entry, never hashed);
- number slots: MISSING (absent), NULL (null), INT (an int within int64), FLOAT (any float, NaN
  and infinities included: its bits), else OTHER with the value's code (a str, a bool, an int
  beyond int64, a list or dict);
- ``args`` that is not a dict: ``has_args`` False and no args slots or triples;
- kept args: their compact JSON text (``json_texts``; the scanner keeps the text as written,
  the same text wherever the input was written compactly), each distinct text once.

One Python pass over the events' keys: the generic path reads files the stream does not take
(rare, and parsed whole already), so it is written for clarity, not speed
(docs/benchmarks.md: a 757k-event array-format trace).
"""

from __future__ import annotations

import json
import struct
from typing import Any, Final

import numpy as np
import orjson

from traceforensics.ingest.kineto.colscan import (
    ARG_NUMBER_KEYS,
    ARG_VALUE_KEYS,
    CODED_KEYS,
    FLOAT,
    INT,
    KEPT_KEYS,
    NULL,
    NUMBER_KEYS,
    OTHER,
    Scanned,
)

_CODED: Final = {key: i for i, key in enumerate(CODED_KEYS)}
_SLOT: Final = {key: i for i, key in enumerate((*NUMBER_KEYS, *ARG_NUMBER_KEYS))}
_TOP_SLOTS: Final = frozenset(NUMBER_KEYS)
_ARG_VALUE: Final = {key: i for i, key in enumerate(ARG_VALUE_KEYS)}
#: (a key the rules read is read as such, never kept: the scanner's precedence)
_KEPT: Final = {k: i for i, k in enumerate(KEPT_KEYS) if k not in _ARG_VALUE and k not in _SLOT}
_INT64_MIN, _INT64_MAX = -(2**63), 2**63 - 1


class _Values:
    """The distinct values as met (``values[0]`` None: a missing key)."""

    def __init__(self) -> None:
        self.values: list[Any] = [None]
        self.ids: dict[Any, int] = {}

    def code(self, value: Any) -> int:
        kind = type(value)
        if kind is list or kind is dict:  # never shared, never hashed
            self.values.append(value)
            return len(self.values) - 1
        token = (float, struct.pack("<d", value)) if kind is float else (kind, value)
        found = self.ids.get(token)
        if found is None:
            found = self.ids[token] = len(self.values)
            self.values.append(value)
        return found


def _slot(value: Any, values: _Values) -> tuple[int, int]:
    """``(tag, number)`` of a number slot's value."""
    kind = type(value)
    if kind is int and _INT64_MIN <= value <= _INT64_MAX:
        return INT, value
    if kind is float:
        return FLOAT, struct.unpack("<q", struct.pack("<d", value))[0]
    if value is None:
        return NULL, 0
    return OTHER, values.code(value)


def scanned_events(events: list[Any]) -> Scanned:
    """Parsed JSON values as the scanner's coded columns (the rules: module docstring)."""
    ev = [e for e in events if type(e) is dict]
    n, values = len(ev), _Values()
    codes = np.zeros((n, len(_CODED)), dtype=np.int32)
    tags = np.zeros((n, len(_SLOT)), dtype=np.uint8)
    numbers = np.zeros((n, len(_SLOT)), dtype=np.int64)
    has_args = np.zeros(n, dtype=bool)
    triples: list[tuple[int, int, int]] = []
    kept: list[tuple[int, int, Any]] = []
    for i, event in enumerate(ev):
        for key, value in event.items():
            if key in _CODED:
                codes[i, _CODED[key]] = values.code(value)
            elif key in _TOP_SLOTS:
                tags[i, _SLOT[key]], numbers[i, _SLOT[key]] = _slot(value, values)
            elif key == "args" and type(value) is dict:
                has_args[i] = True
                for arg, v in value.items():
                    if arg in _SLOT:
                        tags[i, _SLOT[arg]], numbers[i, _SLOT[arg]] = _slot(v, values)
                    elif arg in _ARG_VALUE:
                        triples.append((i, _ARG_VALUE[arg], values.code(v)))
                    elif arg in _KEPT:
                        kept.append((i, _KEPT[arg], v))
    texts: dict[str, int] = {}
    text_codes = [texts.setdefault(t, len(texts)) for t in json_texts([k[2] for k in kept])]
    arg = np.array(triples, dtype=np.int64).reshape(-1, 3)
    kept_at = np.array([k[:2] for k in kept], dtype=np.int64).reshape(-1, 2)
    return Scanned(
        n,
        values.values,
        codes,
        tags,
        numbers,
        has_args,
        arg[:, 0],
        arg[:, 1].astype(np.int32),
        arg[:, 2].astype(np.int32),
        kept_at[:, 0],
        kept_at[:, 1].astype(np.int32),
        np.array(text_codes, dtype=np.int32),
        list(texts),
    )


_SENTINEL = "\x00tf-arg-sep\x00"
_SENTINEL_SPLIT = "," + orjson.dumps(_SENTINEL).decode() + ","


def _one(value: Any) -> str:
    try:
        return orjson.dumps(value).decode()
    except orjson.JSONEncodeError:  # e.g. an int beyond 64 bits
        return json.dumps(value)


def json_texts(values: list[Any]) -> list[str]:
    """Compact JSON text of each value. Encoding 100k values one ``orjson.dumps`` call at a
    time costs more than parsing the whole file, while one call over a list is ~50x cheaper:
    so all values are encoded in one call, interleaved with a sentinel string, and the output
    is split on the sentinel's encoding. An encoded value holds ``,"<sentinel>",`` with bare
    quotes only when the data itself holds the sentinel: the piece count is checked and any
    mismatch falls back to one call per value, so the result is always exact."""
    if not values:
        return []
    interleaved: list[Any] = [_SENTINEL] * (2 * len(values) - 1)
    interleaved[::2] = values
    try:
        text = orjson.dumps(interleaved).decode()
    except orjson.JSONEncodeError:
        return [_one(v) for v in values]
    pieces = text[1:-1].split(_SENTINEL_SPLIT)
    if len(pieces) != len(values):  # the sentinel occurs in the data itself
        return [_one(v) for v in values]
    return pieces


__all__ = ["json_texts", "scanned_events"]
