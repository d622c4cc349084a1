"""The busy union per device and per class (``busy.device_busy``) against plain-Python unions,
on devices that run one class only (the class unions are then shared with the device union)
and on devices that mix classes."""

from __future__ import annotations

import numpy as np
import polars as pl
import pytest

from tests.conftest import plain_union
from traceforensics.analysis.busy import BUSY_CLASSES, device_busy


def _work(rng: np.random.Generator, kinds_of: list[list[str]], n: int) -> pl.DataFrame:
    """``n`` random ops per device, sorted by (dev, start, end) like the context's GPU ops;
    device ``g`` draws its kinds from ``kinds_of[g]`` (``"comm"``: a communication kernel)."""
    rows = []
    for g, kinds in enumerate(kinds_of):
        for _ in range(n):
            s = int(rng.integers(0, 5_000))
            e = s + int(rng.integers(0, 60))  # some zero-length: never busy
            k = str(rng.choice(kinds))
            rows.append((g, "kernel" if k == "comm" else k, k == "comm", s, e))
    frame = pl.DataFrame(
        rows, schema=["dev", "kind", "is_comm", "start_ns", "end_ns"], orient="row"
    ).sort("dev", "start_ns", "end_ns")
    return frame


def _plain_class(kind: str, is_comm: bool) -> str:
    if is_comm:
        return "communication"
    return kind


@pytest.mark.parametrize(
    "kinds_of",
    [
        [["kernel"], ["memcpy"], ["comm"]],  # one class per device: shared unions
        [["kernel", "memcpy", "comm"], ["kernel", "memset"]],  # mixed classes
        [["kernel"], ["kernel", "memcpy"]],  # one of each
    ],
)
def test_device_busy_matches_plain_unions(kinds_of: list[list[str]]) -> None:
    rng = np.random.default_rng(len(kinds_of) * 7 + len(kinds_of[0]))
    work = _work(rng, kinds_of, 400)
    busy = device_busy(work, len(kinds_of), 0, 10_000)
    for g in range(len(kinds_of)):
        mine = work.filter(pl.col("dev") == g)
        spans = [(s, e) for s, e in mine.select("start_ns", "end_ns").rows() if e > s]
        us, ue = busy.of(g)
        assert [[int(a), int(b)] for a, b in zip(us, ue, strict=True)] == plain_union(spans)
        for c, name in enumerate(BUSY_CLASSES):
            own = [
                (s, e)
                for k, comm, s, e in mine.select("kind", "is_comm", "start_ns", "end_ns").rows()
                if e > s and _plain_class(k, comm) == name
            ]
            ks, ke = busy.kind(g, c)
            want = plain_union(own)
            assert [[int(a), int(b)] for a, b in zip(ks, ke, strict=True)] == want
            assert busy.by_kind(g)[name] == sum(e - s for s, e in want)
