"""Gap analysis on the real traces under ../shared/traces.

Busy/idle totals are checked against an independent plain-Python interval union over the raw
GPU rows; the ResNet pair is checked against the acceptance figures and against an independent
"GPU idle while the main thread was in the DataLoader" computation.
"""

from __future__ import annotations

import bisect
from functools import lru_cache

import polars as pl
import pytest

from tests.conftest import kineto_trace_files, nsys_trace_files, plain_union, shared_trace
from tests.json_contract import EVIDENCE_FIELDS, GAP_FIELDS, STEP_FIELDS
from traceforensics.analysis import Analysis, AnalysisOptions, analyze
from traceforensics.ingest import load_path
from traceforensics.model.session import TraceSession

ALL_TRACES = kineto_trace_files() + nsys_trace_files()
W0 = "kineto/resnet50_v100_workers0.pt.trace.json.gz"
W4 = "kineto/resnet50_v100_workers4.pt.trace.json.gz"


@lru_cache(maxsize=4)
def _load(rel: str) -> TraceSession:
    return load_path(shared_trace(rel))


class PlainUnion:
    """Busy intervals of one device merged with a plain loop (independent of intervals.py)."""

    def __init__(self, spans: list[tuple[int, int]]) -> None:
        merged = plain_union(spans)
        self.starts = [m[0] for m in merged]
        self.merged = merged

    def busy(self, lo: int, hi: int) -> int:
        i = max(bisect.bisect_right(self.starts, lo) - 1, 0)
        total = 0
        for s, e in self.merged[i:]:
            if s >= hi:
                break
            total += max(0, min(e, hi) - max(s, lo))
        return total


def _unions(session: TraceSession) -> dict[tuple[int, int], PlainUnion]:
    rows = session.events.filter(
        pl.col("kind").is_in(["kernel", "memcpy", "memset", "cuda_graph"])
    ).select("rank", "device", "start_ns", "dur_ns")
    spans: dict[tuple[int, int], list[tuple[int, int]]] = {}
    for r, d, s, dur in rows.iter_rows():
        spans.setdefault((r, d), []).append((s, s + dur))
    return {k: PlainUnion(v) for k, v in spans.items()}


@pytest.mark.parametrize("rel", ALL_TRACES)
def test_busy_idle_match_independent_union(rel: str) -> None:
    session = _load(rel)
    res = analyze(session, AnalysisOptions.of(window="trace", step_window="annotation"))
    unions = _unions(session)
    assert {(d.rank, d.device) for d in res.devices} == set(unions)
    if not res.devices:  # only the CPU-only capture and the export without CUDA tables
        codes = {d.code for d in res.diagnostics}
        assert unions == {} and res.host is not None
        assert codes & {"cpu_only", "cuda_tables_missing"}, (rel, codes)
        assert ("cpu_only" in codes) == ("cpu_only" in rel)
        assert ("cuda_tables_missing" in codes) == rel.endswith("_no_cuda.sqlite")
        return
    for d in res.devices:
        lo, hi = d.window_start_ns, d.window_start_ns + d.window_ns
        assert d.busy_ns == unions[(d.rank, d.device)].busy(lo, hi)
        assert d.idle_ns == d.window_ns - d.busy_ns
        assert sum(d.idle_by_cause.values()) == d.idle_ns
        assert min(d.idle_by_cause.values()) >= 0
    for s in res.idle.steps:
        assert s.busy_ns == unions[(s.rank, s.device)].busy(s.start_ns, s.start_ns + s.dur_ns)
        assert s.idle_ns == s.dur_ns - s.busy_ns
        assert sum(s.idle_by_cause.values()) == s.idle_ns
    _check_gpu_step_annotations(session, res)


def _check_gpu_step_annotations(session: TraceSession, res: Analysis) -> None:
    """Steps taken from GPU step annotations span exactly those annotations."""
    ann = (
        session.events.filter(
            (pl.col("kind") == "gpu_annotation")
            & pl.col("name").cast(pl.String).str.contains(r"^ProfilerStep#\d+$")
        )
        .group_by("rank", "device", pl.col("name").cast(pl.String))
        .agg(pl.col("start_ns").min(), (pl.col("start_ns") + pl.col("dur_ns")).max().alias("e"))
    )
    spans = {(r, d, n): (s, e) for r, d, n, s, e in ann.iter_rows()}
    for s in res.idle.steps:
        key = (s.rank, s.device, s.name)
        if key in spans:
            assert (s.start_ns, s.start_ns + s.dur_ns) == spans[key]


def _share(res: Analysis, cause: str) -> float:
    (dev,) = res.devices
    return dev.idle_by_cause[cause] / dev.idle_ns


def _loader_idle(session: TraceSession) -> int:
    """GPU idle ns while the main thread was inside a DataLoader ``__next__`` (plain Python)."""
    (union,) = _unions(session).values()
    loader = session.events.filter(
        pl.col("name").cast(pl.String).str.starts_with("enumerate(DataLoader)")
    ).select("start_ns", "dur_ns")
    return sum(d - union.busy(s, s + d) for s, d in loader.iter_rows())


def test_resnet_workers0_is_data_loading_bound() -> None:
    session = _load(W0)
    res = analyze(session, AnalysisOptions.of(window="trace"))
    (dev,) = res.devices
    top = max(dev.idle_by_cause, key=lambda c: dev.idle_by_cause[c])
    assert top == "data_loading"
    # measured 76 %: the rest is launch-bound dispatch that workers4 shows too (see
    # docs/validation.md); the issue's 85 % bar is not met by an exact attribution
    assert _share(res, "data_loading") >= 0.75
    # data loading is charged only under the DataLoader range, and to (almost) all GPU idle
    # there: the ~1 % left are 1-2 µs GPU-side gaps between already-queued backward kernels
    # still draining at the start of the loader (launch_overhead)
    loader_idle = _loader_idle(session)
    assert 0.99 * loader_idle <= dev.idle_by_cause["data_loading"] <= loader_idle
    # the five largest gaps are the per-step loader stalls
    assert all(
        max(g.causes, key=lambda c: g.causes[c]) == "data_loading" for g in res.idle.gaps[:5]
    )


def test_resnet_workers4_is_not_data_loading_bound() -> None:
    session = _load(W4)
    res = analyze(session, AnalysisOptions.of(window="trace"))
    (dev,) = res.devices
    assert _share(res, "data_loading") < 0.10
    loader_idle = _loader_idle(session)
    assert 0.99 * loader_idle <= dev.idle_by_cause["data_loading"] <= loader_idle
    # the ~40 ms pageable cudaMemcpyAsync of the first batch: the GPU idles from the call's
    # start to its DMA start, and that time is memcpy
    call = (
        session.events.filter(
            (pl.col("name").cast(pl.String) == "cudaMemcpyAsync") & (pl.col("dur_ns") > 30_000_000)
        )
        .select("start_ns", "dur_ns", "correlation")
        .row(0)
    )
    dma_start = session.events.filter(
        (pl.col("kind") == "memcpy") & (pl.col("correlation") == call[2])
    ).get_column("start_ns")[0]
    (union,) = _unions(session).values()
    idle_in_call = (dma_start - call[0]) - union.busy(call[0], dma_start)
    assert idle_in_call > 30_000_000
    big = res.idle.gaps[0]
    assert big.causes["memcpy"] == idle_in_call
    assert any(e.name == "cudaMemcpyAsync" and e.cause == "memcpy" for e in big.evidence)
    assert dev.idle_by_cause["memcpy"] >= idle_in_call


def test_json_fragment_shape() -> None:
    res = analyze(_load(W4), AnalysisOptions.of(window="trace", top_gaps=3))
    out = res.to_json()
    assert set(out) >= {"devices", "steps", "gaps"}
    (dev,) = out["devices"]
    assert sum(dev["idle_by_cause"].values()) == res.devices[0].idle_ns == dev["idle_ns"]
    assert len(out["gaps"]) == 3
    g = out["gaps"][0]
    assert set(g) == GAP_FIELDS
    assert set(g["evidence"][0]) == EVIDENCE_FIELDS
    step = out["steps"][0]
    assert set(step) >= STEP_FIELDS


@pytest.mark.parametrize(
    ("rel", "window", "cause"),
    [
        # checked by hand against the raw events (docs/validation.md)
        ("hta/alexnet_a100_sync.json.gz", "trace", "compilation"),  # 29.9 s first CUDA call
        # eager vLLM: the host is inside vLLM's custom ops (vllm::moe_forward,
        # vllm::unified_attention_with_output) running their Python (flashinfer, MoE routing)
        # and their aten::empty children between tiny kernels; that is the children's own CPU
        # work, not dispatch (issue 11 item 5; until then the operator's whole time before a
        # launch, capped at 1 ms, counted as dispatch and made this launch_overhead)
        ("tracelens/eager_b200.json.gz", "trace", "cpu_compute"),
        ("kineto/resnet50_v100_workers4.pt.trace.json.gz", "trace", "launch_overhead"),
        ("nsys/NVIDIA__Fuser__report1.sqlite", "device", "untraced"),
    ],
)
def test_dominant_cause(rel: str, window: str, cause: str) -> None:
    res = analyze(_load(rel), AnalysisOptions.of(window=window))
    dev = res.devices[0]
    assert max(dev.idle_by_cause, key=lambda c: dev.idle_by_cause[c]) == cause


def test_nvfuser_compile_ranges_are_compilation() -> None:
    session = _load("nsys/NVIDIA__Fuser__report1.sqlite")
    res = analyze(session, AnalysisOptions.of(window="device", top_gaps=50))
    # nvFuser JIT ranges before the first launch of a fused kernel
    compile_gaps = [g for g in res.idle.gaps if g.causes.get("compilation", 0) > 0.5 * g.dur_ns]
    assert compile_gaps
    assert any("compileFusion" in e.name for g in compile_gaps for e in g.evidence)


@pytest.mark.xfail(
    strict=True,
    reason="issue 4 asks >= 85 % data_loading on ResNet workers0; the exact attribution gives "
    "76 % (trace window): the rest are launch-bound gaps that workers4 shows too. Kept visible "
    "on purpose (docs/validation.md); never loosened.",
)
def test_resnet_workers0_meets_the_issue_85_percent_bar() -> None:
    res = analyze(_load(W0), AnalysisOptions.of(window="trace"))
    assert _share(res, "data_loading") >= 0.85
