"""The host timeline (``idle.host_timeline``): the time each thread spent in each class over
any interval, against a plain per-nanosecond recomputation (the highest-``PRIORITY`` class of
the ranges covering each instant; unclassified and zero-length ranges cover nothing)."""

from __future__ import annotations

import random

import numpy as np
import pytest

from traceforensics.analysis.host_timeline import build_timeline
from traceforensics.analysis.idle.causes import CAUSE_INDEX, N_CAUSES, PRIORITY

T0 = 1_000


def _plain(rows: list[tuple[int, int, int, int]], thr: int, a: int, b: int) -> list[int]:
    out = [0] * N_CAUSES
    rank = {CAUSE_INDEX[c]: i for i, c in enumerate(PRIORITY)}
    for t in range(a, b):
        cover = [c for th, s, e, c in rows if th == thr and s <= t < e and c >= 0]
        if cover:
            out[min(cover, key=lambda c: rank[c])] += 1
    return out


@pytest.mark.parametrize("seed", [1, 2, 3])
@pytest.mark.parametrize("all_kept", [True, False])
# every class, or one (an nsys export's API calls: the timeline takes its rows uncopied)
@pytest.mark.parametrize("one_class", [False, True])
def test_class_time_matches_a_plain_per_ns_count(
    seed: int, all_kept: bool, one_class: bool
) -> None:
    rng = random.Random(seed)
    classes = [CAUSE_INDEX[c] for c in PRIORITY]
    if one_class:
        classes = [rng.choice(classes)]
    rows = []
    for _ in range(120):
        thr = rng.randrange(3)
        s = T0 + rng.randrange(0, 300)
        e = s + rng.randrange(1 if all_kept else 0, 40)
        c = rng.choice(classes) if all_kept or rng.random() < 0.8 else -1
        rows.append((thr, s, e, c))
    rows.sort()
    thr, s, e, c = (np.array(col, dtype=np.int64) for col in zip(*rows, strict=True))
    tl = build_timeline(thr, s, e, c.astype(np.int8), t0_ns=T0, shift=20)
    q_thr, q_a, q_b = [], [], []
    for _ in range(60):
        a = T0 + rng.randrange(0, 330)  # times are never before the trace start (t0)
        q_thr.append(rng.randrange(3))
        q_a.append(a)
        q_b.append(a + rng.randrange(0, 60))
    got = tl.class_time(np.array(q_thr), np.array(q_a), np.array(q_b))
    for k in range(len(q_a)):
        assert got[k].tolist() == _plain(rows, q_thr[k], q_a[k], q_b[k]), k
    assert s.tolist() == [r[1] for r in rows]  # the inputs are left as they were
