"""The early-scan child's row lists travel packed (``rows.PackedInts``, ``_intpack.c``), and
the columns made of them equal those made of the lists, value for value and null for null."""

from __future__ import annotations

import pickle
from typing import Any

import polars as pl
import pytest
from polars.testing import assert_series_equal

from tests.conftest import ROOT
from traceforensics.ingest.kineto import early, rows
from traceforensics.ingest.kineto.batches import ColumnBuilder
from traceforensics.ingest.kineto.events import int_series

SAMPLE = ROOT / "examples" / "synthetic_training.pt.trace.json.gz"
INT64_MAX, INT32_MAX = 2**63 - 1, 2**31 - 1

COLUMNS = {
    "pid": pl.Int64,
    "tid": pl.Int64,
    "device": pl.Int32,
    "stream": pl.Int64,
    "correlation": pl.Int64,
}
needs_packer = pytest.mark.skipif(not rows.PACKER, reason="the packer was not built")

CASES: dict[str, tuple[list[Any], int]] = {
    "ints and nulls": ([7, None, 7, 7, None, 123456789012, -3], 8),
    "int64 bounds": ([INT64_MAX, -INT64_MAX - 1, 0, None], 8),
    "int32 bounds": ([INT32_MAX, -INT32_MAX - 1, None, 1], 4),
    "no nulls": (list(range(1000)), 8),
    "all nulls": ([None] * 5, 4),
    "empty": ([], 8),
}


@needs_packer
@pytest.mark.parametrize("case", sorted(CASES))
def test_a_packed_list_makes_the_column_of_the_list(case: str) -> None:
    values, width = CASES[case]
    packed = rows.packed(values, width)
    assert isinstance(packed, rows.PackedInts) and len(packed) == len(values)
    assert (packed.nulls is not None) == (None in values)
    dtype = pl.Int64 if width == 8 else pl.Int32
    # (the same objects repeated, as the rules make them, and equal ones made apart)
    assert_series_equal(int_series(packed, dtype), pl.Series(values, dtype=dtype))
    again = pickle.loads(pickle.dumps(packed, protocol=pickle.HIGHEST_PROTOCOL))
    assert_series_equal(int_series(again, dtype), pl.Series(values, dtype=dtype))


@needs_packer
@pytest.mark.parametrize(
    ("values", "width"),
    [
        ([1, INT64_MAX + 1], 8),  # beyond the width
        ([1, INT32_MAX + 1], 4),
        ([1, -INT32_MAX - 2], 4),
        ([1, True], 8),  # a bool is not an int here (the list keeps what it holds)
        ([1, 2.0], 8),
        ([1, "2"], 8),
    ],
)
def test_a_list_the_packer_cannot_take_is_kept_as_it_is(values: list[Any], width: int) -> None:
    assert rows.packed(values, width) is values


@needs_packer
def test_the_child_sends_its_row_lists_packed_and_their_columns_are_the_lists() -> None:
    scan = early.scan_file(SAMPLE)
    assert scan is not None
    built = early.with_columns(scan).built
    assert built is not None and built[0].rules is not None
    sent = built[0].rules
    # the same rules run on the columns as the stream builds them: lists
    again = early.scan_file(SAMPLE)
    assert again is not None
    builder = ColumnBuilder()
    early.build_columns(again, builder)
    made = rows.row_rules(builder.c)
    for col, dtype in COLUMNS.items():
        packed, listed = getattr(sent, col), getattr(made, col)
        assert isinstance(packed, rows.PackedInts) and isinstance(listed, list)
        assert_series_equal(int_series(packed, dtype), pl.Series(listed, dtype=dtype))
