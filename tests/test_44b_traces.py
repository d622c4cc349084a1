"""Issue 44 (items 2, 3, 9 and the eager/zero_grad bullets): built traces whose remedies must
follow from what the trace shows - in both formats where the format matters."""

from __future__ import annotations

import sys
from collections.abc import Callable
from pathlib import Path

import pytest

from tests.conftest import ROOT
from traceforensics import analyze, load
from traceforensics.analysis.findings.results import Finding

sys.path.insert(0, str(ROOT / "tools"))
from synth import SynthTrace

A100 = {"device_name": "NVIDIA A100-SXM4-80GB", "sm_count": 108, "compute_capability": (8, 0)}
V100 = {"device_name": "Tesla V100-SXM2-32GB", "sm_count": 80, "compute_capability": (7, 0)}
TF32_CONV = "sm80_xmma_fprop_implicit_gemm_tf32f32_tf32f32_f32_nhwckrsc_nchw_tilesize128x128x16"
TF32_GEMM = "sm80_xmma_gemm_f32f32_tf32f32_f32_tn_n_tilesize128x128x16_stage4"
TO_NHWC = (
    "void cudnn::ops::nchwToNhwcKernel<float, float, float, false, true, (cudnnKernelDataType_t)2>"
)
TO_NCHW = (
    "void cudnn::ops::nhwcToNchwKernel<float, float, float, true, false, (cudnnKernelDataType_t)0>"
)
MULTI_LOADER = "enumerate(DataLoader)#_MultiProcessingDataLoaderIter.__next__"


def _analyze(tr: SynthTrace, tmp_path: Path, fmt: str = "json") -> list[Finding]:
    path = tmp_path / f"t.{fmt}"
    (tr.write_kineto if fmt == "json" else tr.write_nsys)(path)
    return analyze(load(path, use_cache=False)).findings


def _steps(tr: SynthTrace, n: int, body: Callable[[SynthTrace, int], int], t0: int = 0) -> None:
    """``n`` ProfilerStep ranges; ``body(tr, start)`` fills one and returns its end."""
    t = t0 + 10_000
    for i in range(n):
        end = body(tr, t)
        tr.cpu_range(f"ProfilerStep#{i + 1}", t, end - t, kind="annotation")
        t = end + 1_000


def _gemm_step(kernel: str, n: int = 8, dur: int = 400_000) -> Callable[[SynthTrace, int], int]:
    """A step of ``n`` GEMMs of ``dur`` ns each under aten::mm, queued back to back."""

    def body(tr: SynthTrace, t: int) -> int:
        gpu = t + 20_000
        for _ in range(n):
            tr.cpu_range("aten::mm", t, 12_000)
            tr.launch(kernel, t + 2_000, 8_000, max(gpu, t + 10_000), dur)
            gpu = max(gpu, t + 10_000) + dur + 1_000
            t += 14_000
        return gpu

    return body


# ---------------------------------------------------------------- item 2 + preconditions
def test_tf32_convs_with_layout_conversions(tmp_path: Path) -> None:
    """VGG-like: every conv and GEMM kernel already TF32, cuDNN layout conversions around each
    conv. A channels_last finding, and no TF32/bf16 advice anywhere (the roofline finding of
    the slow GEMM says the kernels are already TF32)."""
    tr = SynthTrace(**A100)  # type: ignore[arg-type]

    def body(tr: SynthTrace, t: int) -> int:
        gpu = t + 20_000
        for _ in range(6):
            tr.cpu_range("aten::cudnn_convolution", t, 30_000)
            for name, dur in ((TO_NHWC, 60_000), (TF32_CONV, 400_000), (TO_NCHW, 60_000)):
                tr.launch(name, t + 2_000, 6_000, gpu, dur)
                gpu += dur + 500
            t += 32_000
        return gpu

    def with_gemm(tr: SynthTrace, t: int) -> int:
        # plus one slow TF32 GEMM with shapes: a roofline (kernel_efficiency) finding
        end = body(tr, t)
        dims = {"Input Dims": [[2048, 2048], [2048, 2048]], "Input type": ["float", "float"]}
        tr.cpu_range("aten::mm", end, 20_000, args=dims)
        tr.launch(TF32_GEMM, end + 2_000, 8_000, end + 10_000, 5_000_000)  # 3.4 TFLOPS
        return end + 5_011_000

    _steps(tr, 4, with_gemm)
    found = _analyze(tr, tmp_path)
    eff = [f for f in found if f.category == "kernel_efficiency"]
    assert eff and "already run on tensor cores (tf32)" in eff[0].title, found
    layout = [f for f in found if f.category == "layout_conversion"]
    assert layout, [(f.category, f.title) for f in found]
    assert "channels_last" in layout[0].remedy and "NCHW<->NHWC" in layout[0].title
    # 6 x 120 us of conversions in 6 x 520 us + 5 ms of kernels per step
    assert layout[0].figures["kernel_ns"] == 4 * 6 * 120_000
    assert layout[0].recoverable_ns == int(4 * 6 * 120_000 * 0.9)
    for f in found:
        low = f.remedy.lower()
        assert "tf32" not in low and "bf16" not in low and "bfloat16" not in low, f.remedy
    assert not [f for f in found if f.category == "fp32_matmul"]


@pytest.mark.parametrize("fmt", ["json", "sqlite"])
def test_fp32_sgemm_without_shapes_is_a_finding(tmp_path: Path, fmt: str) -> None:
    """nsys-style: fp32 ``ampere_sgemm`` kernels, no shapes recorded, on an A100: the name alone
    says the tensor cores are idle - the first change is TF32/bf16."""
    tr = SynthTrace(**A100)  # type: ignore[arg-type]
    _steps(tr, 4, _gemm_step("ampere_sgemm_128x64_tn"))
    found = _analyze(tr, tmp_path, fmt)
    first = found[0]
    assert first.category == "fp32_matmul", [(f.category, f.recoverable_ns) for f in found]
    assert "set_float32_matmul_precision" in first.remedy and "bfloat16" in first.remedy
    assert "ampere_sgemm_128x64_tn" in [e.name for e in first.evidence]
    assert first.figures["share_of_busy"] > 0.9
    # half the fp32 GEMM time at the documented 2x speed-up
    assert first.recoverable_ns == first.figures["kernel_ns"] // 2


def test_v100_gets_fp16_amp_not_bf16(tmp_path: Path) -> None:
    """Volta: no bf16, no TF32: fp16 autocast with a GradScaler, and channels_last."""
    tr = SynthTrace(**V100)  # type: ignore[arg-type]
    _steps(tr, 4, _gemm_step("volta_sgemm_128x64_nn"))
    found = _analyze(tr, tmp_path)
    first = found[0]
    assert first.category == "fp32_matmul"
    assert "float16" in first.remedy and "GradScaler" in first.remedy
    assert "no bf16/TF32" in first.title
    for f in found:
        low = f.remedy.lower()
        assert "bf16" not in low.replace("no bf16", "") and "bfloat16" not in low, f.remedy
        assert "tf32" not in low.replace("bf16/tf32", ""), f.remedy


def test_multiprocess_loader_gets_more_workers(tmp_path: Path) -> None:
    """The loader already runs worker processes: not "num_workers>0" but more workers,
    prefetch and cheaper transforms."""
    tr = SynthTrace(**A100)  # type: ignore[arg-type]

    def body(tr: SynthTrace, t: int) -> int:
        tr.cpu_range(MULTI_LOADER, t, 3_000_000, kind="annotation")
        return _gemm_step("sm80_xmma_gemm_bf16bf16_bf16f32_f32_tn_n", 4, 200_000)(tr, t + 3_000_000)

    _steps(tr, 4, body)
    found = _analyze(tr, tmp_path)
    first = found[0]
    assert first.category == "data_loading", [(f.category, f.recoverable_ns) for f in found]
    assert "num_workers>0" not in first.remedy
    assert "num_workers" in first.remedy and "prefetch_factor" in first.remedy
    assert "_MultiProcessingDataLoaderIter" in first.title
    assert first.figures["precondition"] == "loader_workers"


def test_graph_replay_gets_fewer_larger_kernels(tmp_path: Path) -> None:
    """A step replayed with cudaGraphLaunch: many tiny graph kernels with gaps between them.
    The first change is not CUDA graphs (already there) but fewer, larger kernels."""
    tr = SynthTrace(**A100)  # type: ignore[arg-type]

    def body(tr: SynthTrace, t: int) -> int:
        tr.cpu_range("aten::_graph_replay", t, 40_000)
        start = t + 30_000
        nodes = [(f"triton_poi_fused_add_{i % 3}", start + i * 9_000, 3_000) for i in range(60)]
        tr.graph_launch(t + 5_000, 20_000, nodes)
        return start + 60 * 9_000

    _steps(tr, 4, body)
    found = _analyze(tr, tmp_path)
    first = found[0]
    assert "CUDA graph" not in first.remedy and "graphs" not in first.remedy, first.remedy
    assert "fewer, larger kernels" in first.remedy
    assert "already replayed as a graph" in first.title


# ---------------------------------------------------------------- eager dispatch
def test_python_dispatch_bound_eager_steps(tmp_path: Path) -> None:
    """Eager steps: Python forward() frames and ATen ops dispatching many 5 us kernels; the
    launching thread spends most of each gap in Python, not in the op or its launch. The
    cpu_compute finding says it is dispatch-bound and gives the launch remedy."""
    tr = SynthTrace(**A100)  # type: ignore[arg-type]

    def body(tr: SynthTrace, t: int) -> int:
        tr.cpu_range("nn.Module: Block_0", t, 40 * 60_000, kind="python")
        tr.cpu_range("model.py(12): forward", t + 100, 40 * 60_000 - 200, kind="python")
        for i in range(40):
            op = t + 1_000 + i * 60_000 + 45_000  # 45 us of Python before each op
            tr.cpu_range("aten::add", op, 10_000)
            tr.launch(
                "void at::native::vectorized_elementwise_kernel<4>", op + 3_000, 4_000,
                op + 7_500, 5_000,
            )  # fmt: skip
        return t + 40 * 60_000 + 10_000

    _steps(tr, 4, body)
    found = _analyze(tr, tmp_path)
    first = found[0]
    assert first.category == "cpu_compute", [(f.category, f.recoverable_ns) for f in found]
    assert "dispatch-bound" in first.title and first.figures["dispatch_bound"] is True
    assert "CUDA graphs" in first.remedy and "torch.compile" in first.remedy
    assert "move it off" not in first.remedy


def test_long_host_work_is_not_dispatch(tmp_path: Path) -> None:
    """One 80 ms piece of host work inside a conv op (cuDNN autotuning) between long kernels is
    plain CPU work: the cpu_compute remedy stays."""
    tr = SynthTrace(**A100)  # type: ignore[arg-type]

    def body(tr: SynthTrace, t: int) -> int:
        tr.cpu_range("aten::cudnn_convolution", t, 80_100_000)
        tr.launch(TF32_CONV, t + 80_000_000, 8_000, t + 80_010_000, 5_000_000)
        return t + 85_020_000

    _steps(tr, 3, body)
    found = _analyze(tr, tmp_path)
    cpu = next(f for f in found if f.category == "cpu_compute")
    assert "dispatch-bound" not in cpu.title and "dispatch_bound" not in cpu.figures


# ---------------------------------------------------------------- zero_grad
ZERO = "void at::native::vectorized_elementwise_kernel<4, at::native::FillFunctor<float> >"


def _zero_grad_trace(fills: int) -> SynthTrace:
    tr = SynthTrace(**A100)  # type: ignore[arg-type]

    def body(tr: SynthTrace, t: int) -> int:
        end = _gemm_step("sm80_xmma_gemm_bf16bf16_bf16f32_f32_tn_n", 4, 300_000)(tr, t)
        z = end + 5_000
        tr.cpu_range("Optimizer.zero_grad#SGD.zero_grad", z, 20_000 + fills * 15_000,
                     kind="annotation")  # fmt: skip
        for i in range(fills):
            at = z + 10_000 + i * 15_000
            tr.cpu_range("aten::zero_", at, 12_000)
            tr.launch(ZERO, at + 6_000, 5_000, at + 11_500, 2_000)
        return z + 25_000 + fills * 15_000

    _steps(tr, 4, body)
    return tr


def test_zero_grad_fill_kernels_are_a_finding(tmp_path: Path) -> None:
    found = _analyze(_zero_grad_trace(fills=60), tmp_path)
    zero = [f for f in found if f.category == "zero_grad"]
    assert zero, [(f.category, f.title) for f in found]
    f = zero[0]
    assert "set_to_none=True" in f.remedy
    assert f.figures["fill_count"] == 4 * 60 and f.figures["fill_ns"] == 4 * 60 * 2_000
    # the GPU idles through most of each range while the host launches the fills
    assert f.figures["idle_ns"] > 4 * 60 * 10_000
    assert f.recoverable_ns == f.figures["fill_ns"] + f.figures["idle_ns"]


def test_zero_grad_with_set_to_none_is_no_finding(tmp_path: Path) -> None:
    found = _analyze(_zero_grad_trace(fills=0), tmp_path)
    assert not [f for f in found if f.category == "zero_grad"]
