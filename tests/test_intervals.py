"""Interval union/gaps against a plain-Python reference on random inputs."""

from __future__ import annotations

import random

import numpy as np

from tests.conftest import plain_union
from traceforensics.analysis.intervals import holes, sorted_unique, total, union, unique_inverse


def _plain_union(pairs: list[tuple[int, int]]) -> list[tuple[int, int]]:
    return [(a, b) for a, b in plain_union(pairs)]


def test_union_matches_plain_python_on_random_intervals() -> None:
    rng = random.Random(7)
    for _ in range(200):
        pairs = []
        for _ in range(rng.randint(0, 40)):
            s = rng.randint(-1000, 10_000)
            pairs.append((s, s + rng.randint(0, 500)))
        s_arr = np.array([p[0] for p in pairs], dtype=np.int64)
        e_arr = np.array([p[1] for p in pairs], dtype=np.int64)
        us, ue = union(s_arr, e_arr)
        assert list(zip(us.tolist(), ue.tolist(), strict=True)) == _plain_union(pairs)
        assert total(us, ue) == sum(b - a for a, b in _plain_union(pairs))


def test_gaps_fill_the_window_exactly() -> None:
    rng = random.Random(11)
    for _ in range(100):
        pairs = [(s, s + rng.randint(1, 300)) for s in rng.sample(range(0, 5000), 20)]
        us, ue = union(
            np.array([p[0] for p in pairs], dtype=np.int64),
            np.array([p[1] for p in pairs], dtype=np.int64),
        )
        lo, hi = 100, 4000
        gs, ge = holes(us, ue, lo, hi)
        covered = sum(max(0, min(b, hi) - max(a, lo)) for a, b in _plain_union(pairs))
        assert total(gs, ge) + covered == hi - lo
        # no gap overlaps any busy interval
        for a, b in zip(gs.tolist(), ge.tolist(), strict=True):
            assert all(b <= s or a >= e for s, e in _plain_union(pairs))


def test_huge_epoch_ns_values_stay_exact() -> None:
    base = 1_712_195_495_519_695_800
    us, ue = union(
        np.array([base, base + 3], dtype=np.int64), np.array([base + 5, base + 9], dtype=np.int64)
    )
    assert us.tolist() == [base] and ue.tolist() == [base + 9]


def test_sorted_unique_and_inverse_match_a_plain_computation() -> None:
    rng = random.Random(7)
    for n in (0, 1, 2, 50, 5000):
        values = [
            rng.choice([rng.randrange(-5, 5), rng.randrange(-(2**62), 2**62)]) for _ in range(n)
        ]
        arr = np.array(values, dtype=np.int64)
        want = sorted(set(values))
        assert sorted_unique(arr).tolist() == want
        assert arr.tolist() == values  # not sorted in place unless asked
        assert sorted_unique(arr.copy(), in_place=True).tolist() == want
        keys, inverse = unique_inverse(arr)
        assert keys.tolist() == want
        assert [want[i] for i in inverse.tolist()] == values
        assert inverse.dtype == np.int64
