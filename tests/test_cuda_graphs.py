"""CUDA/HIP graph replays (issue 10) in both trace modes: node-level (one kernel row per graph
node) and graph-level (nsys ``--cuda-graph-trace=graph``: one row per launch). A graph-level
row is GPU work: a 99.9%-busy replay must read as busy, not as idle (peers report it 26% idle).
A graph launch with no GPU record at all (Kineto in graph mode) is flagged, not read as idle
time the user could recover."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest

from tests.conftest import ROOT, run_cli
from traceforensics import analyze, load

sys.path.insert(0, str(ROOT / "tools"))
import synth

REPLAYS, NODES, NODE_NS, NODE_GAP_NS, PERIOD_NS = 50, 20, 49_000, 1_000, 1_000_000


def _replays(api: str = "cudaGraphLaunch") -> synth.SynthTrace:
    """Back-to-back graph replays queued ahead by the host: inside a replay 1 µs between nodes,
    between replays 1 µs; the device is busy 99.9% of its window at graph level."""
    tr = synth.SynthTrace()
    for i in range(REPLAYS):
        first = 10_000 + i * PERIOD_NS
        launch = max(0, first - 500_000)
        nodes = [
            (f"graph_node_{j}", first + j * (NODE_NS + NODE_GAP_NS), NODE_NS) for j in range(NODES)
        ]
        tr.graph_launch(launch, 8_000, nodes, graph_id=3, api=api)
    return tr


def _union_ns(spans: list[tuple[int, int]]) -> int:
    return sum(e - s for s, e in spans)


@pytest.mark.parametrize("mode", ["node", "graph"])
def test_nsys_graph_replays_are_busy_in_both_modes(tmp_path: Path, mode: str) -> None:
    tr = _replays()
    tr.graph_trace = mode
    session = load(tr.write_nsys(tmp_path / f"{mode}.sqlite"), use_cache=False)
    (dev,) = analyze(session).devices
    spans = tr.busy_union()
    window = spans[-1][1] - spans[0][0]
    assert dev.window_ns == window
    assert dev.busy_ns == _union_ns(spans)  # an independent union of what was recorded
    assert dev.busy_by_kind["kernel"] == dev.busy_ns
    assert dev.idle_ns == sum(dev.idle_by_cause.values()) == window - dev.busy_ns
    if mode == "graph":
        assert (dev.graph_count, dev.kernel_count) == (REPLAYS, 0)
        assert dev.busy_ns / dev.window_ns > 0.998
        assert [k.name for k in dev.top_kernels] == ["CUDA Graph 3"]
    else:
        assert (dev.graph_count, dev.kernel_count) == (0, REPLAYS * NODES)
        assert 0.97 < dev.busy_ns / dev.window_ns < 0.99  # the 1 µs node gaps are real idle
    assert not [w for w in session.meta.warnings if "GraphLaunch" in w]


def test_graph_rows_link_to_their_launch(tmp_path: Path) -> None:
    """The launch linker ties each graph-level row to its cudaGraphLaunch (same correlation)."""
    tr = _replays()
    tr.graph_trace = "graph"
    session = load(tr.write_nsys(tmp_path / "g.sqlite"), use_cache=False)
    from traceforensics.analysis.context import prepare

    ctx = prepare(session)
    graphs = ctx.work.filter(ctx.work["kind"] == "cuda_graph")
    assert graphs.height == REPLAYS
    assert graphs["l_name"].drop_nulls().to_list() == ["cudaGraphLaunch"] * REPLAYS


def test_node_mode_agrees_across_formats(tmp_path: Path) -> None:
    tr = _replays()
    nsys = analyze(load(tr.write_nsys(tmp_path / "n.sqlite"), use_cache=False)).devices[0]
    kineto = analyze(load(tr.write_kineto(tmp_path / "n.json"), use_cache=False)).devices[0]
    assert (kineto.busy_ns, kineto.window_ns) == (nsys.busy_ns, nsys.window_ns)
    assert kineto.idle_by_cause == nsys.idle_by_cause


@pytest.mark.parametrize("api", ["cudaGraphLaunch", "hipGraphLaunch"])
def test_graph_launches_without_gpu_records_are_flagged(
    tmp_path: Path, api: str, capsys: pytest.CaptureFixture[str]
) -> None:
    """Kineto has no graph-level record: with the nodes missing, every launch is flagged once,
    in the text report and in JSON ``warnings``."""
    tr = _replays(api)
    tr.launch("tail_kernel", 60_000_000, 5_000, 60_010_000, 50_000)  # some recorded work
    tr.graph_trace = "graph"
    path = tr.write_kineto(tmp_path / "g.json")
    code, out, err = run_cli(["analyze", str(path), "--json", "--no-cache"], capsys)
    assert code == 0, err
    notes = [w for w in json.loads(out)["warnings"] if api in w]
    assert len(notes) == 1 and notes[0].startswith(f"{REPLAYS} of {REPLAYS} {api} calls"), notes
    code, text, _ = run_cli(["analyze", str(path), "--no-cache"], capsys)
    assert code == 0 and f"{REPLAYS} of {REPLAYS} {api} calls have no GPU record" in text
