"""Name matching on distinct names: a regex runs once per distinct event name, not per row.

Traces repeat a few hundred names over hundreds of thousands of rows, so every name filter in
the analysis goes through ``matching``: the frame's distinct names are tested and the rows are
selected with a membership test on the (categorical or string) column.
"""

from __future__ import annotations

from typing import Final

import polars as pl

#: Default user-range words for data loading (``IdleOptions.data_patterns``); matched as words
#: at a word start (``load_batch``, ``## data ##``, ``DataLoader``), case-insensitively.
DEFAULT_DATA_PATTERNS: Final[tuple[str, ...]] = ("data", "batch", "load", "prefetch")
#: PyTorch's own data-fetch ranges, matched on every host kind.
BUILTIN_DATA_RE: Final = r"enumerate\(DataLoader\)|DataLoaderIter|DataPipe|torch/utils/data/"

#: Host ranges of the optimizer (``Optimizer.step#SGD.step``, ``Optimizer.zero_grad#...``, or
#: any name saying optimizer): the short-kernel diagnosis and the host step breakdown.
OPTIMIZER_RE = r"^Optimizer\.(step|zero_grad)#|^Optimizer\.|optimizer"


def matching(
    frame: pl.DataFrame, pattern: str, *, literal: bool = False, col: str = "name"
) -> pl.Expr:
    """Expression true on the rows of ``frame`` whose ``col`` matches ``pattern`` (a regex
    searched anywhere, or a plain substring with ``literal``); false on nulls."""
    names = frame.get_column(col).unique().drop_nulls()
    text = names.cast(pl.String)
    hits = names.filter(text.str.contains(pattern, literal=literal))
    return pl.col(col).is_in(hits.implode()).fill_null(False)
