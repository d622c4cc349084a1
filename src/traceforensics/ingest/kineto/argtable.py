"""The args side table: selected per-event args as (event_id, key, JSON text) rows.

Only ``KEPT_ARG_KEYS`` of ``ARGS_KINDS`` rows (cpu_op, annotation, kernel) are kept: shapes,
dtypes, concrete inputs, call stacks, autograd links, collective sizes, kernel occupancy.

Speed: encoding 100k values one ``orjson.dumps`` call at a time costs more than parsing the
whole file, while one call over a list is ~50x cheaper. So all values are encoded in one call,
interleaved with a sentinel string, and the output is split on the sentinel's encoding. An
encoded value cannot contain ``,"<sentinel>",`` with bare quotes unless the data itself holds
the sentinel string; the piece count is checked and any mismatch falls back to per-value
encoding, so the result is always exact.
"""

from __future__ import annotations

import json
from typing import Any

import orjson
import polars as pl

from traceforensics.ingest.kineto import categories as cats
from traceforensics.model.schema import ARGS_SCHEMA

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


def args_table(kinds: list[str], args: list[dict[str, Any]], base_id: int) -> pl.DataFrame:
    """Long table of kept args; ``event_id = base_id + row position``."""
    kept = cats.KEPT_ARG_KEYS
    wanted = cats.ARGS_KINDS
    triples = [
        (base_id + i, key, value)
        for i, (kind, a) in enumerate(zip(kinds, args, strict=True))
        if kind in wanted and a
        for key, value in a.items()
        if key in kept
    ]
    ids = [t[0] for t in triples]
    keys = [t[1] for t in triples]
    values = json_texts([t[2] for t in triples])
    return pl.DataFrame(
        {
            "event_id": pl.Series(ids, dtype=pl.Int64),
            "key": pl.Series(keys, dtype=pl.Categorical),
            "value": pl.Series(values, dtype=pl.String),
        },
        schema=ARGS_SCHEMA,
    )
