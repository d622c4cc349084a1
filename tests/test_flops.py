"""FLOPs from shapes: hand-computed formulas, and real ops of the H100 / A100-era / V100 traces.

Real-trace checks recompute the expected numbers from the raw JSON with plain Python (the
kernel time of an op = kernels whose ``External id`` equals the launching aten op's), never
from the tool's own output.
"""

from __future__ import annotations

import gzip
import json
from collections import defaultdict
from dataclasses import dataclass
from typing import Any

import pytest

from tests.conftest import nonempty, shared_trace
from traceforensics.analysis.kernels.flops import op_cost
from traceforensics.analysis.kernels.forensics import analyze_kernels
from traceforensics.analysis.kernels.results import KernelAnalysis
from traceforensics.analysis.options import AnalysisOptions
from traceforensics.ingest import load_path

BF = "c10::BFloat16"


def conv_plain(
    x: tuple[int, int, int, int], cout: int, k: int, *, s: int, p: int, g: int = 1
) -> int:
    """Textbook conv FLOPs for input ``x`` = (N, C_in, H, W), square kernel ``k``, stride ``s``,
    padding ``p``, ``g`` groups: every output element is a (C_in/g)*k*k dot product (x2)."""
    n, cin, h, w = x
    ho = (h + 2 * p - k) // s + 1
    wo = (w + 2 * p - k) // s + 1
    return 2 * n * cout * ho * wo * (cin // g) * k * k


# ----------------------------------------------------------------------------- formulas
def test_mm_addmm_bmm_baddbmm() -> None:
    assert op_cost("aten::mm", [[3, 5], [5, 7]], ["float"] * 2, []).flops == 2 * 3 * 5 * 7
    # addmm: bias add not counted (GEMM epilogue), but its bytes are
    c = op_cost("aten::addmm", [[7], [3, 5], [5, 7], [], []], [BF, BF, BF, "Scalar", "Scalar"], [])
    assert c.flops == 210 and c.dtype == "bf16"
    assert c.bytes == 2 * (7 + 15 + 35 + 21)
    assert op_cost("aten::bmm", [[4, 3, 5], [4, 5, 7]], [BF] * 2, []).flops == 2 * 4 * 3 * 5 * 7
    bad = op_cost("aten::baddbmm", [[4, 3, 7], [4, 3, 5], [4, 5, 7]], [BF] * 3, [])
    assert bad.flops == 2 * 4 * 3 * 5 * 7


def test_matmul_and_linear() -> None:
    # broadcast batch [2,1] x [3] -> 6 batches; 1-D operand gives N = 1
    assert (
        op_cost("aten::matmul", [[2, 1, 4, 5], [3, 5, 6]], [BF] * 2, []).flops == 2 * 6 * 4 * 5 * 6
    )
    assert op_cost("aten::matmul", [[4, 5], [5]], [BF] * 2, []).flops == 2 * 4 * 5
    assert op_cost("aten::matmul", [[4, 5], [6, 7]], [BF] * 2, []).flops is None  # K mismatch
    lin = op_cost("aten::linear", [[8, 16, 32], [64, 32], [64]], [BF] * 3, ["", "", ""])
    assert lin.flops == 2 * 8 * 16 * 32 * 64


def test_conv_stride_padding_dilation_groups() -> None:
    dims = [[2, 8, 15, 15], [16, 4, 3, 3], [16]]  # groups = 2
    conc = ["", "", "", "[2, 2]", "[1, 1]", "[1, 1]", "2"]
    c = op_cost("aten::conv2d", dims, ["float"] * 3, conc)
    assert c.flops == conv_plain((2, 8, 15, 15), 16, 3, s=2, p=1, g=2)
    # dilation 2: effective kernel 5 -> (15 + 2 - 5) // 1 + 1 = 13
    conc_d = ["", "", "", "[1, 1]", "[1, 1]", "[2, 2]", "2"]
    assert (
        op_cost("aten::conv2d", dims, ["float"] * 3, conc_d).flops == 2 * 2 * 16 * 13 * 13 * 4 * 9
    )
    # cudnn_convolution: (input, weight, padding, stride, dilation, groups, ...)
    cud = op_cost(
        "aten::cudnn_convolution",
        [*dims[:2], []],
        ["float"] * 2 + ["GenericList"],
        ["", "", "[1, 1]", "[2, 2]", "[1, 1]", "2"],
    )
    assert cud.flops == c.flops
    conv1d = op_cost(
        "aten::conv1d",
        [[1, 4, 100], [8, 4, 5], []],
        ["float"] * 2,
        ["", "", "", "[1]", "[2]", "[1]", "1"],
    )
    assert conv1d.flops == 2 * 1 * 8 * 100 * 4 * 5
    # no Concrete Inputs: stride unknown -> FLOPs unknown, never guessed
    assert op_cost("aten::conv2d", dims, ["float"] * 3, []).flops is None
    tr = op_cost(
        "aten::convolution",
        [[1, 4, 5, 5], [4, 2, 3, 3], []],
        ["float"] * 2,
        ["", "", "", "[1, 1]", "[0, 0]", "[1, 1]", "True", "[0, 0]", "1"],
    )
    assert tr.flops == 2 * (4 * 25) * (2 * 9)


def test_attention_forward_backward() -> None:
    b, h, lq, lk, e = 2, 4, 100, 120, 64
    q, k = [b, h, lq, e], [b, h, lk, e]
    fwd = op_cost("aten::_scaled_dot_product_flash_attention", [q, k, k], [BF] * 3, [])
    assert fwd.flops == 4 * b * h * lq * lk * e
    blhe = op_cost(
        "aten::_flash_attention_forward",
        [[b, lq, h, e], [b, lk, h, e], [b, lk, h, e]],
        [BF] * 3,
        [],
    )
    assert blhe.flops == fwd.flops
    bwd = op_cost(
        "aten::_scaled_dot_product_flash_attention_backward", [q, q, k, k, q], [BF] * 5, []
    )
    assert bwd.flops == 2 * b * h * lq * lk * (3 * e + 2 * e)  # 2.5 x forward
    assert bwd.flops * 2 == fwd.flops * 5


def test_elementwise_one_flop_per_element() -> None:
    c = op_cost(
        "aten::add", [[4, 768, 14, 14], [1, 768, 1, 1], []], [BF, BF, "Scalar"], ["", "", "1"]
    )
    assert c.flops == 4 * 768 * 14 * 14 and c.family == "elementwise"
    assert op_cost("aten::relu_", [[10, 10]], ["float"], []).flops == 100
    assert op_cost("aten::add", [[3, 4], [5]], ["float"] * 2, []).flops is None  # no broadcast
    assert op_cost("aten::copy_", [[3, 4], [3, 4]], ["float"] * 2, []).flops is None


# ----------------------------------------------------------------------------- real traces
def _raw(rel: str) -> list[dict[str, Any]]:
    with gzip.open(shared_trace(rel)) as fh:
        events: list[dict[str, Any]] = json.load(fh)["traceEvents"]
    return events


def _kernel_ns_of_calls(events: list[dict[str, Any]], calls: list[dict[str, Any]]) -> int:
    """GPU ns of the kernels launched inside the given op calls, in plain Python: launch
    calls on the op's thread starting inside it -> correlation -> kernel durations. (Some
    traces write External id == correlation on kernels, so time containment is the safe link.)"""
    kernel_ns: dict[int, int] = defaultdict(int)
    for e in events:
        if e.get("cat") in ("kernel", "Kernel") and "correlation" in e.get("args", {}):
            kernel_ns[int(e["args"]["correlation"])] += round(float(e["dur"]) * 1000)
    total = 0
    for c in calls:
        t0, t1 = float(c["ts"]), float(c["ts"]) + float(c["dur"])
        for e in events:
            if (
                e.get("cat") in ("cuda_runtime", "cuda_driver", "Runtime")
                and str(e.get("tid")) == str(c.get("tid"))
                and e.get("pid") == c.get("pid")
                and t0 <= float(e["ts"]) < t1
                and "correlation" in e.get("args", {})
            ):
                total += kernel_ns.get(int(e["args"]["correlation"]), 0)
    return total


def _analysis(rel: str, peak_tflops: float | None = None) -> KernelAnalysis:
    opts = AnalysisOptions.of(top=10_000, peak_tflops=peak_tflops)
    return analyze_kernels(load_path(shared_trace(rel)), opts)


@dataclass(frozen=True)
class GemmCase:
    """Real ``inner`` calls with these dims; the rows ``outer`` (op, shapes) charged with them
    (the op itself or the ``aten::linear`` around it) must carry exactly their FLOPs/time."""

    rel: str
    inner: str
    dims: list[list[int]]
    outer: list[tuple[str, str]]
    flops_per_call: int
    peak: float | None
    peak_override: float | None = None


CASES = {
    # H100: aten::linear(x[1,141,512], w[512,512], b[512]) -> addmm(b, x[141,512], w^T): with bias
    "h100_bert_addmm_bias": GemmCase(
        "tracelens/bert_small_h100.json.gz",
        "aten::addmm",
        [[512], [141, 512], [512, 512], [], []],
        [("aten::linear", "[[1,141,512],[512,512],[512]]")],
        2 * 141 * 512 * 512,
        989.4,
    ),
    "h100_bert_vocab_projection": GemmCase(
        "tracelens/bert_small_h100.json.gz",
        "aten::addmm",
        [[30522], [141, 512], [512, 30522], [], []],
        [("aten::linear", "[[1,141,512],[30522,512],[30522]]")],
        2 * 141 * 512 * 30522,
        989.4,
    ),
    # H100 ViT MLP up-projection: batch 4 x 197 tokens = 788 rows, 768 -> 3072
    "h100_vit_mlp": GemmCase(
        "tracelens/vit_nsfw_h100.json.gz",
        "aten::addmm",
        [[3072], [788, 768], [768, 3072], [], []],
        [("aten::linear", "[[4,197,768],[3072,768],[3072]]")],
        2 * 788 * 768 * 3072,
        989.4,
    ),
    # job128 (HTA sample of an A100-generation fleet job; no deviceProperties -> user peak)
    "a100_era_batched_bmm": GemmCase(
        "hta/job128_sampled/rank-0.json.gz",
        "aten::bmm",
        [[2048, 160, 45], [2048, 45, 20]],
        [("aten::bmm", "[[2048,160,45],[2048,45,20]]")],
        2 * 2048 * 160 * 45 * 20,
        19.5,
        peak_override=19.5,
    ),
    "a100_era_addmm_bias": GemmCase(
        "hta/job128_sampled/rank-0.json.gz",
        "aten::addmm",
        [[3906], [2048, 512], [512, 3906], [], []],
        [
            ("aten::linear", "[[2048,512],[3906,512],[3906]]"),
            ("aten::addmm", "[[3906],[2048,512],[512,3906]]"),
        ],
        2 * 2048 * 512 * 3906,
        None,
    ),
}


@pytest.mark.parametrize("case", list(CASES.values()), ids=list(CASES))
def test_gemm_real_ops(case: GemmCase) -> None:
    events = _raw(case.rel)
    calls = [
        e
        for e in events
        if e.get("name") == case.inner and e.get("args", {}).get("Input Dims") == case.dims
    ]
    assert calls, f"{case.inner} {case.dims} not in {case.rel}"
    kernel_ns = _kernel_ns_of_calls(events, calls)
    result = _analysis(case.rel, peak_tflops=case.peak_override)
    rows = [r for r in result.ops if (r.op, r.shapes) in case.outer]
    assert len(rows) == len(case.outer)
    assert sum(r.count for r in rows) == len(calls)
    assert sum(r.flops for r in rows) == len(calls) * case.flops_per_call
    got_ns = sum(r.kernel_ns for r in rows)
    assert abs(got_ns - kernel_ns) <= sum(r.kernel_count for r in rows)  # µs->ns rounding
    for row in nonempty(rows):
        assert row.flops == row.count * case.flops_per_call
        assert row.tflops == pytest.approx(row.flops / row.kernel_ns / 1e3)
        if case.peak is not None:
            assert row.peak_tflops == pytest.approx(case.peak)
            assert row.mfu == pytest.approx(row.tflops / case.peak)  # type: ignore[operator]
    if len(rows) == 1:
        want = len(calls) * case.flops_per_call / kernel_ns / 1e3
        assert rows[0].tflops == pytest.approx(want, rel=1e-4)


def test_vit_conv_patch_embedding() -> None:
    a = _analysis("tracelens/vit_nsfw_h100.json.gz")
    rows = [r for r in a.ops if r.op == "aten::conv2d"]
    assert len(rows) == 1
    assert rows[0].flops == conv_plain((4, 3, 224, 224), 768, 16, s=16, p=0)


def test_resnet50_v100_conv_flops_plain_formula() -> None:
    """PyTorch 1.9 trace: no Concrete Inputs. Forward conv output comes from the backward node
    with the same Sequence number; every row must equal the textbook formula with ResNet's
    padding k//2 and a stride in {1, 2}, and the 7x7 stem is checked by hand."""
    rel = "kineto/resnet50_v100_workers0.pt.trace.json.gz"
    raw_calls = sum(1 for e in _raw(rel) if e.get("name") == "aten::conv2d")
    rows = [r for r in _analysis(rel).ops if r.op == "aten::conv2d"]
    assert len(rows) >= 15
    assert sum(r.count for r in rows) == raw_calls  # every forward conv got its FLOPs
    stem = [r for r in rows if r.shapes == "[[32,3,224,224],[64,3,7,7]]"]
    assert stem and stem[0].flops == stem[0].count * 2 * 32 * 64 * 112 * 112 * 3 * 7 * 7
    for r in nonempty(rows):
        (n, cin, h, w), (cout, cin_g, k, _) = json.loads(r.shapes)[:2]
        allowed = {
            r.count * conv_plain((n, cin, h, w), cout, k, s=s, p=k // 2, g=cin // cin_g)
            for s in (1, 2)
        }
        assert r.flops in allowed, r.shapes


def test_resnet50_v100_conv_backward_input() -> None:
    rel = "kineto/resnet50_v100_workers0.pt.trace.json.gz"
    rows = [r for r in _analysis(rel).ops if r.op == "aten::cudnn_convolution_backward_input"]
    assert rows
    for r in rows:
        (n, cout, ho, wo), (cout_w, cin_g, kh, kw) = json.loads(r.shapes)
        assert cout == cout_w
        assert r.flops == r.count * 2 * n * cout * ho * wo * cin_g * kh * kw
        assert r.peak_tflops == pytest.approx(15.7)  # Tesla V100-DGXS: fp32


def test_resnet50_v100_conv_weight_gradient() -> None:
    """1.9 ``cudnn_convolution_backward_weight`` records no weight shape; the FLOPs use the
    weight of its parent ``cudnn_convolution_backward`` (input, grad_output, weight). Rows
    group by (grad_output, input) shapes, which 1x1 and 3x3 convs can share, so the check
    sums the textbook FLOPs of the raw parent calls per shape key."""
    rel = "kineto/resnet50_v100_workers0.pt.trace.json.gz"
    events = _raw(rel)
    want: dict[str, int] = defaultdict(int)
    for e in nonempty(events):
        if e.get("name") == "aten::cudnn_convolution_backward":
            inp, grad, (cout, cin_g, kh, kw) = e["args"]["Input Dims"][:3]
            n, cout_g, ho, wo = grad
            assert cout == cout_g
            want[json.dumps([grad, inp], separators=(",", ""))] += (
                2 * n * cout * ho * wo * cin_g * kh * kw
            )
    raw_calls = sum(1 for e in events if e.get("name") == "aten::cudnn_convolution_backward_weight")
    rows = [r for r in _analysis(rel).ops if r.op == "aten::cudnn_convolution_backward_weight"]
    assert len(rows) >= 15
    assert sum(r.count for r in rows) == raw_calls
    assert {r.shapes: r.flops for r in rows} == dict(want)
