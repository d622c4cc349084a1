"""One step-range finder (``steps.first_step_ranges``) for the host breakdown and ``--steps``:
per rank, the ranges of the first step pattern naming any of that rank's rows."""

from __future__ import annotations

import polars as pl

from traceforensics.analysis.steps import first_step_ranges, step_patterns


def _ranges() -> pl.DataFrame:
    # rank 0: ProfilerStep ranges and a generic "train_step 9" (the profiler's win);
    # rank 1: generic step names only; rank 2: no step range
    return pl.DataFrame(
        {
            "rank": [0, 0, 0, 1, 1, 2],
            "name": [
                "ProfilerStep#1",
                "ProfilerStep#2",
                "train_step 9",
                "train_step 3",
                "aten::mm",
                "forward",
            ],
            "start_ns": [0, 10, 2, 0, 1, 0],
        }
    )


def test_each_rank_takes_its_first_pattern() -> None:
    found = first_step_ranges(_ranges(), None)
    assert found.select("rank", "name", "source").rows() == [
        (0, "ProfilerStep#1", "profiler_step"),
        (0, "ProfilerStep#2", "profiler_step"),
        (1, "train_step 3", "step_ranges"),
    ]


def test_a_user_pattern_is_the_only_one_tried() -> None:
    assert step_patterns("forward") == [("forward", "user_pattern")]
    found = first_step_ranges(_ranges(), "forward")
    assert found.select("rank", "name", "source").rows() == [(2, "forward", "user_pattern")]


def test_no_rows_no_steps() -> None:
    empty = _ranges().clear()
    assert first_step_ranges(empty, None).height == 0
    assert "source" in first_step_ranges(empty, None).columns
