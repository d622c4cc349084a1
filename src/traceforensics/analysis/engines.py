"""Which polars engine a query runs on, by the rows of the table it reads.

The streaming engine holds one batch at a time: on big tables that is the memory bound (the
in-memory engine held ~490 MB for the name counts of a 4M-event table, ~85 MB for the device
set of 2M kernels; issue 12). But each streaming query costs ~1-7 ms to start its pipeline,
which on a small trace is most of the query: the eight streaming queries of the 1x ResNet-50
trace (57k events) took ~26 ms, most of it start-up. Below ``SMALL_QUERY_ROWS`` a query runs
on the in-memory engine, whose working set there is a few MB. Both engines give the same
result; every query that picks one by size is written so (sums and counts, joins that keep
the left order, sets sorted after).
"""

from __future__ import annotations

from typing import Final, Literal

#: Rows of the table a query reads up to which it runs on the in-memory engine.
SMALL_QUERY_ROWS: Final = 250_000

Engine = Literal["in-memory", "streaming"]


def engine_for(rows: int) -> Engine:
    """The engine of a query over a table of ``rows`` rows (see the module docstring)."""
    return "in-memory" if rows <= SMALL_QUERY_ROWS else "streaming"
