"""``kernels.op_args``: args looked up by event id, and calls grouped by their codes, checked
against plain-Python dictionaries over the same rows."""

from __future__ import annotations

import numpy as np
import polars as pl

from traceforensics.analysis.kernels.op_args import MISSING, OpArgs, call_groups


def _args(rng: np.random.Generator, n: int) -> pl.DataFrame:
    """A side table with repeated (event, key) rows and ids out of order now and then."""
    keys = ["Input Dims", "Input type", "Sequence number", "Call stack"]
    return pl.DataFrame(
        {
            "event_id": rng.integers(0, 60, size=n),
            "key": [keys[int(k)] for k in rng.integers(0, len(keys), size=n)],
            "value": [f"[{int(v)}]" for v in rng.integers(0, 9, size=n)],
        },
        schema={"event_id": pl.Int64, "key": pl.Categorical, "value": pl.Categorical},
    )


def test_rows_are_the_first_row_of_each_event_and_key() -> None:
    rng = np.random.default_rng(3)
    args = _args(rng, 400)
    lookup = OpArgs(args, ["Input Dims", "Sequence number", "Concrete Inputs"])
    first: dict[tuple[int, str], int] = {}
    for i, (e, k) in enumerate(zip(args["event_id"], args["key"].cast(pl.String), strict=True)):
        first.setdefault((e, k), i)
    ids = rng.integers(-5, 70, size=200).astype(np.int64)
    for key in ("Input Dims", "Sequence number", "Concrete Inputs"):
        want = [first.get((int(e), key), MISSING) for e in ids]
        got = lookup.rows(key, ids)
        assert got.tolist() == want
        texts = args["value"].cast(pl.String).to_list()
        assert lookup.texts(got) == [None if r == MISSING else texts[r] for r in want]
        codes = lookup.value_codes(got)
        # equal texts, equal codes; missing rows, MISSING
        by_text: dict[str, int] = {}
        for r, c in zip(want, codes.tolist(), strict=True):
            if r == MISSING:
                assert c == MISSING
            else:
                assert by_text.setdefault(texts[r], c) == c
        assert len(set(by_text.values())) == len(by_text)
    assert lookup.has("Input Dims") and not lookup.has("Concrete Inputs")


def test_calls_with_equal_codes_form_one_group() -> None:
    rng = np.random.default_rng(5)
    columns = [rng.integers(-1, k, size=500).astype(np.int64) for k in (3, 40, 2, 7)]
    first, group = call_groups(columns)
    rows = list(zip(*(c.tolist() for c in columns), strict=True))
    seen: dict[tuple[int, ...], int] = {}
    for i, row in enumerate(rows):
        seen.setdefault(row, i)
    assert sorted(first.tolist()) == sorted(seen.values())  # one first row per distinct call
    for i, row in enumerate(rows):
        assert rows[int(first[group[i]])] == row
    assert call_groups([np.zeros(0, np.int64)] * 2)[0].size == 0
