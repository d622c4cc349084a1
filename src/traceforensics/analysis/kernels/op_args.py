"""The args of many ops at once: the side table's value of a key, looked up by event id.

The args side table (``event_id, key, value``; key and value categorical) holds one row per
(event, key). The FLOPs model and the conv links read a few keys of thousands of ops: per key
the table's event ids are sorted once and every lookup is one ``searchsorted`` (numpy), instead
of a filter and a join of the whole table per question::

    args     event_id [3, 3, 7, 9]   key [dims, types, dims, dims]
    "dims"   ids [3, 7, 9]  rows [0, 2, 3]          ops [7, 8] -> rows [2, -1] (no row: -1)

An event with two rows of one key (a damaged file) reads the first, as a pivot keeping the
first value would. Values are compared by code (``codes``): equal texts share one code.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import Any

import numpy as np
import numpy.typing as npt
import polars as pl

from traceforensics.model.units import I64

#: Row positions and value codes (int32: at 130x the side table has ~7M rows of these keys).
I32 = npt.NDArray[np.int32]

#: No row of the key (``OpArgs.rows``), no value (``OpArgs.codes``).
MISSING = -1


class OpArgs:
    """The rows of ``keys`` in ``args`` (the side table or a part of it), by event id."""

    def __init__(self, args: pl.DataFrame, keys: Iterable[str]) -> None:
        ids = args.get_column("event_id").to_numpy()
        self._values = args.get_column("value")
        #: per row, the code of its value (equal texts, equal codes; no value: MISSING)
        self.codes: I32 = category_codes(self._values)
        wanted = list(dict.fromkeys(keys))
        # the keys as codes, each compared once with numpy
        key = category_codes(
            pl.concat(
                [
                    args.get_column("key").cast(pl.Categorical),
                    pl.Series(wanted, dtype=pl.Categorical),
                ]
            )
        )
        self._by_key: dict[str, tuple[I64, I32]] = {}
        for i, k in enumerate(wanted):
            rows = np.flatnonzero(key[: ids.size] == key[ids.size + i]).astype(np.int32)
            at = np.asarray(ids[rows], dtype=np.int64)
            if at.size > 1 and bool((np.diff(at) < 0).any()):  # (the table's order: by id)
                order = np.argsort(at, kind="stable")  # (equal ids: the table's first first)
                at, rows = at[order], rows[order]
            self._by_key[k] = (at, rows)

    def has(self, key: str) -> bool:
        """Whether any event has a row of ``key``."""
        return self._by_key[key][0].size > 0

    def rows(self, key: str, ids: I64) -> I32:
        """Per event id of ``ids``, its row of ``key`` in ``args`` (``MISSING`` if none)."""
        sorted_ids, rows = self._by_key[key]
        if not sorted_ids.size:
            return np.full(len(ids), MISSING, dtype=np.int32)
        pos = np.minimum(np.searchsorted(sorted_ids, ids), sorted_ids.size - 1)
        out: I32 = np.where(sorted_ids[pos] == ids, rows[pos], MISSING).astype(np.int32)
        return out

    def value_codes(self, rows: I32) -> I32:
        """The value code of each row of ``rows`` (``MISSING`` where the row is)."""
        out: I32 = np.where(rows >= 0, self.codes[np.maximum(rows, 0)], MISSING).astype(np.int32)
        return out

    def texts(self, rows: I32) -> list[str | None]:
        """The value text of each row of ``rows`` (None where it is ``MISSING``)."""
        found = rows >= 0
        out: list[str | None] = [None] * len(rows)
        got = self._values.gather(rows[found]).cast(pl.String).to_list()
        for i, text in zip(np.flatnonzero(found).tolist(), got, strict=True):
            out[i] = text
        return out


def category_codes(values: pl.Series) -> I32:
    """The codes of a text column, categorical or not (equal texts, equal codes; null:
    ``MISSING``)."""
    physical = values.cast(pl.Categorical).to_physical()
    out = np.asarray(physical.fill_null(0).to_numpy(), dtype=np.int32)
    if physical.null_count():
        out[physical.is_null().to_numpy()] = MISSING
    return out


def call_groups(columns: Sequence[npt.NDArray[np.signedinteger[Any]]]) -> tuple[I64, I64]:
    """Rows with equal values in every one of ``columns`` (int64 codes, one per row) as one
    group: ``(first, group)``, the first row of each group and each row's group index (groups
    numbered in the order of their first rows' codes). Two columns at a time are combined into
    one dense code, so no combined code exceeds the rows squared."""
    _, code = np.unique(columns[0], return_inverse=True)
    for column in columns[1:]:
        _, other = np.unique(column, return_inverse=True)
        _, code = np.unique(code * (int(other.max(initial=0)) + 1) + other, return_inverse=True)
    _, first, group = np.unique(code, return_index=True, return_inverse=True)
    return np.asarray(first, dtype=np.int64), np.asarray(group, dtype=np.int64).reshape(-1)
