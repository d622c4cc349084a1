"""Ranks analysed apart (``traceforensics.fanout``): ``--jobs 1``, ``--jobs 2`` and a real Dask
``LocalCluster`` of 2 worker processes give the same JSON, and that JSON is the joint
analysis's (every rank in one session) on generated jobs of both formats and on the sampled
128-rank pair, but for the fields the merge cannot rebuild from per-rank summaries (listed in
``APART_ONLY``). Bad rank files and a missing extra end in one line and exit code 2."""

from __future__ import annotations

import json
import shutil
import sys
from pathlib import Path
from typing import Any

import pytest

import synth_ranks
import traceforensics as tf
from tests.conftest import TRACES, run_cli
from traceforensics.report.json_out import dumps

#: Fields that differ from the joint analysis, and why: none on a data-parallel job (the
#: program is detected from every rank's name counts summed, as one table of all gives) ...
APART_ONLY: set[str] = set()
#: ... nor on jobs whose ranks run different kernels (every rank's groups of kernels without a
#: FLOPs model are summed before the job's top 10 is cut).
RANKS_DIFFER = APART_ONLY


@pytest.fixture(scope="module")
def jobs(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    """A 4-rank job with a data-loading straggler in each format (``truth.json`` beside the
    rank files: a Kineto directory leaves it out with a warning)."""
    root = tmp_path_factory.mktemp("jobs")
    out = {}
    for fmt in ("kineto", "nsys"):
        out[fmt] = root / fmt
        synth_ranks.generate_job(
            out[fmt], ranks=4, steps=3, fmt=fmt, straggler_rank=2, cause="data_loading"
        )
    return out


def _json(argv: list[str], capsys: pytest.CaptureFixture[str]) -> str:
    code, out, err = run_cli(["analyze", *argv, "--json", "--no-cache"], capsys)
    assert code == 0, err
    return out


def _without(doc: dict[str, Any], fields: set[str]) -> dict[str, Any]:
    for dotted in fields:
        head, _, leaf = dotted.rpartition(".")
        node = doc
        for key in head.split(".") if head else []:
            node = node[key]
        node.pop(leaf)
    return doc


def _joint(path: Path, **options: Any) -> dict[str, Any]:
    return json.loads(dumps(tf.analyze(path, **options).to_json()))  # type: ignore[no-any-return]


def _apart(path: Path, jobs: int = 1, **options: Any) -> dict[str, Any]:
    result = tf.analyze(path, jobs=jobs, **options)  # the façade's way to the fan-out
    assert result.session.events.height == 0  # summaries came back, never the events
    return json.loads(dumps(result.to_json()))  # type: ignore[no-any-return]


@pytest.mark.parametrize("fmt", ["kineto", "nsys"])
def test_jobs_and_a_dask_cluster_give_the_same_json(
    jobs: dict[str, Path], fmt: str, capsys: pytest.CaptureFixture[str]
) -> None:
    one = _json([str(jobs[fmt]), "--jobs", "1"], capsys)
    assert _json([str(jobs[fmt]), "--jobs", "2"], capsys) == one
    # a real distributed.LocalCluster: 2 single-threaded worker processes
    assert _json([str(jobs[fmt]), "--dask", "local", "--jobs", "2"], capsys) == one
    doc = json.loads(one)
    assert doc["ranks"]["straggler"]["rank"] == 2 and len(doc["devices"]) == 4


@pytest.mark.parametrize("fmt", ["kineto", "nsys"])
def test_apart_is_the_joint_analysis(jobs: dict[str, Path], fmt: str) -> None:
    joint, apart = _joint(jobs[fmt]), _apart(jobs[fmt], jobs=2)
    assert apart["program"] == joint["program"]
    assert _without(apart, APART_ONLY) == _without(joint, APART_ONLY)
    # fewer gaps kept, a step cut, the trace window: the merge re-cuts what the passes cut
    options = {"top_gaps": 3, "top": 2, "steps": "5:", "window": "trace"}
    assert _without(_apart(jobs[fmt], **options), APART_ONLY) == _without(
        _joint(jobs[fmt], **options), APART_ONLY
    )


def test_apart_is_the_joint_analysis_on_the_sampled_128_rank_job() -> None:
    folder = TRACES / "hta/job128_sampled"
    if not folder.exists():
        pytest.skip("../shared/traces is not beside the checkout")
    assert _without(_apart(folder), RANKS_DIFFER) == _without(_joint(folder), RANKS_DIFFER)


def test_ranks_are_settled_over_the_whole_set(jobs: dict[str, Path], tmp_path: Path) -> None:
    """Two files with the same distributedInfo rank: every file falls back to its position,
    as the joint loader does (the ranks each worker read are relabelled)."""
    for name, src in (("a", "rank1"), ("b", "rank1"), ("c_7", "rank3")):
        shutil.copy(jobs["kineto"] / f"{src}.pt.trace.json.gz", tmp_path / f"{name}.json.gz")
    joint, apart = _joint(tmp_path), _apart(tmp_path)
    assert [i["rank"] for i in apart["inputs"]] == [0, 1, 2]
    assert apart["ranks"]["rank_source"] == "file order"
    assert _without(apart, APART_ONLY) == _without(joint, APART_ONLY)


def test_no_selected_step_is_one_line(
    jobs: dict[str, Path], capsys: pytest.CaptureFixture[str]
) -> None:
    code, _, err = run_cli(["analyze", str(jobs["nsys"]), "--steps", "50:", "--no-cache"], capsys)
    assert code == 2 and err.count("\n") == 1 and "no step in that range" in err
    assert "(--steps)" in err


@pytest.mark.parametrize("n", ["1", "2"])
def test_a_damaged_rank_file_is_one_line(
    jobs: dict[str, Path], tmp_path: Path, n: str, capsys: pytest.CaptureFixture[str]
) -> None:
    folder = tmp_path / "job"
    shutil.copytree(jobs["kineto"], folder)
    (folder / "rank1.pt.trace.json.gz").write_bytes(b"\x1f\x8b\x08\x00not a gzip stream")
    code, out, err = run_cli(["analyze", str(folder), "--json", "--no-cache", "--jobs", n], capsys)
    assert code == 2 and out == ""
    assert err.startswith("tf: error: ") and err.count("\n") == 1
    assert "rank1.pt.trace.json.gz" in err and "Traceback" not in err


def test_dask_without_the_extra_says_how_to_install_it(
    jobs: dict[str, Path], monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setitem(sys.modules, "distributed", None)  # `import distributed` fails
    code, _, err = run_cli(["analyze", str(jobs["nsys"]), "--dask", "local"], capsys)
    assert code == 2 and err.count("\n") == 1
    assert "traceforensics[dask]" in err and "(--dask)" in err


def test_dask_with_figures_is_refused(
    jobs: dict[str, Path], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    png = tmp_path / "f.png"
    code, _, err = run_cli(
        ["analyze", str(jobs["nsys"]), "--dask", "local", "--plot", str(png)], capsys
    )
    assert code == 2 and "--dask" in err and not png.exists()
