"""``model.memory``: the table helper that holds all-null columns as constants."""

from __future__ import annotations

import polars as pl

from traceforensics.model.memory import nulls_as_constants


def test_nulls_as_constants_keeps_every_value_and_dtype() -> None:
    """All-null columns become one typed null; columns with any value are left as they are."""
    frame = pl.DataFrame(
        {
            "a": [1, 2, 3],
            "none": pl.Series([None, None, None], dtype=pl.Int64),
            "some": pl.Series([None, 5, None], dtype=pl.Int64),
            "cat": pl.Series([None, None, None], dtype=pl.Categorical),
        }
    )
    out = nulls_as_constants(frame)
    assert out.equals(frame) and out.schema == frame.schema
    assert out.filter(pl.col("a") > 1).equals(frame.filter(pl.col("a") > 1))
    assert nulls_as_constants(frame.clear()).equals(frame.clear())
