"""Findings on every shared trace, cross-checked with plain Python over the raw events (issue
11): the copies by direction (count, bytes, time), the copy time no compute overlaps, and the
communication time no compute overlaps are recomputed here from the event table with a
plain-Python interval union, independent of the tool's vectorised unions."""

from __future__ import annotations

from collections import defaultdict

import polars as pl
import pytest

from tests.conftest import kineto_trace_files, nsys_trace_files, plain_union, shared_trace
from traceforensics import analyze, load

COMPUTE_KINDS = ("kernel", "cuda_graph")


def _length(spans: list[tuple[int, int]]) -> int:
    return sum(e - s for s, e in plain_union(spans))


def _exposed(a: list[tuple[int, int]], b: list[tuple[int, int]], lo: int, hi: int) -> int:
    """|a ∪ b| - |b| inside [lo, hi), by plain interval unions."""
    a = [(max(s, lo), min(e, hi)) for s, e in a if min(e, hi) > max(s, lo)]
    b = [(max(s, lo), min(e, hi)) for s, e in b if min(e, hi) > max(s, lo)]
    return _length(a + b) - _length(b) if a else 0


@pytest.mark.parametrize("rel", kineto_trace_files() + nsys_trace_files())
def test_transfer_and_comm_figures_match_plain_sums(rel: str) -> None:
    session = load(shared_trace(rel), use_cache=False)
    result = analyze(session)
    rows = session.events.filter(
        pl.col("kind").cast(pl.String).is_in(["kernel", "cuda_graph", "memcpy", "memset"])
        & pl.col("device").is_not_null()
    ).select(
        "rank", "device", pl.col("kind").cast(pl.String), "start_ns", "dur_ns", "is_comm",
        pl.col("copy_kind").cast(pl.String), "bytes",
    )  # fmt: skip
    by_dev: dict[tuple[int, int], list[tuple[object, ...]]] = defaultdict(list)
    for r in rows.iter_rows():
        by_dev[(r[0], r[1])].append(r[2:])
    for d in result.devices:
        lo, hi = d.window_start_ns, d.window_start_ns + d.window_ns
        ops = by_dev[(d.rank, d.device)]
        copies = [(s, s + n) for k, s, n, *_ in ops if k in ("memcpy", "memset")]
        comm = [(s, s + n) for k, s, n, c, *_ in ops if k in COMPUTE_KINDS and c]
        compute = [(s, s + n) for k, s, n, c, *_ in ops if k in COMPUTE_KINDS and not c]
        assert d.exposed_copy_ns == _exposed(copies, compute + comm, lo, hi), rel
        assert d.exposed_comm_ns == _exposed(comm, compute, lo, hi), rel
        want: dict[str, list[int]] = defaultdict(lambda: [0, 0, 0])
        for k, s, n, _c, ck, nbytes in ops:
            if k in ("memcpy", "memset") and s >= lo and s + n <= hi:
                w = want["memset" if k == "memset" else (ck or "unknown")]
                w[0], w[1], w[2] = w[0] + 1, w[1] + (nbytes or 0), w[2] + n
        got = {t.direction: [t.count, t.bytes, t.time_ns] for t in d.transfers}
        assert got == dict(want), rel
    # the verdict's first change is the top finding of the device
    for f in result.findings[:3]:
        assert f.recoverable_ns > 0 and f.title and f.remedy
