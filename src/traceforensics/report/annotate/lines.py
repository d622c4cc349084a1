"""Chrome trace events as JSON text, a column at a time.

Slices (``ph: X``), instants (``ph: i``) and flow ends (``ph: s`` / ``f``) are built from a
frame with one row per event: the times are written as exact decimal µs (``layout.us_expr``:
an epoch-ns time has 19 digits, more than a double holds) and every other field goes through
polars' JSON encoder (names with quotes, backslashes or any Unicode are escaped by it), so no
event becomes a Python object::

    pid tid ts_ns dur_ns  name              cat      args{...}
    ->  {"ph":"X","pid":1000000000,"tid":1,"ts":1623212388.540,"dur":86.855,
         "name":"idle: data_loading","cat":"tf.idle","args":{"cause":"data_loading",...}}
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Final

import polars as pl

from traceforensics.report.annotate.layout import us_expr

#: Columns every event frame has; any other column becomes a field of the event as it is.
BASE: Final = ("ph", "pid", "tid", "ts_ns")
#: Events per block of JSON text: the text of a block is held at once, never a whole track
#: (3.6M idle slices of a 3M-event trace are ~700 MB of text).
BLOCK_ROWS: Final = 100_000


def event_lines(frame: pl.DataFrame) -> Iterator[bytes]:
    """The events of ``frame`` as blocks of ``BLOCK_ROWS`` JSON objects joined by ``,`` and a
    newline (nothing for no row): one object per row of ``frame`` (columns ``ph`` String,
    ``pid``, ``tid`` (Int64, or String holding JSON text, ``"\"25738\""``), ``ts_ns`` Int64
    on the output clock, optional ``dur_ns`` Int64 (written as ``dur`` µs; null: no ``dur``),
    and any other columns written as fields of their name: ``name``, ``cat``, ``args`` (a
    struct), ``cname``, ``id``, ``bp``; a null field is left out)."""
    for a in range(0, frame.height, BLOCK_ROWS):
        yield _block(frame.slice(a, BLOCK_ROWS))


def _block(frame: pl.DataFrame) -> bytes:
    """One block of ``event_lines``."""
    rest = [c for c in frame.columns if c not in (*BASE, "dur_ns")]
    head = pl.concat_str(
        [
            pl.lit('{"ph":'),
            pl.struct(pl.col("ph")).struct.json_encode().str.slice(6).str.strip_suffix("}"),
            pl.lit(',"pid":'),
            pl.col("pid").cast(pl.String),
            pl.lit(',"tid":'),
            pl.col("tid").cast(pl.String),
            pl.lit(',"ts":'),
            us_expr(pl.col("ts_ns")),
        ]
    )
    parts: list[pl.Expr] = [head]
    if "dur_ns" in frame.columns:
        dur = pl.lit(',"dur":') + us_expr(pl.col("dur_ns"))
        parts.append(pl.when(pl.col("dur_ns").is_null()).then(pl.lit("")).otherwise(dur))
    for col in rest:
        field = pl.lit(",") + pl.struct(pl.col(col)).struct.json_encode().str.strip_prefix(
            "{"
        ).str.strip_suffix("}")
        parts.append(pl.when(pl.col(col).is_null()).then(pl.lit("")).otherwise(field))
    parts.append(pl.lit("}"))
    text = frame.select(pl.concat_str(parts).str.join(",\n")).item()
    return str(text).encode()
