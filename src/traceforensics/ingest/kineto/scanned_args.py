"""The args of a chunk the compiled scanner read (``colscan.Scanned``), placed on table rows.

The scanner hands over the args per *event of the chunk*: a dict of the rule keys per event,
and the kept args as (event index, key, JSON text) triples. ``batches`` keeps only some events
as rows (metadata, flows and dropped events go elsewhere), so the triples are re-pointed at
the rows' positions here, in arrays, and the result is exactly what the typed path builds:

    chunk events   0      1      2      3          triples (0, "Input Dims", ..)
    rows            r0     -      r1     r2                 (3, "Call stack", ..)
    index          [0,     2,     3]                 -> kept table (base+0, ..), (base+2, ..)
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Final

import numpy as np
import polars as pl

from traceforensics.ingest.kineto import categories as cats
from traceforensics.ingest.kineto.colscan import KEPT_KEYS, Scanned


@dataclass(frozen=True, slots=True)
class ScannedRows:
    """A scanned chunk and, per row kept from it, the row's event index in the chunk."""

    scan: Scanned
    index: list[int]

    def with_kept(
        self, need: list[int], args: list[Any], keys: frozenset[str]
    ) -> list[dict[str, Any]]:
        """The args dicts of rows ``need``, with the kept keys among ``keys`` that the rules
        also read added as their JSON text (``bytes``, as the typed path has them)."""
        dicts: list[dict[str, Any]] = [args[i] for i in need]
        s = self.scan
        wanted = [i for i, key in enumerate(KEPT_KEYS) if key in keys]
        hits: list[int] = np.flatnonzero(np.isin(s.kept_keys, wanted)).tolist() if wanted else []
        if not hits:
            return dicts
        extra: dict[int, dict[str, bytes]] = {}
        for j in hits:
            key, text = KEPT_KEYS[s.kept_keys[j]], s.kept_texts[s.kept_values[j]]
            extra.setdefault(int(s.kept_events[j]), {})[key] = text.encode()
        for n, i in enumerate(need):
            more = extra.get(self.index[i])
            if more is not None:
                dicts[n] = dicts[n] | more
        return dicts

    def kept_table(self, kind: list[str], base: int) -> pl.DataFrame:
        """The kept args of the rows whose kind keeps them (``ARGS_KINDS``) as (row position,
        key, JSON text) sorted by (position, key): ``batches._kept_table``'s table."""
        s = self.scan
        pos = np.full(s.n, -1, dtype=np.int64)
        owner = np.fromiter(map(cats.ARGS_KINDS.__contains__, kind), dtype=bool, count=len(kind))
        rows = np.asarray(self.index, dtype=np.int64)
        pos[rows[owner]] = base + np.flatnonzero(owner)
        at = pos[s.kept_events]
        keep = at >= 0
        at, key, value = at[keep], s.kept_keys[keep], s.kept_values[keep]
        # rows in event order already; within an event by key (``KEPT_KEYS`` is sorted)
        order = np.lexsort((key, at))
        texts = pl.Series(s.kept_texts, dtype=pl.String).cast(pl.Categorical)
        return pl.DataFrame(
            {
                "event_id": pl.Series(at[order], dtype=pl.Int64),
                "key": _KEY_SERIES.gather(key[order]),
                "value": texts.gather(value[order]),
            }
        )


_KEY_SERIES: Final = pl.Series(KEPT_KEYS, dtype=pl.String)
