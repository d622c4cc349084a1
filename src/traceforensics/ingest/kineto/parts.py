"""The row-aligned side parts of a batch's columns: External ids, kept args and (for the
early-scan child) the text columns, as arrays.

A batch (``batches.ColumnBuilder``, from scanned or parsed events) leaves these two as numpy
arrays and Python texts, not polars columns, so that a process without polars can build them:
the early-scan child (``early``) builds a small file's whole columns while the command is
still importing polars. ``events.extract`` turns the parts of a file into its ``external_id``
column and its args side table::

    ExternalPart  ids    [7, 0, 9]      valid [True, False, True]   -> external_id 7, null, 9
    KeptPart      event  [0, 0, 2]      key [0, 3, 0]  (codes into ``KEPT_KEYS``)
                  value  [0, 1, 0]      texts ["[[2]]", "[]"]       -> (row 0, "Input Dims",
                                                                       "[[2]]"), ...

Kept rows are sorted by (row position, key), as the args side table holds them.

``TextCodes`` holds the ``kind``, ``name`` and ``cat`` of scanned rows as codes into the file's
distinct values (the scanner read them as codes already): the early-scan child sends these
instead of three lists of a Python object per row, and the table's categorical columns are
the distinct values gathered by code::

    TextCodes     kind [5, 5, 0]  (codes into ``ROW_KINDS``)
                  name [0, 1, 0]  names ["aten::mm", "Memcpy HtoD"]   -> "aten::mm", ...

Arg values the generic reader parsed into Python objects become compact JSON text
(``json_texts``; the stream keeps the text as written). Encoding 100k values one
``orjson.dumps`` call at a time costs more than parsing the whole file, while one call over a
list is ~50x cheaper. So all values are encoded in one call, interleaved with a sentinel
string, and the output is split on the sentinel's encoding. An encoded value cannot contain
``,"<sentinel>",`` with bare quotes unless the data itself holds the sentinel string; the
piece count is checked and any mismatch falls back to per-value encoding, so the result is
always exact.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

import numpy as np
import numpy.typing as npt
import orjson

from traceforensics.ingest.kineto import categories as cats
from traceforensics.ingest.kineto.scanner import KEPT_KEYS

#: Each kept key's code (``KeptPart.key``): its index in ``KEPT_KEYS``, which is sorted.
KEPT_CODE: dict[str, int] = {key: i for i, key in enumerate(KEPT_KEYS)}


@dataclass(frozen=True, slots=True)
class ExternalPart:
    """``args["External id"]`` of a batch's rows: int64 ``ids``; ``valid`` False where a row
    has none (its id is then 0), None when every row has one."""

    ids: npt.NDArray[np.int64]
    valid: npt.NDArray[np.bool_] | None = None


@dataclass(frozen=True, slots=True)
class KeptPart:
    """Kept args of a batch (see the module docstring): ``event``, int64 row positions in the
    file; ``key``, int32 codes into ``KEPT_KEYS``; ``value``, int32 codes into ``texts``, JSON
    texts (a scanned chunk's: every kept text it read, some of rows that keep none)."""

    event: npt.NDArray[np.int64]
    key: npt.NDArray[np.int32]
    value: npt.NDArray[np.int32]
    texts: list[str]

    def shifted(self, rows: int) -> KeptPart:
        """The same part, ``rows`` rows further into the file (a batch built elsewhere)."""
        return KeptPart(self.event + rows, self.key, self.value, self.texts)


def joined_parts(parts: list[KeptPart]) -> KeptPart:
    """One part of the rows of ``parts`` (in order), each distinct text once: the table is then
    built by one categorical column and one gather, not one of each per chunk."""
    ids: dict[str, int] = {}
    values = []
    for part in parts:
        remap = np.fromiter(
            (ids.setdefault(t, len(ids)) for t in part.texts), dtype=np.int32, count=len(part.texts)
        )
        values.append(remap[part.value])
    return KeptPart(
        np.concatenate([p.event for p in parts]) if parts else np.zeros(0, dtype=np.int64),
        np.concatenate([p.key for p in parts]) if parts else np.zeros(0, dtype=np.int32),
        np.concatenate(values) if values else np.zeros(0, dtype=np.int32),
        list(ids),
    )


#: Every kind a row can have (``TextCodes.kind`` indexes it), sorted.
ROW_KINDS: tuple[str, ...] = tuple(
    sorted({*cats.KIND_BY_CAT.values(), cats.UNKNOWN_KIND, "marker"})
)


class TextCodes:
    """The ``kind``, ``name`` and ``cat`` of a file's rows as codes, added a scanned chunk at a
    time (``add``) and joined once (``settle``): ``kind`` int8 codes into ``ROW_KINDS``;
    ``name``/``cat`` int32 codes into ``names``/``cats``, each distinct value once in the order
    first added (equal values share a code, as they share one object in the column lists)."""

    def __init__(self) -> None:
        self.kind: list[npt.NDArray[np.int8]] = []
        self.name: list[npt.NDArray[np.int32]] = []
        self.cat: list[npt.NDArray[np.int32]] = []
        self._names: dict[Any, int] = {}
        self._cats: dict[Any, int] = {}

    @property
    def rows(self) -> int:
        return sum(map(len, self.kind))

    @property
    def names(self) -> list[Any]:
        return list(self._names)

    @property
    def cats(self) -> list[Any]:
        return list(self._cats)

    def add(
        self,
        kind: npt.NDArray[np.int8],
        name: tuple[npt.NDArray[np.int32], npt.NDArray[Any]],
        cat: tuple[npt.NDArray[np.int32], npt.NDArray[Any]],
    ) -> None:
        """Rows of one chunk: their kind codes, and for name and cat (the chunk's codes, the
        value of each code), recoded into the file's distinct values."""
        self.kind.append(kind.astype(np.int8, copy=False))
        self.name.append(_recoded(*name, self._names))
        self.cat.append(_recoded(*cat, self._cats))

    def settle(self) -> None:
        """Join the chunks' codes into one array per column."""
        for attr in ("kind", "name", "cat"):
            parts = getattr(self, attr)
            if len(parts) != 1:
                dtype = np.int8 if attr == "kind" else np.int32
                setattr(self, attr, [np.concatenate(parts) if parts else np.zeros(0, dtype)])


def _recoded(
    codes: npt.NDArray[np.int32], table: npt.NDArray[Any], ids: dict[Any, int]
) -> npt.NDArray[np.int32]:
    """``codes`` (into ``table``) as codes into the distinct values ``ids`` (value -> code,
    extended with the values first met here, in the order of their first row: the order a
    column built from the rows' values meets them)."""
    first = np.full(len(table), codes.size, dtype=np.int64)
    np.minimum.at(first, codes, np.arange(codes.size))  # each code's first row
    present = np.flatnonzero(np.bincount(codes, minlength=len(table)))
    present = present[np.argsort(first[present], kind="stable")]
    remap = np.zeros(len(table), dtype=np.int32)
    remap[present] = [ids.setdefault(v, len(ids)) for v in table[present].tolist()]
    out: npt.NDArray[np.int32] = remap[codes]
    return out


def external_part(ids: list[int | None]) -> ExternalPart:
    """The part of per-row ids (None: no id; every other value an int within int64)."""
    if None not in ids:
        return ExternalPart(np.array(ids, dtype=np.int64))
    valid = np.fromiter((v is not None for v in ids), dtype=bool, count=len(ids))
    filled = np.fromiter((0 if v is None else v for v in ids), dtype=np.int64, count=len(ids))
    return ExternalPart(filled, valid)


_SENTINEL = "\x00tf-arg-sep\x00"
_SENTINEL_SPLIT = "," + orjson.dumps(_SENTINEL).decode() + ","


def _one(value: Any) -> str:
    try:
        return orjson.dumps(value).decode()
    except orjson.JSONEncodeError:  # e.g. an int beyond 64 bits
        return json.dumps(value)


def json_texts(values: list[Any]) -> list[str]:
    """Compact JSON text of each value, computed with one ``orjson.dumps`` call when possible."""
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
