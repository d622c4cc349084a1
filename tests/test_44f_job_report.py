"""A multi-rank job's reports answer for the job (issue 44, "a multi-rank answer that
contradicts itself"): the terminal, Markdown and HTML reports of an 8-rank job open with the job
verdict (the straggler, its cause, the others' wait over the trace), then the per-rank verdicts
grouped (not eight near-identical ones); per-step waits are labelled per step; and the timeline
draws every rank on the job clock, one row each on one x axis, so the straggler's late arrival
is plotted later than the others' even when another rank's clock runs ahead."""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import pytest

import synth_ranks
from traceforensics.analysis.pipeline import Analysis, analyze
from traceforensics.ingest import load_path
from traceforensics.report.format import fmt_ns
from traceforensics.report.html import render_html
from traceforensics.report.job_verdict import members_label, step_sentence, step_wait, trace_wait
from traceforensics.report.markdown import render_markdown
from traceforensics.report.terminal import render_text

RANKS, STRAGGLER, CAUSE = 8, 4, "data_loading"
#: rank 0's clock runs 50 ms ahead: drawn on its own clock, its collectives would look later
#: than the straggler's
OFFSETS = [50_000_000] + [0] * (RANKS - 1)


@pytest.fixture(scope="module")
def job(tmp_path_factory: pytest.TempPathFactory) -> tuple[Analysis, dict[str, Any]]:
    out = tmp_path_factory.mktemp("job44f") / "job"
    synth_ranks.generate_job(
        out, ranks=RANKS, steps=3, fmt="kineto", straggler_rank=STRAGGLER, cause=CAUSE,
        clock_offsets_ns=OFFSETS,
    )  # fmt: skip
    analysis = analyze(load_path(out))
    assert analysis.ranks is not None and analysis.ranks.straggler is not None
    assert (analysis.ranks.straggler.rank, analysis.ranks.straggler.cause) == (STRAGGLER, CAUSE)
    return analysis, json.loads((out / "truth.json").read_text())


def _job_claims(text: str, analysis: Analysis) -> None:
    """``text`` (the job verdict) names the straggler, its cause and the others' wait as the
    trace's figure, each."""
    lead = analysis.ranks.straggler  # type: ignore[union-attr]
    assert lead is not None
    assert f"rank {STRAGGLER} (GPU {STRAGGLER}) is the straggler" in text
    assert CAUSE in text
    ns, for_it = trace_wait(lead)
    where = "for it" if for_it else "in collectives"
    assert f"wait {fmt_ns(ns)} each {where} over the trace" in text


def test_per_step_waits_add_up_to_the_trace_figure(job: tuple[Analysis, dict[str, Any]]) -> None:
    """The figure each step states and the one the verdict states over the trace are the
    same quantity: over the straggler's steps, the first adds up to the second."""
    analysis, _ = job
    ranks = analysis.ranks
    assert ranks is not None and ranks.straggler is not None
    total = sum(step_wait(s)[0] for s in ranks.steps if s.slowest_rank == STRAGGLER)
    whole = trace_wait(ranks.straggler)[0]
    assert abs(total - whole) <= 0.02 * whole, (total, whole)
    assert step_wait(ranks.steps[0])[1] == trace_wait(ranks.straggler)[1]  # both "for it", or not


def test_terminal_opens_with_the_job_verdict(job: tuple[Analysis, dict[str, Any]]) -> None:
    analysis, _ = job
    lines = render_text(analysis).splitlines()
    verdict = lines[
        lines.index("== Verdict ==") + 1 : lines.index("", lines.index("== Verdict =="))
    ]
    assert verdict[0].startswith(f"job of {RANKS} ranks:")
    _job_claims(verdict[0], analysis)
    # the change is made on the straggler, then who arrived last per step, labelled per step
    assert verdict[1].strip().startswith(f"first change, on rank {STRAGGLER} ({CAUSE}")
    assert verdict[2].strip().startswith(f"per step: in steps 4-6 rank {STRAGGLER} arrived last")
    assert verdict[2].endswith(" per step")
    # then the per-rank verdicts, grouped: the waiting ranks share one line
    heads = [ln for ln in verdict if re.match(r"ranks? \d", ln)]
    assert heads[0].startswith(f"rank {STRAGGLER} GPU {STRAGGLER}: idle")
    assert heads[1].startswith("ranks 0-3, 5-7: idle") and len(heads) == 2
    assert "straggler_wait" in verdict[verdict.index(heads[1]) + 1]
    # the Ranks section labels its per-step figures as per step
    assert re.search(
        r"\(the others' wait each( for it)?, in that step\): step 4 rank 4", "\n".join(lines)
    )


def test_terminal_findings_group_the_same_change(job: tuple[Analysis, dict[str, Any]]) -> None:
    analysis, _ = job
    text = render_text(analysis, sections=("findings",))
    first = text.split("== Findings")[1].splitlines()[2]
    assert first.startswith("#1 straggler_wait") and first.endswith("ranks 0-3, 5-7")
    assert text.count("straggler_wait") == 2  # the grouped finding and its change, once each


def test_markdown_opens_with_the_job_verdict(job: tuple[Analysis, dict[str, Any]]) -> None:
    analysis, _ = job
    text = render_markdown(analysis)
    verdict = text.split("## Verdict\n\n")[1].split("\n## ")[0]
    first = verdict.splitlines()[0]
    assert first.startswith(f"**Job of {RANKS} ranks**: ")
    _job_claims(first, analysis)
    assert f"First change, on rank {STRAGGLER} (`{CAUSE}`" in first
    bullets = [ln for ln in verdict.splitlines() if ln.startswith("- ")]
    assert [b.split("**")[1] for b in bullets] == [
        f"rank {STRAGGLER} GPU {STRAGGLER}",
        "ranks 0-3, 5-7",
    ]
    # the findings table: the seven waiting ranks' change is one row
    assert text.count("| `straggler_wait` |") == 1


def test_html_opens_with_the_job_verdict(job: tuple[Analysis, dict[str, Any]]) -> None:
    analysis, _ = job
    page = render_html(analysis)
    verdict = page.split("<h2>Verdict</h2>")[1].split("<h2>")[0]
    boxes = verdict.split("<details>")[0].count("class='verdict'")
    assert boxes == 1  # the job's; each GPU's own verdict is collapsed below
    first = re.sub(r"<[^>]+>", "", verdict.split("</p>")[0])
    assert first.startswith(f"Job of {RANKS} ranks: ")
    _job_claims(first, analysis)
    assert "<b>ranks 0-3, 5-7: idle" in verdict
    assert verdict.split("<details>")[1].count("class='verdict'") == RANKS


def _first_comm_x(ax: Any) -> float:
    """x of the first communication bar of one timeline row (the lane's colour)."""
    from matplotlib.colors import to_rgba

    from traceforensics.report.palette import BUSY_COLORS

    want = to_rgba(BUSY_COLORS["communication"])
    for coll in ax.collections:
        faces = coll.get_facecolor()
        if len(faces) and tuple(faces[0]) == want:
            return min(float(p.vertices[:, 0].min()) for p in coll.get_paths())
    raise AssertionError("no communication lane on this row")


def test_timeline_draws_ranks_on_the_job_clock(job: tuple[Analysis, dict[str, Any]]) -> None:
    pytest.importorskip("matplotlib")
    from traceforensics.report.plots import figure_timeline

    analysis, truth = job
    fig = figure_timeline(analysis)
    try:
        axes = [ax for ax in fig.axes if ax.collections]
        assert len(axes) == RANKS  # one row per rank
        assert len({ax.get_xlim() for ax in axes}) == 1  # one shared x axis
        assert "job clock" in axes[-1].get_xlabel() and "(ms)" in axes[-1].get_xlabel()
        xs = [_first_comm_x(ax) for ax in axes]
    finally:
        import matplotlib.pyplot as plt

        plt.close(fig)
    # the straggler reaches the first all-reduce last, later than rank 0 despite its clock
    assert xs[STRAGGLER] > max(x for r, x in enumerate(xs) if r != STRAGGLER)
    # and by what the truth says, once the clock offsets are removed (ms on the axis)
    starts = truth["steps"][0]["collectives"][0]["start_ns"]
    for r in range(RANKS):
        want = (starts[STRAGGLER] - starts[r]) / 1e6
        assert abs((xs[STRAGGLER] - xs[r]) - want) <= 0.1 * want + 0.05, (r, xs, starts)


def test_step_sentence_and_labels() -> None:
    from traceforensics.analysis.ranks.results import StepRow

    rows = [StepRow(3, 4, 9, 1_320_000), StepRow(4, 4, 9, 1_400_000), StepRow(5, 2, 9, 200_000)]
    assert step_sentence(rows) == (
        "per step: in steps 3-4 rank 4 arrived last; the others waited 1.32–1.40 ms each for it "
        "per step; in step 5 rank 2 arrived last; the others waited 200.0 µs each for it in "
        "that step"
    )
    assert step_sentence([StepRow(1, None, 0)]) is None
    assert members_label([(0, 0), (1, 1), (2, 2), (3, 3), (5, 5), (7, 7)]) == "ranks 0-3, 5, 7"
    assert members_label([(0, 0), (0, 1), (1, 0)]) == "rank 0 GPU 0-1, rank 1 GPU 0"


def test_job_without_straggler_says_so_first(tmp_path: Path) -> None:
    out = tmp_path / "even"
    synth_ranks.generate_job(out, ranks=4, steps=3, fmt="nsys", straggler_rank=1, cause=None)
    analysis = analyze(load_path(out))
    lines = render_text(analysis, sections=()).splitlines()
    first = lines[lines.index("== Verdict ==") + 1]
    assert first.startswith("job of 4 ranks: no straggler — no rank keeps the others waiting")
    assert "over the trace" in first


def test_slow_gpu_straggler_change_is_its_cause(tmp_path: Path) -> None:
    """A straggler with no finding of its cause (``slow_gpu``) is told what was found about
    it, not its unrelated top finding."""
    out = tmp_path / "slow"
    synth_ranks.generate_job(out, ranks=4, steps=3, fmt="nsys", straggler_rank=3, cause="slow_gpu")
    analysis = analyze(load_path(out))
    lines = render_text(analysis, sections=()).splitlines()
    head, change = lines[lines.index("== Verdict ==") + 1 : lines.index("== Verdict ==") + 3]
    assert "rank 3 (GPU 3) is the straggler, cause slow_gpu" in head
    assert change.strip().startswith("on rank 3, slow_gpu: its compute kernels take")
