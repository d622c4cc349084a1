"""Issue 44, item 6: the diff's verdict leads with the largest change beyond noise (busy or
idle) and its outcome follows the step time, or without steps the device's wall time.

The built case is the cuBLAS -> CUTLASS shape: the same five GEMM ops, BEFORE with cuBLAS-named
kernels (78.6 ms busy, ~1.3 µs launch gaps, 5.3 µs idle), AFTER with CUTLASS-named kernels
(585.4 ms busy, ~1.25 µs gaps, 5.0 µs idle), written as Kineto and as nsys. Before the change
the verdict led with "launch_overhead idle −6.1% (4.9 → 4.6 µs)" and said ``mixed``. Then the
noise rule's other ends, on small constructed analysis documents: a part that moved alone (no
effect), parts that moved in opposite directions (mixed), a large change within noise that must
not lead, and nothing that moved (no change claimed).
"""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

import pytest

from tests.conftest import TOOLS, run_cli
from tests.test_diff_docs import device, doc, steps
from traceforensics.compare import diff_documents

sys.path.insert(0, str(TOOLS))
from synth import SynthTrace

MS = 1_000_000
CUBLAS = [
    ("ampere_bf16_s16816gemm_bf16_128x128_ldg8_f2f_stages_64x3_tn", 20_000_000),
    ("sm90_xmma_gemm_bf16bf16_bf16f32_f32_tn_n_tilesize128x128x64", 15_600_000),
    ("ampere_bf16_s16816gemm_bf16_256x128_ldg8_f2f_stages_64x3_nn", 18_000_000),
    ("sm90_xmma_gemm_bf16bf16_bf16f32_f32_nt_n_tilesize64x128x64", 12_000_000),
    ("ampere_bf16_s16816gemm_bf16_64x64_sliced1x2_ldg8_f2f_tn", 13_000_000),
]  # 78.6 ms
CUTLASS = [
    ("cutlass_80_tensorop_bf16_s16816gemm_relu_bf16_64x64_32x6_tn_align8", 150_000_000),
    ("cutlass_80_tensorop_bf16_s16816gemm_bf16_128x128_32x3_nn_align8", 115_000_000),
    ("cutlass_80_tensorop_bf16_s16816gemm_bf16_256x128_32x3_tn_align8", 135_000_000),
    ("cutlass_80_tensorop_bf16_s16816gemm_bf16_128x64_32x6_nt_align8", 90_000_000),
    ("cutlass_80_tensorop_bf16_s16816gemm_bf16_64x128_32x6_tn_align8", 95_400_000),
]  # 585.4 ms
GAP_BEFORE, GAP_AFTER = 1_325, 1_250  # 4 gaps: 5.3 µs and 5.0 µs of idle


def gemm_trace(kernels: list[tuple[str, int]], gap_ns: int, n_steps: int = 0) -> SynthTrace:
    """The five GEMM ops back to back on one stream: each launched ``gap_ns`` after the
    previous kernel ended (a ``cudaLaunchKernel`` inside an ``aten::mm``), so the GPU waits
    ``gap_ns`` for each launch. ``n_steps`` > 0: that many ``ProfilerStep#k`` annotations, each
    holding the five ops, 1 ms apart."""
    tr = SynthTrace()
    end = 100_000
    for k in range(max(n_steps, 1)):
        step_start = end
        for name, ns in kernels:
            host = end + 100
            tr.cpu_range("aten::mm", host, gap_ns)
            tr.launch(name, host + 50, gap_ns - 400, end + gap_ns, ns)
            end += gap_ns + ns
        if n_steps:
            tr.cpu_range(
                f"ProfilerStep#{k}", step_start, end - step_start + 2_000, kind="annotation"
            )
            end += MS
    return tr


def write(tr: SynthTrace, path: Path, fmt: str) -> str:
    if fmt == "kineto":
        return str(tr.write_kineto(path.with_suffix(".pt.trace.json.gz")))
    return str(tr.write_nsys(path.with_suffix(".sqlite")))


def cli_diff(
    before: str, after: str, capsys: pytest.CaptureFixture[str], *extra: str
) -> dict[str, Any]:
    code, out, err = run_cli(["diff", before, after, "--no-cache", "--json", *extra], capsys)
    assert code == 0, err
    return dict(json.loads(out))


@pytest.mark.parametrize("fmt", ["kineto", "nsys"])
def test_cublas_to_cutlass_leads_with_busy_time_and_is_worse(
    fmt: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    before = write(gemm_trace(CUBLAS, GAP_BEFORE), tmp_path / "cublas", fmt)
    after = write(gemm_trace(CUTLASS, GAP_AFTER), tmp_path / "cutlass", fmt)
    fwd = cli_diff(before, after, capsys)
    busy = fwd["job"]["figures"]["busy"]
    assert (busy["before"], busy["after"]) == (78_600_000, 585_400_000)
    v = fwd["verdict"]
    assert v["text"].startswith("busy time +645%, ×7.4 (78.60 → 585.40 ms)"), v["text"]
    assert v["outcome"] == "worse" and v["outcome_basis"] == "window"
    assert "the change made it worse" in v["text"]
    lead = v["leading_change"]
    assert lead["figure"] == "busy" and lead["delta"] == 506_800_000
    assert lead["ratio"] == pytest.approx(585.4 / 78.6, abs=1e-4)
    # the 0.3 µs shift of the launch gaps is below the clock's resolution: not a change
    assert v["changes_beyond_noise"] == ["busy"]
    rev = cli_diff(after, before, capsys)["verdict"]
    assert rev["outcome"] == "worked" and rev["text"].startswith("busy time −86.6%")
    assert rev["leading_change"]["figure"] == "busy"


def test_with_steps_the_step_time_decides(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """The same shape in 4 profiler steps a side: per-step busy time leads, step time decides."""
    before = write(gemm_trace(CUBLAS, GAP_BEFORE, 4), tmp_path / "cublas", "kineto")
    after = write(gemm_trace(CUTLASS, GAP_AFTER, 4), tmp_path / "cutlass", "kineto")
    v = cli_diff(before, after, capsys)["verdict"]
    assert v["outcome"] == "worse" and v["outcome_basis"] == "step_time"
    assert v["text"].startswith("busy time +645%, ×7.4 (78.60 → 585.40 ms/step)"), v["text"]
    assert "step time +6" in v["text"]
    assert cli_diff(after, before, capsys)["verdict"]["outcome"] == "worked"


@pytest.mark.parametrize("fmt", ["kineto", "nsys"])
def test_a_tiny_idle_shift_is_no_change(
    fmt: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Same kernels, launch gaps 1.325 -> 1.25 µs: nothing moved beyond noise, none claimed."""
    before = write(gemm_trace(CUBLAS, GAP_BEFORE), tmp_path / "a", fmt)
    after = write(gemm_trace(CUBLAS, GAP_AFTER), tmp_path / "b", fmt)
    v = cli_diff(before, after, capsys)["verdict"]
    assert v["outcome"] == "no_effect" and v["leading_change"] is None
    assert v["changes_beyond_noise"] == []
    assert v["text"].startswith("no busy or idle time changed beyond noise"), v["text"]
    assert "no measurable effect" in v["text"] and "although" not in v["text"]


def one_device(durs: list[int], data: list[int]) -> dict[str, Any]:
    """One device, ``durs`` steps (ms) of which ``data`` ms are data-loading idle, the rest
    busy."""
    d, dl = [v * MS for v in durs], [v * MS for v in data]
    dev = device(idle_by_cause={"data_loading": sum(dl)}, window_ns=sum(d))
    return doc([dev], steps(0, 0, d, dl))


def test_one_part_moving_alone_is_no_effect_not_mixed() -> None:
    """data_loading falls 5 ms a step beyond noise, busy is unchanged, the step's 5 ms shift is
    within its ±10 ms spread: no effect on the step (the old rule said mixed)."""
    before = one_device([100, 110, 90, 105, 95, 100], [20] * 6)
    after = one_device([95, 105, 85, 100, 90, 95], [15] * 6)
    v = diff_documents(before, after).verdict
    assert v.outcome == "no_effect" and [d.figure for d in v.moved] == ["idle.data_loading"]
    assert v.text.startswith("data_loading idle −25.0% (20.00 → 15.00 ms/step)")
    assert "no measurable effect on the step time although data_loading idle fell" in v.text


def test_parts_in_opposite_directions_are_mixed() -> None:
    """The step stays 100 ms; 10 ms of data-loading idle became busy time."""
    before = one_device([100] * 6, [30] * 6)
    after = one_device([100] * 6, [20] * 6)
    v = diff_documents(before, after).verdict
    assert v.outcome == "mixed" and v.basis == "step_time"
    assert {d.figure for d in v.moved} == {"busy", "idle.data_loading"}
    assert "busy time rose while data_loading idle fell" in v.text


def test_a_larger_change_within_noise_does_not_lead() -> None:
    """Busy time rises 11.7 ms a step on average but its median shift (15 ms) is within the
    noise of its ±30 ms spread; data_loading's steady 5 ms fall leads."""
    before = one_device([100] * 6, [10] * 6)
    busy_after = [80, 140, 60, 120, 100, 110]
    after = one_device([b + 5 for b in busy_after], [5] * 6)
    d = diff_documents(before, after)
    busy = d.job.figures["busy"]
    assert busy.delta is not None and busy.delta > 5 * MS and busy.within_noise is True
    assert d.verdict.leading is not None and d.verdict.leading.figure == "idle.data_loading"
    assert d.verdict.outcome == "no_effect"


def test_without_steps_the_wall_time_decides() -> None:
    """No steps: busy 700 -> 300 ms, idle 300 -> 100 ms, window 1000 -> 400 ms: worked, busy
    leads (the larger change)."""
    before = doc([device(idle_by_cause={"host_sync": 300 * MS})], [])
    after = doc([device(idle_by_cause={"host_sync": 100 * MS}, window_ns=400 * MS)], [])
    v = diff_documents(before, after).verdict
    assert v.outcome == "worked" and v.basis == "window"
    assert v.leading is not None and v.leading.figure == "busy"
    assert v.text.startswith("busy time −57.1% (700.00 → 300.00 ms), wall time −60.0%")


def test_empty_sides_claim_nothing() -> None:
    """No devices (or empty windows) on either side: no lead, no basis, no effect."""
    empty = doc([], [])
    v = diff_documents(empty, empty).to_json()["verdict"]
    assert (v["outcome"], v["outcome_basis"], v["leading_change"]) == ("no_effect", None, None)
    assert v["text"] == "no busy or idle time changed beyond noise: no measurable effect."
