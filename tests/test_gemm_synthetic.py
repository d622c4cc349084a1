"""Synthetic GEMMs of known shape and duration (tools/make_gemm_traces.py) reproduce the
expected TFLOPS exactly, in Kineto and nsys formats."""

from __future__ import annotations

from pathlib import Path

import pytest

import make_gemm_traces as mg
from traceforensics.analysis.kernels.forensics import analyze_kernels
from traceforensics.analysis.options import AnalysisOptions
from traceforensics.ingest import load_path

PEAK = 800.0


@pytest.fixture(params=["kineto", "nsys"])
def gemm_trace(request: pytest.FixtureRequest, tmp_path: Path) -> tuple[str, Path]:
    tr = mg.build()
    fmt = str(request.param)
    path = (
        tr.write_kineto(tmp_path / "g.pt.trace.json.gz")
        if fmt == "kineto"
        else tr.write_nsys(tmp_path / "g.sqlite")
    )
    return fmt, path


def test_tflops_exact(gemm_trace: tuple[str, Path]) -> None:
    fmt, path = gemm_trace
    result = analyze_kernels(load_path(path), AnalysisOptions.of(peak_tflops=PEAK))
    rows = {r.op: r for r in result.ops}
    assert set(rows) == {g.op for g in mg.GEMMS}  # nested aten::addmm under linear not repeated
    for g in mg.GEMMS:
        r = rows[g.op]
        assert r.flops == g.flops
        assert r.kernel_ns == g.kernel_ns
        assert r.kernel_count == len(g.kernels)
        assert r.tflops == g.tflops()  # exact: same integers, same division
        assert r.mfu == g.tflops() / PEAK
        if fmt == "kineto":  # nsys NVTX ranges carry shapes but no dtypes
            assert r.dtype == {"c10::BFloat16": "bf16", "c10::Half": "fp16"}[g.types[0]]


def test_mfu_window_and_step(gemm_trace: tuple[str, Path]) -> None:
    _, path = gemm_trace
    result = analyze_kernels(load_path(path), AnalysisOptions.of(peak_tflops=PEAK))
    tr = mg.build()
    total = sum(g.flops for g in mg.GEMMS)
    window = mg.window_ns(tr)
    (dev,) = result.mfu_by_device
    assert dev.window_ns == window
    assert dev.flops == total
    assert dev.mfu == pytest.approx(total / (PEAK * 1e3) / window, rel=1e-12)
    assert dev.kernel_ns == dev.flops_known_kernel_ns == sum(g.kernel_ns for g in mg.GEMMS)
    (step,) = result.mfu_by_step
    # the step's window is its row of the step table (steps[]): the one step's GPU work, tiled
    assert step.step == 1 and step.window_ns == window
    assert step.mfu == pytest.approx(total / (PEAK * 1e3) / window, rel=1e-12)
    assert result.unknown_flops_kernels.count == 0


def test_kineto_uses_datasheet_peak_per_dtype(tmp_path: Path) -> None:
    path = mg.build().write_kineto(tmp_path / "g.pt.trace.json.gz")
    result = analyze_kernels(load_path(path))
    rows = {r.op: r for r in result.ops}
    assert rows["aten::mm"].peak_tflops == pytest.approx(989.4)  # H100 SXM dense BF16
    assert rows["aten::bmm"].peak_tflops == pytest.approx(989.4)  # FP16 same rate
    mm = mg.GEMMS[0]
    assert rows["aten::mm"].mfu == pytest.approx(mm.tflops() / 989.4)
    # 4096^3 GEMM: intensity 2*4096^3 / (3 * 4096^2 * 2 bytes) = 1365 FLOP/B > ridge 295
    assert rows["aten::mm"].bound == "compute"
    assert rows["aten::mm"].arithmetic_intensity == pytest.approx(4096 / 3)


@pytest.mark.parametrize(("gemm_ns", "want"), [(200_000, "tf32"), (10_000_000, "fp32")])
def test_fp32_gemm_measured_against_tf32_only_when_proven(
    tmp_path: Path, gemm_ns: int, want: str
) -> None:
    """A float GEMM faster than the FP32 peak (67 TFLOPS on H100 SXM) can only have run on TF32
    tensor cores, so it is measured against the TF32 peak; a slower one stays on FP32."""
    flops = 2 * 4096**3
    g = mg.Gemm(
        "aten::mm", [[4096, 4096], [4096, 4096]], ["float", "float"], [("sgemm", gemm_ns)], flops
    )
    path = mg.build([g]).write_kineto(tmp_path / "f.pt.trace.json.gz")
    (row,) = analyze_kernels(load_path(path)).ops
    assert row.dtype == "fp32" and row.peak_dtype == want
    assert row.peak_tflops == pytest.approx({"tf32": 494.7, "fp32": 67.0}[want])
    assert row.mfu == pytest.approx(flops / gemm_ns / 1e3 / row.peak_tflops)  # type: ignore[operator]
