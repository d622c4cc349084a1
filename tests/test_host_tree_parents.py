"""The parent assignment of the host op tree (columnar) against a plain sweep.

``optree._parents`` computes each range's parent with numpy (nearest earlier range still open)
and falls back to the sweep on threads whose ranges overlap without nesting. The
reference here is an independent plain-Python walk written from the rule: for every row, keep
a stack of earlier can-parent ranges of the same thread, drop the top while it has ended, the
top is the parent.
"""

from __future__ import annotations

import numpy as np
import polars as pl
import pytest

from tests.conftest import tree_parents
from traceforensics.analysis import optree
from traceforensics.analysis.context import prepare
from traceforensics.analysis.optree import _parents
from traceforensics.model.session import TraceMeta, TraceSession


def _reference(
    group: list[int], start: list[int], end: list[int], can: list[bool], ids: list[int]
) -> list[int]:
    out: list[int] = []
    stack: list[tuple[int, int]] = []  # (end, id)
    last = None
    for g, s, e, c, i in zip(group, start, end, can, ids, strict=True):
        if g != last:
            stack, last = [], g
        while stack and stack[-1][0] <= s:
            stack.pop()
        out.append(stack[-1][1] if stack else -1)
        if c:
            stack.append((e, i))
    return out


def _check(rng: np.random.Generator, n: int, max_len: int) -> None:
    group = np.sort(rng.integers(0, 3, n)).astype(np.int64)
    start = rng.integers(0, 40, n).astype(np.int64)
    end = start + rng.integers(0, max_len, n).astype(np.int64)
    can = rng.random(n) < 0.7
    order = np.lexsort((-end, start, group))
    group, start, end, can = group[order], start[order], end[order], can[order]
    ids = rng.permutation(10 * n + 1)[:n].astype(np.int64)
    want = _reference(group.tolist(), start.tolist(), end.tolist(), can.tolist(), ids.tolist())
    assert _parents(group, start, end, can, ids).tolist() == want


def test_parents_match_stack_sweep_nested_and_overlapping() -> None:
    rng = np.random.default_rng(7)
    for trial in range(600):
        # short ranges: mostly nested or disjoint; long ones: many partial overlaps (fallback)
        _check(rng, int(rng.integers(0, 50)), 4 if trial % 2 else 20)


def test_host_tree_nested_ranges() -> None:
    # thread 1: linear [0,100) > addmm [10,60) > launch [20,25); launch [70,72) under linear;
    # thread 2: a range partially overlapping its predecessor keeps the sweep's answer
    ev = pl.DataFrame(
        {
            "event_id": [1, 2, 3, 4, 5, 6, 7],
            "kind": ["cpu_op", "cpu_op", "cuda_api", "cuda_api", "cpu_op", "cpu_op", "cuda_api"],
            "name": ["aten::linear", "aten::addmm", "L", "L", "a", "b", "L"],
            "rank": [0] * 7,
            "pid": [1] * 7,
            "tid": [1, 1, 1, 1, 2, 2, 2],
            "start_ns": [0, 10, 20, 70, 0, 5, 12],
            "dur_ns": [100, 50, 5, 2, 10, 20, 1],
        }
    )
    session = TraceSession.from_frames(ev, TraceMeta(source_format="test"))
    parent = tree_parents(session)
    assert parent == {1: None, 2: 1, 3: 2, 4: 1, 5: None, 6: 5, 7: 6}
    # the context keeps the ranges only: the launch calls are leaves, needed to link launches
    kept = prepare(session).tree
    assert dict(kept.select("event_id", "parent_id").rows()) == {1: None, 2: 1, 5: None, 6: 5}


def _nested(rng: np.random.Generator, n: int) -> tuple[np.ndarray, ...]:
    """``n`` properly nested ranges on 2 threads (each range splits its parent's time)."""
    group: list[int] = []
    start: list[int] = []
    end: list[int] = []
    for g in (0, 1):
        todo = [(0, 1 << 40)]
        while todo and len(start) < (g + 1) * n // 2:
            lo, hi = todo.pop(int(rng.integers(0, len(todo))))
            if hi - lo < 4:
                continue
            a = int(rng.integers(lo, (lo + hi) // 2))
            b = int(rng.integers(a + 1, hi + 1))
            group.append(g)
            start.append(a)
            end.append(b)
            todo += [(a, (a + b) // 2), ((a + b) // 2, b), (b, hi)]
    order = np.lexsort((-np.array(end), np.array(start), np.array(group)))
    return tuple(np.asarray(x, dtype=np.int64)[order] for x in (group, start, end))


def test_parents_deep_nesting_every_level_stride(monkeypatch: pytest.MonkeyPatch) -> None:
    # thousands of nested rows: the binary lifting itself (no fallback) over many table levels,
    # with the levels between kept ones recomputed (``LEVEL_STRIDE``) or all kept (1)
    rng = np.random.default_rng(11)
    group, start, end = _nested(rng, 6000)
    can = rng.random(len(group)) < 0.8
    ids = np.arange(len(group), dtype=np.int64) * 3 + 5
    want = _reference(group.tolist(), start.tolist(), end.tolist(), can.tolist(), ids.tolist())
    assert sum(p >= 0 for p in want) > len(want) // 2  # really nested
    for stride in (1, 2, 3, 4, 7):
        monkeypatch.setattr(optree, "LEVEL_STRIDE", stride)
        assert _parents(group, start, end, can, ids).tolist() == want


def test_parents_of_one_deep_stack() -> None:
    # one thread of 5000 ranges each inside the last: 4999 levels of nesting
    n = 5000
    start = np.arange(n, dtype=np.int64)
    end = 2 * n - start
    group, ids = np.zeros(n, dtype=np.int64), np.arange(n, dtype=np.int64) + 100
    got = _parents(group, start, end, np.ones(n, dtype=bool), ids)
    assert got.tolist() == [-1, *range(100, 100 + n - 1)]
