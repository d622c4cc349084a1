"""``model.memory``: the table helper that holds all-null columns as constants."""

from __future__ import annotations

import polars as pl

from tests.conftest import fresh_python
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


def test_startup_done_freezes_the_imports_and_collects_the_young_less_often() -> None:
    # in a fresh interpreter (the setting is the console script's, for the whole process)
    code = (
        "import gc\n"
        "from traceforensics.model import memory\n"
        "gc.disable()\n"
        "old = gc.get_threshold()\n"
        "memory.startup_done()\n"
        "print(gc.isenabled(), gc.get_freeze_count() > 0,\n"
        "      gc.get_threshold() == (memory.YOUNG_THRESHOLD, *old[1:]), old[0] < 1000)\n"
    )
    assert fresh_python(code).stdout.split() == ["True"] * 4
