"""Short-kernel forensics: grouping, host cost, idle, recoverable time, remedies, JSON shape."""

from __future__ import annotations

import gzip
import json
from pathlib import Path
from typing import Any

import pytest

from synth import SynthTrace
from tests.conftest import nonempty, shared_trace
from tests.json_contract import OP_FIELDS, SHORT_KERNEL_FIELDS
from traceforensics.analysis.kernels.forensics import (
    analyze_kernels,
    normalize_kernel_name,
)
from traceforensics.analysis.options import MIN_KERNEL_ROWS, AnalysisOptions
from traceforensics.ingest import load_path

MUL = (
    "void at::native::vectorized_elementwise_kernel<4, at::native::MulFunctor<float>, "
    "at::detail::Array<char*, 3> >(int, at::native::MulFunctor<float>, at::detail::Array<char*, 3>)"
)
ADD = "void at::native::vectorized_elementwise_kernel<4, at::native::AddFunctor<float> >(int)"
GEMM = "ampere_sgemm_32x32_sliced1x4_nn"
FOREACH = "void multi_tensor_apply_kernel<TensorListMetadata<4>, AdamFunctor<float> >(int)"
SHAPE = {"Input Dims": [[1000], [1000]], "Input type": ["float", "float"]}


def scenario() -> SynthTrace:
    """Timeline (ns). GPU: big GEMM [5000,105000), queued adds and a small GEMM, then
    launch-bound muls (host slow), then a launch-bound foreach kernel in an optimizer step."""
    tr = SynthTrace()
    tr.cpu_range("aten::mm", 0, 10_000, args={"Input Dims": [[512, 512], [512, 512]]})
    tr.launch("big_gemm_kernel", 1_000, 2_000, 5_000, 100_000)
    tr.cpu_range("aten::add", 10_000, 10_000, args=SHAPE)
    tr.launch(ADD, 12_000, 2_000, 106_000, 2_000)  # queued, gap 1000
    tr.cpu_range("aten::add", 20_000, 10_000, args=SHAPE)
    tr.launch(ADD, 22_000, 2_000, 109_500, 2_000)  # queued, gap 1500
    tr.cpu_range("aten::mm", 30_000, 10_000, args={"Input Dims": [[8, 8], [8, 8]]})
    tr.launch(GEMM, 32_000, 2_000, 113_000, 5_000)  # queued, gap 1500
    tr.cpu_range("aten::mul", 200_000, 30_000, args=SHAPE)
    tr.launch(MUL, 225_000, 3_000, 230_000, 3_000)  # launch-bound, gap 112000
    tr.cpu_range("aten::mul", 240_000, 10_000, args=SHAPE)
    tr.launch(MUL, 245_000, 2_000, 248_000, 3_000)  # launch-bound, gap 15000
    tr.cpu_range("Optimizer.step#AdamW.step", 300_000, 30_000, kind="annotation")
    tr.cpu_range("aten::_foreach_add_", 301_000, 19_000, args={"Sequence number": 7})
    tr.launch(FOREACH, 305_000, 2_000, 308_000, 2_000)  # launch-bound, gap 57000
    return tr


def reference_rows(tr: SynthTrace, threshold_ns: int) -> dict[tuple[str, str], dict[str, int]]:
    """The documented rules recomputed in plain Python over the builder's own events."""
    gpu = sorted(tr.of_kind("kernel"), key=lambda e: e.start_ns)
    apis = {e.correlation: e for e in tr.of_kind("cuda_api")}
    ops = [e for e in tr.of_kind("cpu_op", "annotation")]

    def innermost(t: int) -> Any:
        best = None
        for o in ops:
            if o.start_ns <= t < o.end_ns and (best is None or o.start_ns >= best.start_ns):
                best = o
        return best

    launches_in_op: dict[int, int] = {}
    for k in gpu:
        o = innermost(apis[k.correlation].start_ns)
        launches_in_op[id(o)] = launches_in_op.get(id(o), 0) + 1
    facts = []
    prev_end: int | None = None
    for k in gpu:
        api = apis[k.correlation]
        o = innermost(api.start_ns)
        gap = 0 if prev_end is None else max(0, k.start_ns - prev_end)
        lb = prev_end is not None and api.end_ns > prev_end
        host = api.dur_ns
        if o is not None and o.kind == "cpu_op" and "::" in o.name:
            host = max(o.dur_ns // launches_in_op[id(o)], api.dur_ns)
        facts.append((k, o, gap, lb, host, prev_end is not None))
        prev_end = k.end_ns if prev_end is None else max(prev_end, k.end_ns)
    queued = sorted(f[2] for f in facts if not f[3] and f[5])
    mid = len(queued) // 2
    overhead = int(queued[mid] if len(queued) % 2 else (queued[mid - 1] + queued[mid]) / 2)
    out: dict[tuple[str, str], dict[str, int]] = {}
    for k, o, gap, lb, host, _ in facts:
        if k.dur_ns >= threshold_ns:
            continue
        rec = min(gap, host + overhead) if lb else min(gap, overhead)
        row = out.setdefault(
            (normalize_kernel_name(k.name), o.name),
            {"count": 0, "total_ns": 0, "recoverable_ns": 0, "host": 0, "idle": 0, "lb": 0},
        )
        row["count"] += 1
        row["total_ns"] += k.dur_ns
        row["recoverable_ns"] += rec
        row["host"] += host
        row["idle"] += gap
        row["lb"] += int(lb)
    return out


@pytest.fixture(params=["kineto", "nsys"])
def loaded(request: pytest.FixtureRequest, tmp_path: Path) -> Any:
    tr = scenario()
    if request.param == "kineto":
        return tr, load_path(tr.write_kineto(tmp_path / "s.pt.trace.json.gz"))
    return tr, load_path(tr.write_nsys(tmp_path / "s.sqlite"))


def test_short_rows_match_reference(loaded: Any) -> None:
    tr, session = loaded
    result = analyze_kernels(session, AnalysisOptions.of(short_kernel_us=10.0))
    ref = reference_rows(tr, 10_000)
    got = {(r.name, r.launching_op): r for r in result.short_kernels}
    assert set(got) == set(ref)
    for key, want in nonempty(ref.items()):
        r = got[key]
        assert (r.count, r.total_ns, r.recoverable_ns) == (
            want["count"],
            want["total_ns"],
            want["recoverable_ns"],
        ), key
        assert r.host_launch_ns == want["host"] and r.idle_between_ns == want["idle"]
        assert r.launch_bound_count == want["lb"]
        assert r.mean_ns == want["total_ns"] // want["count"]
    # ranked by recoverable time
    recs = [r.recoverable_ns for r in result.short_kernels]
    assert recs == sorted(recs, reverse=True)
    # hand check of the launch-bound muls: overhead = median(1000, 1500, 1500) = 1500;
    # min(112000, 30000 + 1500) + min(15000, 10000 + 1500)
    mul = got[(normalize_kernel_name(MUL), "aten::mul")]
    assert mul.recoverable_ns == 31_500 + 11_500
    assert mul.share_of_busy == pytest.approx(6_000 / 117_000)
    assert result.short_kernel_count == 6 and result.kernel_count == 7


def test_remedies_follow_the_facts(loaded: Any) -> None:
    _, session = loaded
    got = {r.launching_op: r for r in analyze_kernels(session).short_kernels}
    assert got["aten::mul"].remedy_code == "cuda_graphs"  # launch-bound, host >> GPU
    assert got["aten::add"].remedy_code == "fusion"  # queued elementwise
    assert got["aten::mm"].remedy_code == "larger_batch"  # queued tiny GEMM
    assert got["aten::_foreach_add_"].remedy_code == "fused_optimizer"
    assert got["aten::_foreach_add_"].context == "Optimizer.step#AdamW.step"
    assert all(r.remedy for r in got.values())


def test_threshold_option(loaded: Any) -> None:
    _, session = loaded
    result = analyze_kernels(session, AnalysisOptions.of(short_kernel_us=2.5, top=1))
    assert result.short_kernel_count == 3  # the two adds and the foreach kernel (2 µs each)
    # two groups (aten::add x2, the foreach kernel); ``top`` is the rows a report shows and
    # results keep at least MIN_KERNEL_ROWS, so top=1 drops neither
    assert MIN_KERNEL_ROWS >= 2
    assert {r.launching_op for r in result.short_kernels} == {"aten::add", "aten::_foreach_add_"}


def test_json_shape(loaded: Any) -> None:
    _, session = loaded
    j = analyze_kernels(session).to_json()
    assert {"short_kernels", "ops", "mfu"} <= set(j)
    assert set(j["mfu"]) == {"devices", "steps"}
    assert all(set(r) >= SHORT_KERNEL_FIELDS for r in j["short_kernels"])
    assert j["ops"] and all(set(r) >= OP_FIELDS for r in j["ops"])
    json.dumps(j)  # serialisable as is
    # the big GEMM's op has FLOPs (mm 2*512^3); every kernel is charged or counted unknown
    unknown = j["unknown_flops_kernels"]["count"]
    charged = sum(r["kernel_count"] for r in j["ops"])
    assert charged + unknown == 7


def test_normalize_kernel_name() -> None:
    assert normalize_kernel_name(MUL) == (
        "at::native::vectorized_elementwise_kernel<4, at::native::MulFunctor<float>, "
        "at::detail::Array<char*, 3> >"
    )
    assert normalize_kernel_name("triton_poi_fused_add_0") == "triton_poi_fused_add_0"
    assert normalize_kernel_name("void (anonymous namespace)::k<int>(int*)") == "k<int>"


def test_eager_b200_launch_bound_rows() -> None:
    """vLLM eager decode on B200: most kernels are under 10 µs and the host cannot keep up."""
    rel = "tracelens/eager_b200.json.gz"
    with gzip.open(shared_trace(rel)) as fh:
        raw = json.load(fh)["traceEvents"]
    kernels = [e for e in raw if e.get("cat") == "kernel"]
    short_raw = sum(1 for e in kernels if round(float(e["dur"]) * 1000) < 10_000)
    # independent busy union of device 0 from the raw events
    spans = sorted(
        (round(float(e["ts"]) * 1000), round((float(e["ts"]) + float(e["dur"])) * 1000))
        for e in raw
        if e.get("cat") in ("kernel", "gpu_memcpy", "gpu_memset")
    )
    idle, end = 0, spans[0][1]
    for s, e in spans[1:]:
        idle += max(0, s - end)
        end = max(end, e)
    result = analyze_kernels(load_path(shared_trace(rel)), AnalysisOptions.of(top=1000))
    assert result.short_kernel_count == short_raw
    assert short_raw > len(kernels) / 2
    assert sum(r.recoverable_ns for r in result.short_kernels) <= idle
    for r in result.short_kernels[:5]:
        assert r.remedy_code == "cuda_graphs"
        assert r.launch_bound_count == r.count
        assert r.host_launch_ns > r.total_ns
        assert r.recoverable_ns <= r.idle_between_ns


def test_rocm_device_index_takes_node_model() -> None:
    """MI300X trace: kernels run on device index 2 while deviceProperties lists id 0; the
    node is homogeneous, so the MI300X dense BF16 peak applies (how = same_node)."""
    result = analyze_kernels(load_path(shared_trace("tracelens/bert_small_mi300x.json.gz")))
    (dev,) = result.mfu_by_device
    assert dev.peak_how == "same_node"
    assert {r.peak_tflops for r in result.ops if r.dtype == "bf16"} == {1307.4}


def test_host_tree_and_launch_links() -> None:
    """Parent = innermost range open at the start (same thread only); launch calls are leaves;
    kernel -> launch call by (rank, correlation)."""
    import polars as pl

    from traceforensics.analysis.context import prepare
    from traceforensics.analysis.kernels.forensics import kernel_links
    from traceforensics.analysis.optree import ancestors_pick
    from traceforensics.model.session import TraceMeta, TraceSession

    rows = [
        # id, kind, name, start, dur, tid, device, correlation
        (1, "annotation", "ProfilerStep#3", 0, 1000, 1, None, None),
        (2, "cpu_op", "aten::linear", 10, 500, 1, None, None),
        (3, "cpu_op", "aten::addmm", 20, 400, 1, None, None),
        (4, "cuda_api", "cudaLaunchKernel", 30, 10, 1, None, 77),
        (5, "cpu_op", "aten::add", 600, 100, 1, None, None),
        (6, "cpu_op", "aten::other_thread", 15, 900, 2, None, None),
        (7, "kernel", "gemm", 50, 100, None, 0, 77),
    ]
    frame = pl.DataFrame(
        rows,
        schema=["event_id", "kind", "name", "start_ns", "dur_ns", "tid", "device", "correlation"],
        orient="row",
    ).with_columns(pl.lit(0).alias("rank"), pl.lit(9).alias("pid"))
    session = TraceSession.from_frames(frame, TraceMeta(source_format="test"))
    ctx = prepare(session)
    from tests.conftest import tree_parents

    assert tree_parents(session) == {1: None, 2: 1, 3: 2, 4: 3, 5: 1, 6: None}
    kl = kernel_links(ctx)
    assert kl.select("kernel_id", "api_id", "op_id").row(0) == (7, 4, 3)
    # outermost flagged ancestor: linear (2) over addmm (3)
    assert ancestors_pick(ctx.tree_index, kl["op_id"], pl.Series([2, 3])).tolist() == [2]
    assert ancestors_pick(ctx.tree_index, kl["op_id"], pl.Series([3])).tolist() == [3]
    assert ancestors_pick(ctx.tree_index, kl["op_id"], pl.Series([5])).tolist() == [-1]


def test_resnet50_step_mfu_sees_the_data_loader() -> None:
    """Same ResNet-50 training, DataLoader workers 0 vs 4: every step does the same model
    FLOPs, and the step MFU (over the host step wall time) is lower when the GPU waits for
    data (workers=0)."""
    import statistics

    mfu, flops = {}, {}
    for w in (0, 4):
        rel = f"kineto/resnet50_v100_workers{w}.pt.trace.json.gz"
        steps = analyze_kernels(load_path(shared_trace(rel))).mfu_by_step
        assert len(steps) == 6
        flops[w] = {s.flops for s in steps}
        mfu[w] = statistics.median(s.mfu for s in steps if s.mfu is not None)
    assert len(flops[0]) == 1 and flops[0] == flops[4]
    assert mfu[4] > mfu[0] * 1.2
