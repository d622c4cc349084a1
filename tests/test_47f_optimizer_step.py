"""Issue 47 item 1: the ``optimizer_step`` finding — the optimizer's share of the window, with
a remedy that fits what the trace shows (one launch per parameter, or already multi-tensor)."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

import traceforensics as tf
from tests.conftest import plain_union, shared_trace
from traceforensics.analysis import analyze
from traceforensics.analysis.findings.optimizer_step import OPTIMIZER_SHARE
from traceforensics.analysis.findings.remedies import OPTIMIZER_FUSED_REMEDY
from traceforensics.analysis.findings.results import OPTIMIZER_STEP

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "tools"))

from synth import SynthTrace  # noqa: E402
from synth_scenarios import HostCursor  # noqa: E402

FUSED = "void at::native::multi_tensor_apply_kernel<FusedAdamMathFunctor<float, 4>>"


def _loop(
    tmp: Path, fmt: str, *, params: int, fused: bool, optimizer: bool = True, steps: int = 4
) -> Path:
    """Steps of a small forward/backward, then an optimizer: ``params`` tiny kernels launched
    one by one (the host's launch cost between them leaves the GPU idle), or one fused
    multi-tensor kernel as long as their work."""
    tr = SynthTrace()
    cur = HostCursor(tr, t0=10_000)
    for i in range(steps):
        with cur.range(f"ProfilerStep#{i + 1}", kind="annotation"):
            cur.op("aten::linear", [("gemm_fwd", 200_000)])
            with cur.range("autograd::engine::evaluate_function: MmBackward0"):
                cur.op("aten::mm", [("gemm_bwd", 400_000)])
            if not optimizer:
                continue
            with cur.range("Optimizer.step#AdamW.step", kind="annotation"):
                if fused:  # the host prepares the tensor lists first: the GPU waits
                    cur.work(2_000_000)
                    cur.op("aten::_fused_adamw_", [(FUSED, params * 2_000)])
                else:
                    for _ in range(params):
                        cur.op("aten::add_", [("vectorized_add_kernel", 2_000)])
    return tr.write_kineto(tmp / "t.json") if fmt == "kineto" else tr.write_nsys(tmp / "t.sqlite")


@pytest.mark.parametrize("fmt", ["kineto", "nsys"])
def test_per_parameter_update_is_found_with_the_fused_remedy(tmp_path: Path, fmt: str) -> None:
    session = tf.load(_loop(tmp_path, fmt, params=200, fused=False))
    a = analyze(session)
    found = [f for f in a.findings if f.category == OPTIMIZER_STEP]
    assert len(found) == 1
    f = found[0]
    assert "fused=True" in f.remedy and f.confidence == "medium"
    assert f.figures["kernels"] == 4 * 200 and not f.figures["fused_kernels"]
    # the figures, recomputed: kernels launched inside the ranges, idle inside the ranges
    ev = session.events.to_dicts()
    ranges = [
        (e["start_ns"], e["start_ns"] + e["dur_ns"])
        for e in ev
        if str(e["name"]).startswith("Optimizer.step#")
    ]
    busy = plain_union(
        [
            (e["start_ns"], e["start_ns"] + e["dur_ns"])
            for e in ev
            if str(e["kind"]) in ("kernel", "memcpy", "memset")
        ]
    )
    inside = sum(max(0, min(b, e) - max(a_, s)) for s, e in ranges for a_, b in busy)
    idle = sum(e - s for s, e in ranges) - inside
    assert f.figures["idle_ns"] == f.recoverable_ns == idle > 0
    assert f.figures["gpu_ns"] == 4 * 200 * 2_000
    dev = a.devices[0]
    assert f.figures["optimizer_share"] == pytest.approx(
        (f.figures["gpu_ns"] + idle) / dev.window_ns, abs=1e-6
    )
    assert f.figures["optimizer_share"] >= OPTIMIZER_SHARE


@pytest.mark.parametrize("fmt", ["kineto", "nsys"])
def test_an_already_fused_update_never_advises_fused_again(tmp_path: Path, fmt: str) -> None:
    a = analyze(tf.load(_loop(tmp_path, fmt, params=400, fused=True)))
    found = [f for f in a.findings if f.category == OPTIMIZER_STEP]
    assert len(found) == 1
    f = found[0]
    assert f.remedy == OPTIMIZER_FUSED_REMEDY and "fused=True" not in f.remedy
    assert f.confidence == "low" and f.figures["fused_kernels"] == [FUSED]
    assert f.figures["kernels"] == 4 and f.recoverable_ns == f.figures["idle_ns"] > 0
    assert all("fused=True" not in g.remedy for g in a.findings)


@pytest.mark.parametrize("params", [0, 5])
def test_a_small_or_absent_optimizer_is_no_finding(tmp_path: Path, params: int) -> None:
    a = analyze(tf.load(_loop(tmp_path, "kineto", params=params, fused=False)))
    assert not [f for f in a.findings if f.category == OPTIMIZER_STEP]
    inference = analyze(tf.load(_loop(tmp_path, "nsys", params=200, fused=False, optimizer=False)))
    assert not [f for f in inference.findings if f.category == OPTIMIZER_STEP]


@pytest.mark.parametrize(
    "rel",
    ["kineto/resnet50_v100_workers0.pt.trace.json.gz", "hta/ddp_nccl_a100_rank0.json.gz"],
)
def test_shared_training_traces_optimizer_share_is_small(rel: str) -> None:
    """SGD on ResNet-50 / the DDP toy: the update is ~1 % of the GPU busy time (the phases say
    so) and below the finding's share."""
    a = analyze(tf.load(shared_trace(rel)))
    busy = sum(s.busy_ns for s in a.idle.steps)
    opt = sum(s.phases["optimizer"].gpu_ns for s in a.idle.steps)
    assert 0 < opt < 0.05 * busy
    assert not [f for f in a.findings if f.category == OPTIMIZER_STEP]


def _custom(tmp: Path, fmt: str, *, name: str, comm: bool = False, stacks: bool = False) -> Path:
    """A per-parameter update of optimizer class ``name`` inside nested optimizer ranges, with
    a collective launched inside them (``comm``) and a Python frame of zero_grad (``stacks``)."""
    tmp.mkdir(exist_ok=True)
    tr = SynthTrace()
    cur = HostCursor(tr, t0=10_000)
    for i in range(4):
        with cur.range(f"ProfilerStep#{i + 1}", kind="annotation"):
            cur.op("aten::linear", [("gemm_fwd", 200_000)])
            with (
                cur.range("## optimizer ##", kind="annotation"),
                cur.range(f"Optimizer.step#{name}.step", kind="annotation"),
            ):
                for _ in range(200):
                    cur.op("aten::add_", [("vectorized_add_kernel", 2_000)])
                if comm:
                    cur.op(
                        "c10d::allreduce_",
                        [("ncclKernel_AllReduce_RING_LL_Sum_float", 500_000)],
                    )
            if stacks:
                with cur.range("torch/optim/optimizer.py(795): zero_grad", kind="python"):
                    for _ in range(50):
                        cur.op("aten::zero_", [("fill_kernel", 2_000)])
    return tr.write_kineto(tmp / "t.json") if fmt == "kineto" else tr.write_nsys(tmp / "t.sqlite")


@pytest.mark.parametrize(
    ("name", "says"),
    [
        ("AdamW", "fused=True"),
        ("RMSprop", "build RMSprop with foreach=True"),
        ("Shampoo", "Shampoo has no fused/foreach flag"),
    ],
)
def test_the_remedy_names_the_flag_the_optimizer_has(tmp_path: Path, name: str, says: str) -> None:
    a = analyze(tf.load(_custom(tmp_path, "kineto", name=name)))
    (f,) = [f for f in a.findings if f.category == OPTIMIZER_STEP]
    assert says in f.remedy
    assert f.figures["ranges"] == 4  # "## optimizer ##" around Optimizer.step#: once per step


@pytest.mark.parametrize("fmt", ["kineto", "nsys"])
def test_collectives_and_zero_grad_frames_are_not_the_update(tmp_path: Path, fmt: str) -> None:
    plain = analyze(tf.load(_custom(tmp_path / "a", fmt, name="SGD")))
    busy = analyze(tf.load(_custom(tmp_path / "b", fmt, name="SGD", comm=True, stacks=True)))
    (f,) = [f for f in plain.findings if f.category == OPTIMIZER_STEP]
    (g,) = [f for f in busy.findings if f.category == OPTIMIZER_STEP]
    # the same 800 add_ kernels: the all-reduce and the zero_grad fills are not counted
    assert f.figures["kernels"] == g.figures["kernels"] == 4 * 200
    assert f.figures["gpu_ns"] == g.figures["gpu_ns"] == 4 * 200 * 2_000
