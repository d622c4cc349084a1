"""Issue 44 acceptance on the shared traces: host-bound eager traces get the dispatch remedy as
their first change; the 2.7B nsys export's steady-state first change is TF32/bf16 for its fp32
GEMMs; a V100 trace is never told bf16/TF32."""

from __future__ import annotations

import pytest

from tests.conftest import shared_trace
from traceforensics import analyze, load

EAGER = [
    "tracelens/eager_b200.json.gz",
    "tracelens/bert_small_h100.json.gz",
    "tracelens/vit_nsfw_h100.json.gz",
    "hta/ddp_nccl_a100_rank0.json.gz",
]


@pytest.mark.parametrize("rel", EAGER)
def test_eager_host_bound_first_change_is_the_dispatch_remedy(rel: str) -> None:
    result = analyze(load(shared_trace(rel), use_cache=False))
    first = result.findings[0]
    assert first.category == "cpu_compute", [(f.category, f.title) for f in result.findings]
    assert first.figures.get("dispatch_bound") is True and "dispatch-bound" in first.title
    assert "move it off" not in first.remedy
    assert "CUDA graph" in first.remedy and "torch.compile" in first.remedy


def test_2_7b_export_fp32_gemms_are_the_steady_state_first_change() -> None:
    rel = "nsys/zx3xyy__assignment2-systems__result_2_7B_nvtx.sqlite"
    result = analyze(load(shared_trace(rel), use_cache=False))
    steady = [f for f in result.findings if f.category != "one_off"]
    first = steady[0]
    assert first.category == "fp32_matmul", [(f.category, f.title) for f in result.findings]
    assert "ampere_sgemm_128x64_tn" in [e.name for e in first.evidence]
    assert first.figures["share_of_busy"] > 0.4
    assert "set_float32_matmul_precision" in first.remedy and "bfloat16" in first.remedy


@pytest.mark.parametrize(
    "rel",
    ["kineto/resnet50_v100_workers4.pt.trace.json.gz", "hta/resnet_v100_ns_resolution.json.gz"],
)
def test_v100_traces_get_fp16_amp(rel: str) -> None:
    result = analyze(load(shared_trace(rel), use_cache=False))
    fp32 = next(f for f in result.findings if f.category == "fp32_matmul")
    assert "float16" in fp32.remedy and "GradScaler" in fp32.remedy
    for f in result.findings:
        assert "bfloat16" not in f.remedy and "allow_tf32" not in f.remedy, f.remedy


def test_multiprocess_loader_trace_is_not_told_num_workers() -> None:
    rel = "kineto/resnet50_v100_workers4.pt.trace.json.gz"
    result = analyze(load(shared_trace(rel), use_cache=False))
    for f in result.findings:
        assert "num_workers>0" not in f.remedy, f.remedy
