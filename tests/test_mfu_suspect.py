"""Suspect figures are flagged, not hidden (issue 11, item 7): a row whose MFU is above the
peak, whose bandwidth share is above the memory bandwidth, or whose peak was guessed for a
device the trace does not name carries ``suspect`` and ``suspect_reason``; its figures stay as
computed, and the terminal and Markdown reports mark them with ``!``."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

import traceforensics
from tests.conftest import nonempty, run_cli, shared_trace
from traceforensics.analysis.kernels.results import FamilyRow, KernelAnalysis, MfuRow, OpRow
from traceforensics.analysis.kernels.suspect import MEMBW_REASON, suspect_reason
from traceforensics.report.kernels_text import kernel_report_lines
from traceforensics.report.markdown import render_markdown

CONV_REASON = (
    "above 100% of peak: cuDNN's Winograd/FFT algorithms do fewer multiplications than the "
    "direct formula counted"
)
H100_BF16_TFLOPS = 989.4  # dense, NVIDIA H100 SXM5 whitepaper (the gpu_peaks.csv row)
H100_PROPS = {
    "id": 0,
    "name": "NVIDIA H100 80GB HBM3",
    "numSms": 132,
    "computeMajor": 9,
    "computeMinor": 0,
    "totalGlobalMem": 80 * 2**30,
}
M = K = N = 4096


def _kernels(path: Path) -> KernelAnalysis:
    return traceforensics.analyze(traceforensics.load(path, use_cache=False)).kernels


def _rows(k: KernelAnalysis) -> list[OpRow | FamilyRow | MfuRow]:
    return [*k.ops, *k.families, *k.mfu_by_device, *k.mfu_by_step]


# -- the rule --------------------------------------------------------------------------------


def test_rule_order_and_wording() -> None:
    # above the peak comes first, worded for the family, even on a guessed peak
    assert suspect_reason(1.6, 0.03, "conv", "same_node") == CONV_REASON
    gemm = suspect_reason(1.2, None, "gemm", "name", "fp32")
    assert gemm == "above 100% of peak: the fp32 peak may be the wrong one (TF32/FP8 math?)"
    assert "causal" in (suspect_reason(1.1, None, "attention", "name", "bf16") or "")
    assert "Winograd" in (suspect_reason(1.01, None, None, "name") or "")  # a mixed window
    assert suspect_reason(0.4, 1.3, "elementwise", "name") == MEMBW_REASON
    assert suspect_reason(0.4, 0.2, "gemm", "sm_count+cc") == (
        "peak assumed for an unnamed device (sm_count+cc)"
    )
    assert suspect_reason(0.4, None, None, "same_node") == (
        "peak assumed for an unnamed device (same_node)"
    )


@pytest.mark.parametrize("how", ["name", "override", "unknown"])
def test_low_or_exactly_peak_figures_are_not_suspect(how: str) -> None:
    for mfu in (0.0, 0.001, 0.5, 1.0):
        assert suspect_reason(mfu, 1.0, "gemm", how, "bf16") is None
    # no share of a guessed peak to judge: nothing to flag
    assert suspect_reason(None, None, "gemm", "sm_count+cc") is None


# -- real traces -----------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("rel", "above_peak"),
    [
        # no shapes recorded: no op rows, nothing above the peak
        ("hta/resnet_v100_ns_resolution.json.gz", False),
        # fp32 3x3 convs of ResNet-50 at 116-170 % of the V100's FP32 peak (Winograd)
        ("kineto/resnet50_v100_workers0.pt.trace.json.gz", True),
    ],
)
def test_resnet_v100_convs_above_peak_are_flagged(rel: str, above_peak: bool) -> None:
    k = _kernels(shared_trace(rel))
    assert {p["how"] for p in k.peaks} == {"name"}  # both traces name their V100s
    above = [o for o in k.ops if o.mfu is not None and o.mfu > 1.0]
    if above_peak:
        nonempty(above)
    else:
        assert above == []
    for o in above:
        assert o.family == "conv"
        assert o.suspect and o.suspect_reason == CONV_REASON
        # flagged, not clamped: the figure is still FLOPs / time / peak
        assert o.peak_tflops is not None
        assert o.mfu == pytest.approx(o.flops / o.kernel_ns / 1e3 / o.peak_tflops)
    for r in _rows(k):
        if (r.mfu is None or r.mfu <= 1.0) and (getattr(r, "membw_share", None) or 0) <= 1.0:
            assert not r.suspect and r.suspect_reason is None, r
    text = "\n".join(kernel_report_lines(k, top=len(k.ops)))
    assert (f"  ! {CONV_REASON}" in text) == above_peak
    assert text.count(CONV_REASON) == (1 if above_peak else 0)  # the reason once, not per row


# -- generated traces ------------------------------------------------------------------------


def _mm_trace(
    path: Path, mfu: float, props: list[dict[str, object]] | None, device: int = 0
) -> Path:
    """Four aten::mm [4096x4096]x[4096x4096] bf16, each kernel lasting what ``mfu`` of the
    H100 dense bf16 peak needs, back to back on one stream (so the device MFU is ``mfu`` too)."""
    dur_us = 2 * M * K * N / (H100_BF16_TFLOPS * 1e6 * mfu)
    events: list[dict[str, object]] = []
    for i in range(1, 5):
        ts = 10.0 + (i - 1) * (dur_us + 5.0)
        launch = {"correlation": i, "External id": i}
        args = {
            "External id": i,
            "Input Dims": [[M, K], [K, N]],
            "Input type": ["c10::BFloat16", "c10::BFloat16"],
        }
        events += [
            {"ph": "X", "cat": "cpu_op", "name": "aten::mm", "pid": 1, "tid": 1, "ts": ts,
             "dur": 4.0, "args": args},
            {"ph": "X", "cat": "cuda_runtime", "name": "cudaLaunchKernel", "pid": 1, "tid": 1,
             "ts": ts + 1, "dur": 2.0, "args": launch},
            {"ph": "X", "cat": "kernel", "pid": device, "tid": 7, "ts": ts + 5, "dur": dur_us,
             "name": "sm90_xmma_gemm_bf16bf16_bf16f32_f32_tn_n_tilesize128x128x64",
             "args": {**launch, "device": device, "stream": 7}},
        ]  # fmt: skip
    doc: dict[str, object] = {"traceEvents": events}
    if props is not None:
        doc["deviceProperties"] = props
    path.write_text(json.dumps(doc))
    return path


def test_mm_faster_than_the_bf16_peak_is_flagged(tmp_path: Path) -> None:
    k = _kernels(_mm_trace(tmp_path / "fast.json", 1.5, [H100_PROPS]))
    (op,) = k.ops
    assert op.peak_tflops == H100_BF16_TFLOPS and op.mfu == pytest.approx(1.5, rel=1e-3)
    assert op.suspect
    assert op.suspect_reason == (
        "above 100% of peak: the bf16 peak may be the wrong one (TF32/FP8 math?)"
    )
    (fam,) = k.families
    assert fam.suspect and fam.mfu == pytest.approx(1.5, rel=1e-3)
    (dev,) = k.mfu_by_device
    assert dev.suspect and (dev.mfu or 0) > 1.0  # unclamped
    assert "above 100% of peak" in (dev.suspect_reason or "")
    lines = kernel_report_lines(k)
    assert any("150.0%!" in line and "aten::mm" in line for line in lines)
    assert sum(line.startswith(f"  ! {op.suspect_reason}") for line in lines) == 1


@pytest.mark.parametrize(
    ("props", "device", "how"),
    [
        # the properties say 132 SMs, cc 9.0, 80 GB but give no name
        ([{k: v for k, v in H100_PROPS.items() if k != "name"}], 0, "sm_count+cc"),
        # the kernels run on a device the properties do not list; device 0 is an H100
        ([H100_PROPS], 1, "same_node"),
    ],
)
def test_peak_of_an_unnamed_device_is_flagged(
    tmp_path: Path, props: list[dict[str, object]], device: int, how: str
) -> None:
    path = _mm_trace(tmp_path / "unnamed.json", 0.6, props, device)
    analysis = traceforensics.analyze(traceforensics.load(path, use_cache=False))
    k = analysis.kernels
    (op,) = k.ops
    assert op.device == device and op.mfu == pytest.approx(0.6, rel=1e-3)
    reason = f"peak assumed for an unnamed device ({how})"
    for r in nonempty(_rows(k)):
        assert r.suspect and r.suspect_reason == reason, r
    # a shortfall measured against a guessed peak is no finding
    assert not [f for f in analysis.findings if f.category == "kernel_efficiency"]


def test_no_device_properties_means_no_peak_and_nothing_to_flag(tmp_path: Path) -> None:
    k = _kernels(_mm_trace(tmp_path / "bare.json", 0.6, None))
    (op,) = k.ops
    assert op.tflops is not None and op.mfu is None  # no peak is guessed for an unknown GPU
    assert not any(r.suspect for r in _rows(k))


def test_plausible_mfu_on_a_named_h100_is_not_flagged(tmp_path: Path) -> None:
    path = _mm_trace(tmp_path / "ok.json", 0.6, [H100_PROPS])
    analysis = traceforensics.analyze(traceforensics.load(path, use_cache=False))
    (op,) = analysis.kernels.ops
    assert op.mfu == pytest.approx(0.6, rel=1e-3)
    for r in _rows(analysis.kernels):
        assert not r.suspect and r.suspect_reason is None, r
    assert not any("!" in line for line in kernel_report_lines(analysis.kernels))
    assert "`!`" not in render_markdown(analysis)


def test_markdown_marks_the_suspect_mfu(tmp_path: Path) -> None:
    path = _mm_trace(tmp_path / "fast.json", 1.5, [H100_PROPS])
    md = render_markdown(traceforensics.analyze(traceforensics.load(path, use_cache=False)))
    table = md.split("## Model FLOPs utilization", 1)[1]
    row = next(line for line in table.splitlines() if line.startswith("| 0:0 |"))
    assert row.rstrip(" |").endswith("%!")
    assert "\n\n- `!` above 100% of peak: " in table  # its own paragraph, not a table row


# -- JSON ------------------------------------------------------------------------------------


def test_json_carries_the_fields(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path = _mm_trace(tmp_path / "fast.json", 1.5, [H100_PROPS])
    code, out, err = run_cli(["analyze", "--json", "--no-cache", str(path)], capsys)
    assert code == 0, err
    doc = json.loads(out)
    entries = [*doc["ops"], *doc["op_families"], *doc["mfu"]["devices"], *doc["mfu"]["steps"]]
    for e in nonempty(entries):
        assert isinstance(e["suspect"], bool)
        assert e["suspect"] == (e["suspect_reason"] is not None)
    (op,) = doc["ops"]
    assert op["suspect"] is True and op["mfu"] > 1.0
    assert op["suspect_reason"].startswith("above 100% of peak: the bf16 peak")
    assert doc["mfu"]["devices"][0]["suspect"] is True
