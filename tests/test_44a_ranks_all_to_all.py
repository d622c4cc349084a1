"""Issue 44, item 1: all-to-alls are collectives. A DLRM-style job (``tools/synth_ranks.py`` with
``JobSpec(collectives=...)``): each step's embedding all-to-all runs as a NCCL ``SendRecv``
kernel under ``c10d::alltoall_base_`` > ``nccl:all_to_all`` and the forward waits for it, so a
data-loading straggler makes the others wait there, not in the all-reduces. The all-to-alls are
matched across ranks (both formats), the straggler is found from them, the waiting ranks'
findings name it and its cause first, and the job's figures agree with each other."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

import synth_ranks
from synth_ranks_sim import JobSpec
from tests.test_synth_ranks import read_job, recompute
from traceforensics.analysis.pipeline import Analysis, analyze
from traceforensics.ingest import load_path
from traceforensics.model.units import fmt_ns

RANKS, STEPS, STRAGGLER, CAUSE = 4, 3, 2, "data_loading"
_JOBS: dict[tuple[str, tuple[str, ...]], tuple[Path, dict[str, Any], Analysis]] = {}


@pytest.fixture(scope="module")
def job(tmp_path_factory: pytest.TempPathFactory) -> Any:
    """``make(fmt, collectives)`` -> (folder, truth, analysis), built once each."""

    def make(fmt: str, collectives: tuple[str, ...]) -> tuple[Path, dict[str, Any], Analysis]:
        key = (fmt, collectives)
        if key not in _JOBS:
            out = tmp_path_factory.mktemp(f"{fmt}-{'-'.join(collectives)}")
            synth_ranks.generate_job(
                out, ranks=RANKS, steps=STEPS, fmt=fmt, straggler_rank=STRAGGLER, cause=CAUSE,
                spec=JobSpec(collectives=collectives),
            )  # fmt: skip
            truth = json.loads((out / "truth.json").read_text())
            _JOBS[key] = (out, truth, analyze(load_path(out)))
        return _JOBS[key]

    return make


MIXED = ("all_reduce", "all_to_all")
CASES = [(f, c) for f in ("kineto", "nsys") for c in (MIXED, ("all_to_all",))]
IDS = [f"{f}-{'+'.join(c)}" for f, c in CASES]


@pytest.mark.parametrize("fmt", ["kineto", "nsys"])
def test_truth_shows_the_straggler_last_at_the_all_to_alls(job: Any, fmt: str) -> None:
    """The raw files (read without the project) hold what truth.json says: the straggler
    starts last at every all-to-all, and the others' wait is there."""
    out, truth, _ = job(fmt, MIXED)
    got = recompute(read_job(out, fmt, RANKS), truth["clock_base_ns"], [0] * RANKS)
    want = [c for s in truth["steps"] for c in s["collectives"]]
    assert [g["last_rank"] for g in got["collectives"]] == [w["last_rank"] for w in want]
    a2a = [c for c in want if c["kind"] == "all_to_all"]
    assert len(a2a) == STEPS and all(c["last_rank"] == STRAGGLER for c in a2a)
    others = [r for r in range(RANKS) if r != STRAGGLER]
    in_a2a = sum(c["wait_ns"][r] for c in a2a for r in others)
    assert in_a2a > 0.9 * sum(truth["ranks"][r]["comm_wait_ns"] for r in others)


@pytest.mark.parametrize(("fmt", "collectives"), CASES, ids=IDS)
def test_all_to_alls_are_matched_and_name_the_straggler(
    job: Any, fmt: str, collectives: tuple[str, ...]
) -> None:
    _, truth, result = job(fmt, collectives)
    got = result.ranks
    assert got is not None
    per_step = len(truth["steps"][0]["collectives"])
    assert got.matched_collectives == STEPS * per_step
    a2a = got.collectives.filter(got.collectives["kind"] == "all_to_all")
    assert a2a.height == STEPS * RANKS and a2a["matched"].all()
    assert set(a2a["last_dev"].to_list()) == {STRAGGLER}
    if "all_reduce" in collectives:
        ar = got.collectives.filter(got.collectives["kind"] == "all_reduce")
        assert ar.height == STEPS * RANKS * 2 and ar["matched"].all()
    assert got.straggler is not None
    assert (got.straggler.rank, got.straggler.cause) == (STRAGGLER, CAUSE)
    for r, t in enumerate(truth["ranks"]):
        row = got.per_rank[r]
        assert not row.comm_estimated
        assert abs(row.comm_wait_ns - t["comm_wait_ns"]) <= 0.1 * t["comm_wait_ns"]
        if r != STRAGGLER:
            assert row.waiting_for == STRAGGLER == row.waits_most_for
            assert row.wait_for_straggler_ns > 0.9 * row.comm_wait_ns


@pytest.mark.parametrize(("fmt", "collectives"), CASES, ids=IDS)
def test_waiting_ranks_are_told_the_straggler_first(
    job: Any, fmt: str, collectives: tuple[str, ...]
) -> None:
    """Waiting dominates their communication: the first change names rank 2 and its cause;
    the bandwidth/overlap remedy is never first, and where it remains it says the wait first."""
    _, _, result = job(fmt, collectives)
    assert result.ranks is not None
    for row in result.ranks.per_rank:
        if row.rank == STRAGGLER:
            continue
        assert row.comm_wait_ns > 0.5 * row.comm_ns  # the wait dominates
        found = result.findings_of(row.rank, row.device)
        first = found[0]
        assert first.category == "straggler_wait"
        assert f"waiting for rank {STRAGGLER} ({CAUSE}" in first.title
        assert f"rank {STRAGGLER}'s {CAUSE}" in first.remedy
        for f in found:
            if f.category == "exposed_communication":
                assert f.remedy.startswith("most of this rank's communication"), f.remedy
                assert "bucket_cap_mb" not in f.remedy.split(":")[0]


@pytest.mark.parametrize("fmt", ["kineto", "nsys"])
def test_job_figures_agree(job: Any, fmt: str) -> None:
    """One quantity behind every figure: the straggler's wait over the trace is the sum of its
    per-step figures (every collective lies inside a step), each step's figure is the truth's
    mean wait of the others in the collectives the slowest rank arrived last at, and the
    evidence and the straggler's own finding state that same figure."""
    _, truth, result = job(fmt, MIXED)
    got = result.ranks
    assert got is not None and got.straggler is not None
    lead = got.straggler
    steps = [s for s in got.steps if s.slowest_rank == lead.rank]
    assert len(steps) == STEPS
    assert abs(sum(s.slowest_rank_wait_ns for s in steps) - lead.waited_for_ns) <= STEPS
    assert lead.waited_for_total_ns == pytest.approx(lead.waited_for_ns * (RANKS - 1), abs=10)
    for s, t in zip(got.steps, truth["steps"], strict=True):
        mine = [c for c in t["collectives"] if c["last_rank"] == s.slowest_rank]
        want = sum(sum(c["wait_ns"]) / (RANKS - 1) for c in mine)
        assert s.slowest_rank_wait_ns == pytest.approx(want, rel=0.01)
        assert s.slowest_rank_wait_ns <= s.others_wait_ns
    assert lead.last_arrivals == got.per_rank[lead.rank].last_arrivals
    assert 0.9 < lead.wait_share <= 1.0
    assert f"{lead.waited_for_ns / 1e6:.2f} ms each for rank {lead.rank}" in lead.evidence[0]
    own = [f for f in result.findings_of(lead.rank, lead.device) if f.category == CAUSE]
    assert own and f"the others wait {fmt_ns(lead.waited_for_ns)} each for it" in own[0].title
    doc = got.to_json()
    assert doc["straggler"]["waited_for_ns"] == lead.waited_for_ns
    assert {"slowest_rank_wait_ns", "slowest_rank_wait_total_ns"} <= set(doc["steps"][0])
    assert {"wait_for_straggler_ns", "waits_most_for_rank"} <= set(doc["per_rank"][0])


def test_command_line_collectives(tmp_path: Path) -> None:
    assert synth_ranks.main([str(tmp_path), "--ranks", "2", "--steps", "1",
                             "--collectives", "all_to_all"]) == 0  # fmt: skip
    truth = json.loads((tmp_path / "truth.json").read_text())
    assert [c["kind"] for c in truth["steps"][0]["collectives"]] == ["all_to_all"]
    assert truth["spec"]["collectives"] == ["all_to_all"]
    with pytest.raises(ValueError, match="collectives must be some of"):
        synth_ranks.generate_job(
            tmp_path / "bad", ranks=2, steps=1, fmt="kineto", straggler_rank=1, cause=None,
            spec=JobSpec(collectives=("broadcast",)),
        )  # fmt: skip
