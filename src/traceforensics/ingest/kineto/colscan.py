"""The compiled column scanner (``_colscan.c``): a chunk of events read straight into lists.

The typed decoder (``typed``) makes one struct per event and ``batches`` then reads the
structs' fields into column lists; the scanner builds those lists in one pass over the JSON
text, in C, with the args already split into what the rules read and what the side table keeps:

    text  [ {"ph": "X", "cat": "kernel", ..., "args": {"External id": 7, "Input Dims": [[2]]}}, ..]
    ->    ph ["X", ..]  cat ["kernel", ..]  ...  rule [{"External id": 7}, ..]
          kept (event 0, "Input Dims", "[[2]]"), ...  (as codes into the chunk's texts)

It reads only the clean case (strict JSON, the usual shapes; see the C source) and answers None
for anything else, and the typed decoder then reads that chunk: a file loads the same with it,
without it, or without a C compiler at install time (``AVAILABLE`` is then False).
``TRACEFORENSICS_PURE_DECODE=1`` turns it off (tests compare both paths; a spawned decode worker
inherits the setting).
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from typing import Any, Final

import numpy as np
import numpy.typing as npt

from traceforensics.ingest.kineto.typed import KEPT_FIELDS, RULE_FIELDS, decode_chunk

_colscan: Any
try:
    from traceforensics.ingest.kineto import _colscan
except ImportError:  # built without a C compiler: the typed decoder reads every chunk
    _colscan = None

#: Whether the compiled scanner was built with this install.
AVAILABLE: Final = _colscan is not None
#: The top-level event keys read, in the order of ``Scanned.columns``.
EVENT_KEYS: Final = ("ph", "cat", "name", "pid", "tid", "ts", "dur", "id")
_RULE_KEYS: Final = tuple(RULE_FIELDS.values())
#: The kept args keys, in the order ``Scanned.kept_keys`` indexes: ``typed``'s, sorted by key.
KEPT_KEYS: Final = tuple(KEPT_FIELDS.values())
_OFF: Final = "TRACEFORENSICS_PURE_DECODE"


@dataclass(frozen=True, slots=True)
class Scanned:
    """One chunk's events as columns (file order).

    ``columns``: one list per ``EVENT_KEYS`` key (a missing key is None); ``rule``: per event a
    dict of the args keys the rules read (``typed.RULE_FIELDS``) that are present, or None when
    the event has no args (or null); ``kept_*``: the kept args (``KEPT_ARG_KEYS``) as
    (event index, key, JSON text as written) triples."""

    n: int
    columns: tuple[list[Any], ...]
    rule: list[dict[str, Any] | None]
    kept_events: npt.NDArray[np.int64]
    kept_keys: npt.NDArray[np.int32]
    kept_values: npt.NDArray[np.int32]
    kept_texts: list[str]

    def __len__(self) -> int:
        return self.n


#: What one chunk decodes into: scanned columns, or typed ``Event`` structs.
Batch = Scanned | list[Any]


def enabled() -> bool:
    """Whether chunks go to the compiled scanner (built, and not turned off)."""
    return AVAILABLE and os.environ.get(_OFF, "") in ("", "0")


def scan(text: bytes) -> Scanned | None:
    """The events of one JSON array text as columns, or None when the scanner is off or the
    text is not its clean case (the caller then decodes it with ``typed``)."""
    if _colscan is None or not enabled():
        return None
    out = _colscan.scan(text, EVENT_KEYS, "args", _RULE_KEYS, KEPT_KEYS)
    if out is None:
        return None
    n, columns, rule, events, keys, values, texts = out
    return Scanned(
        n,
        columns,
        rule,
        np.frombuffer(events, dtype=np.int64),
        np.frombuffer(keys, dtype=np.int32),
        np.frombuffer(values, dtype=np.int32),
        texts,
    )


def decode(text: bytes) -> Batch | None:
    """The events of one JSON array text: scanned, else typed-decoded (``typed.decode_chunk``),
    else None when the text is not a list of events (a wrong cut in the stream)."""
    out = scan(text)
    return out if out is not None else decode_chunk(text)
