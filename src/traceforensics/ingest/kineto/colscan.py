"""The compiled column scanner (``_colscan.c``): a chunk of events read straight into codes.

A JSON parser makes one dict per event and per ``args``; the scanner reads the JSON text once,
in C, into flat arrays, making one Python object per distinct value only (``decode`` reduces
them to row arrays with a few array operations per chunk)::

    text  [ {"ph": "X", "cat": "kernel", "ts": 5.5, ..., "args": {"External id": 7,
             "device": 0, "Input Dims": [[2]]}}, ..]
    ->    values [None, "X", "kernel", ..]    codes [[1, 2, ..], ..]  (ph, cat, name, pid, tid, id)
          tags [[FLOAT, MISSING, INT, ..]]   numbers [[bits of 5.5, 0, 7, ..]]  (ts, dur, ids)
          args values (event 0, "device", code of 0), kept (event 0, "Input Dims", "[[2]]")

It is the one reader of valid JSON: it reads the clean case (strict JSON, the usual shapes;
see the C source) and answers None for anything else, and the file is then read whole by the
generic path (``reader``, ``generic.scanned_events``) into the same ``Scanned`` columns: a
file loads the same with it, without it, or without a C compiler at install time
(``AVAILABLE`` is then False). ``TRACEFORENSICS_PURE_DECODE=1`` turns it off (tests compare
both paths). The keys and the raw call are in ``scanner`` (no numpy: the early scan imports it
before the command imports numpy).
"""

from __future__ import annotations

import struct
from dataclasses import dataclass
from typing import Any, Final

import numpy as np
import numpy.typing as npt

from traceforensics.ingest.kineto.scanner import (
    ARG_NUMBER_KEYS,
    ARG_VALUE_KEYS,
    AVAILABLE,
    CODED_KEYS,
    KEPT_KEYS,
    NUMBER_KEYS,
    RawScan,
    array_end,
    enabled,
    scan_raw,
)

#: What a number slot holds (``Scanned.tags``; the C source's TAG_*).
MISSING, NULL, INT, FLOAT, OTHER = 0, 1, 2, 3, 4


@dataclass(frozen=True, slots=True)
class Scanned:
    """One chunk's events as coded columns (file order; see the module docstring).

    ``values``: the distinct values read (``values[0]`` is None, a missing key); ``codes``:
    int32 [n, len(CODED_KEYS)] indices in it; ``tags``/``numbers``: [n, len(NUMBER_KEYS) +
    len(ARG_NUMBER_KEYS)] slot kinds and int64 values (an int, a double's bits, or the code of
    an ``OTHER`` value); ``has_args``: whether the event's args is an object; ``arg_*``: the
    ``ARG_VALUE_KEYS`` present as (event index, key index, value code); ``kept_*``: the kept
    args (``KEPT_ARG_KEYS``) as (event index, key, JSON text as written) triples."""

    n: int
    values: list[Any]
    codes: npt.NDArray[np.int32]
    tags: npt.NDArray[np.uint8]
    numbers: npt.NDArray[np.int64]
    has_args: npt.NDArray[np.bool_]
    arg_events: npt.NDArray[np.int64]
    arg_keys: npt.NDArray[np.int32]
    arg_values: npt.NDArray[np.int32]
    kept_events: npt.NDArray[np.int64]
    kept_keys: npt.NDArray[np.int32]
    kept_values: npt.NDArray[np.int32]
    kept_texts: list[str]

    def __len__(self) -> int:
        return self.n

    def slot(self, key: str, event: int) -> Any:
        """The Python value of number slot ``key`` of one event (``UNSET`` when missing), as
        a JSON parser gives it (for checks)."""
        j = (*NUMBER_KEYS, *ARG_NUMBER_KEYS).index(key)
        return slot_value(int(self.tags[event, j]), int(self.numbers[event, j]), self.values)


def slot_value(tag: int, raw: int, values: list[Any]) -> Any:
    """The Python value of a number slot: ``tag`` and its int64 ``raw`` (``UNSET`` when the
    key is missing, None for null)."""
    if tag == INT:
        return raw
    if tag == FLOAT:
        return struct.unpack("<d", struct.pack("<q", raw))[0]
    if tag == OTHER:
        return values[raw]
    if tag == MISSING:
        return UNSET
    return None


class _Unset:
    """The value of a key that is absent (``UNSET``), apart from an explicit ``null``."""

    def __repr__(self) -> str:
        return "UNSET"


UNSET: Final = _Unset()


def scan(text: bytes | memoryview) -> Scanned | None:
    """The events of one JSON array text as columns, or None when the scanner is off or the
    text is not its clean case (the caller then reads the file by the generic path). No other
    thread may write into ``text`` during the call (the scan reads it without the GIL)."""
    out = scan_raw(text)
    return None if out is None else scanned(out)


def scanned(out: RawScan) -> Scanned:
    """A raw scanner result (``scanner.scan_raw``) as arrays over its bytes (no copy)."""
    n, values, codes, tags, numbers, has_args, *triples, texts = out
    slots = len(NUMBER_KEYS) + len(ARG_NUMBER_KEYS)
    arg_e, arg_k, arg_v, kept_e, kept_k, kept_v = triples
    return Scanned(
        n,
        values,
        np.frombuffer(codes, dtype=np.int32).reshape(n, len(CODED_KEYS)),
        np.frombuffer(tags, dtype=np.uint8).reshape(n, slots),
        np.frombuffer(numbers, dtype=np.int64).reshape(n, slots),
        np.frombuffer(has_args, dtype=np.bool_),
        np.frombuffer(arg_e, dtype=np.int64),
        np.frombuffer(arg_k, dtype=np.int32),
        np.frombuffer(arg_v, dtype=np.int32),
        np.frombuffer(kept_e, dtype=np.int64),
        np.frombuffer(kept_k, dtype=np.int32),
        np.frombuffer(kept_v, dtype=np.int32),
        texts,
    )


def distinct_codes(
    codes: npt.NDArray[np.int32], n_values: int
) -> tuple[npt.NDArray[np.int64], npt.NDArray[np.int64]]:
    """``(the distinct codes, ascending; each entry's index among them)``."""
    present = np.flatnonzero(np.bincount(codes, minlength=n_values))
    index = np.zeros(n_values, dtype=np.int64)
    index[present] = np.arange(present.size)
    return present, index[codes]


def values_at(s: Scanned, col: int, events: npt.NDArray[np.int64]) -> list[Any]:
    """The Python values of coded column ``col`` at ``events``."""
    return list(map(s.values.__getitem__, s.codes[events, col].tolist()))


def slot_values(s: Scanned, slot: int, events: npt.NDArray[np.int64]) -> list[Any]:
    """The Python values of number slot ``slot`` at ``events`` (missing and null: None)."""
    tags, raw = s.tags[events, slot], s.numbers[events, slot]
    pairs = zip(tags.tolist(), raw.tolist(), strict=True)
    return [None if t == MISSING else slot_value(t, r, s.values) for t, r in pairs]


__all__ = [
    "ARG_NUMBER_KEYS",
    "ARG_VALUE_KEYS",
    "AVAILABLE",
    "CODED_KEYS",
    "FLOAT",
    "INT",
    "KEPT_KEYS",
    "MISSING",
    "NULL",
    "NUMBER_KEYS",
    "OTHER",
    "UNSET",
    "RawScan",
    "Scanned",
    "array_end",
    "distinct_codes",
    "enabled",
    "scan",
    "scan_raw",
    "scanned",
    "slot_value",
    "slot_values",
    "values_at",
]
