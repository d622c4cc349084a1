"""Transfer-bound time and one-off vs steady state (issue 44, items 5 and 8), built traces in
both formats.

- serialised full-speed copies (65 % of the window, activation offloading): the copies that
  compute could hide are recoverable, not only the bandwidth shortfall: ``transfer_bound``
  first, its two parts in its figures and title;
- copies inside an ``init_model`` range (a one-time ``model.to('cuda')``) leave
  ``transfer_bound``: the ``one_off`` finding reports them and names the range;
- a cold start (30 s before the first kernel, a 6 s ``cudaFree``, no steps): the lead-in is
  one-off, not allocator churn;
- warm-up steps (named so, or a first step far above the others) are one-off.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from synth import SynthTrace
from traceforensics.analysis import analyze
from traceforensics.analysis.findings.results import Finding
from traceforensics.analysis.one_off import LEAD_IN, SETUP_RE, WARMUP_STEP
from traceforensics.ingest import load_path

US = 1_000
MS = 1_000_000
S = 1_000_000_000
#: H100 (PCIe Gen5): 50 GB/s pinned = 50 bytes per ns
LINK = 50


def _findings(tr: SynthTrace, tmp_path: Path, fmt: str) -> list[Finding]:
    path = (
        tr.write_kineto(tmp_path / "t.pt.trace.json.gz")
        if fmt == "kineto"
        else tr.write_nsys(tmp_path / "t.sqlite")
    )
    return analyze(load_path(path, use_cache=False)).findings


def _by(findings: list[Finding], category: str) -> Finding | None:
    return next((f for f in findings if f.category == category), None)


def offload_loop(steps: int = 8) -> SynthTrace:
    """Each step: a 650 µs pinned H2D copy at the link's full speed, then a 350 µs kernel on
    the same stream (serialised: the activations it needs arrive first), 5 µs launch gaps."""
    tr = SynthTrace()
    t = 10 * US
    for _ in range(steps):
        copy_ns = 650 * US
        nbytes = (copy_ns - 2 * US) * LINK  # full speed, after the 2 µs start-up cost
        tr.launch("", t - 5 * US, 3 * US, t, copy_ns, kind="memcpy", api="cudaMemcpyAsync",
                  copy_kind="h2d", src_mem="pinned", dst_mem="device", bytes=nbytes)  # fmt: skip
        t += copy_ns + 5 * US
        tr.launch("offload_gemm_kernel", t - 5 * US, 3 * US, t, 350 * US)
        t += 350 * US + 5 * US
    return tr


@pytest.mark.parametrize("fmt", ["kineto", "nsys"])
def test_serialised_full_speed_copies_are_recoverable(fmt: str, tmp_path: Path) -> None:
    found = _findings(offload_loop(), tmp_path, fmt)
    first = found[0]
    assert first.category == "transfer_bound", [(f.category, f.recoverable_ns) for f in found]
    fig = first.figures
    assert fig["exposed_copy_ns"] == 8 * 650 * US  # nothing overlaps the copies
    assert fig["bandwidth_recoverable_ns"] == 0  # they run at the link's speed
    # the kernels (8 x 350 µs) are the compute that could hide them
    assert fig["compute_free_ns"] == 8 * 350 * US
    assert fig["overlap_recoverable_ns"] == 8 * 350 * US
    assert first.recoverable_ns == 8 * 350 * US
    assert "overlapping them with compute" in first.title


def init_then_loop(*, kernel_in_init: bool) -> SynthTrace:
    """``init_model`` (2 s): 10 pageable H2D copies of 120 ms at 4 GB/s (a one-time
    ``model.to('cuda')``), optionally after a small init kernel (then there is no long lead-in:
    the range alone makes the copies one-off); then a loop of 200 kernels with 5 µs gaps."""
    tr = SynthTrace()
    tr.cpu_range("init_model", 0, 2 * S, kind="annotation")
    t = 10 * MS
    if kernel_in_init:
        tr.launch("normal_kernel", t - 5 * US, 3 * US, t, 100 * US)
        t += 1 * MS
    for _ in range(10):
        tr.cpu_range("aten::copy_", t - 10 * US, 120 * MS + 20 * US)
        tr.launch("", t - 10 * US, 120 * MS + 15 * US, t, 120 * MS, kind="memcpy",
                  api="cudaMemcpyAsync", copy_kind="h2d", src_mem="pageable",
                  dst_mem="device", bytes=480 * MS)  # fmt: skip
        t += 130 * MS
    t = 2 * S + 1 * MS
    tr.cpu_range("benchmark_loop", t - 100 * US, 200 * 505 * US + 200 * US, kind="annotation")
    for _ in range(200):
        tr.launch("ampere_bf16_gemm_kernel", t - 5 * US, 3 * US, t, 500 * US)
        t += 505 * US
    return tr


@pytest.mark.parametrize("kernel_in_init", [False, True])
@pytest.mark.parametrize("fmt", ["kineto", "nsys"])
def test_copies_inside_init_model_are_one_off(
    fmt: str, kernel_in_init: bool, tmp_path: Path
) -> None:
    found = _findings(init_then_loop(kernel_in_init=kernel_in_init), tmp_path, fmt)
    assert _by(found, "transfer_bound") is None, [(f.category, f.title) for f in found]
    once = _by(found, "one_off")
    assert once is not None
    labels = [w["label"] for w in once.figures["one_off_windows"]]
    assert "init_model" in labels
    assert (LEAD_IN in labels) is (not kernel_in_init)
    assert once.figures["one_off_copy_ns"] == 10 * 120 * MS
    assert once.figures["one_off_copy_bytes"] == 10 * 480 * MS
    assert "init_model" in once.title


def cold_start() -> SynthTrace:
    """A tiny copy at 1 s, then 29 s of start-up on the host (CPU work 5 s, file reads 4 s, a
    6 s ``cudaFree``, module loading 5 s, a loader 5 s, 4 s unrecorded), the first kernel at
    30 s and 20 ms of kernels with 5 µs gaps. No steps, no named range."""
    tr = SynthTrace()
    tr.launch("", 1 * S - 10 * US, 5 * US, 1 * S, 2 * US, kind="memcpy", api="cudaMemcpyAsync",
              copy_kind="h2d", src_mem="pinned", dst_mem="device", bytes=4096)  # fmt: skip
    tr.cpu_range("aten::randn", 1 * S, 5 * S)
    tr.cpu_range("read", 6 * S, 4 * S, kind="os_call")
    tr.api("cudaFree", 10 * S, 6 * S)
    tr.api("cuModuleLoadData", 16 * S, 5 * S)
    tr.cpu_range("enumerate(DataLoader)#_SingleProcessDataLoaderIter.__next__", 21 * S, 5 * S,
                 kind="annotation")  # fmt: skip
    t = 30 * S
    for _ in range(40):
        tr.launch("vectorized_elementwise_kernel", t - 5 * US, 3 * US, t, 500 * US)
        t += 505 * US
    return tr


@pytest.mark.parametrize("fmt", ["kineto", "nsys"])
def test_cold_start_is_warm_up(fmt: str, tmp_path: Path) -> None:
    found = _findings(cold_start(), tmp_path, fmt)
    first = found[0]
    assert first.category == "one_off", [(f.category, f.recoverable_ns) for f in found]
    assert [w["label"] for w in first.figures["one_off_windows"]] == [LEAD_IN]
    assert first.figures["one_off_by_cause"]["memory_management"] == 6 * S
    assert "profile" in first.title and "steady" in first.title
    churn = _by(found, "memory_management")
    assert churn is None  # the cudaFree is start-up, not steady-state allocator churn


def steps_loop(names: list[str], durations_us: list[int]) -> SynthTrace:
    """One host step range per name: a 10 µs kernel at its start, a host stall
    (``aten::index``) of ``duration - 420 µs``, then a 390 µs kernel."""
    tr = SynthTrace()
    t = 100 * US
    for name, dur in zip(names, durations_us, strict=True):
        tr.cpu_range(name, t, dur * US, kind="annotation")
        tr.launch("step_start_kernel", t, 5 * US, t + 5 * US, 5 * US)
        tr.cpu_range("aten::index", t + 10 * US, (dur - 420) * US)
        k = t + (dur - 400) * US
        tr.launch("step_kernel", k - 10 * US, 5 * US, k, 390 * US)
        t += dur * US
    return tr


def _steady_idle(found: list[Finding]) -> int:
    """Idle time of the steady-state idle findings (ns)."""
    return sum(int(f.figures.get("idle_ns", 0)) for f in found if f.category != "one_off")


@pytest.mark.parametrize("fmt", ["kineto", "nsys"])
def test_slow_first_step_is_warm_up(fmt: str, tmp_path: Path) -> None:
    """The first step (DataLoader worker start-up, autotuning) takes 20x the others: its idle
    is one-off; the others' is steady."""
    names = [f"ProfilerStep#{i}" for i in range(5)]
    found = _findings(steps_loop(names, [20_000, 1_000, 1_000, 1_000, 1_000]), tmp_path, fmt)
    once = _by(found, "one_off")
    assert once is not None
    labels = [w["label"] for w in once.figures["one_off_windows"]]
    assert f"{WARMUP_STEP} ProfilerStep#0" in labels
    assert once.figures["one_off_idle_ns"] >= 19_500 * US  # the first step's stall
    # the four steady steps' stalls (about 600 µs each), not the first one's 19.6 ms
    assert 4 * 580 * US < _steady_idle(found) < 4 * 1_000 * US


@pytest.mark.parametrize("fmt", ["kineto", "nsys"])
def test_only_warm_up_steps_leave_the_rest_steady(fmt: str, tmp_path: Path) -> None:
    """Steps named ``Warm-up Step N`` are one-off; with no other step, the work after them is
    the steady state (not a wind-down)."""
    tr = steps_loop([f"Warm-up Step {i}" for i in range(3)], [5_000, 5_000, 5_000])
    t = 16 * MS
    tr.cpu_range("Benchmark Forward Only", t, 20 * MS, kind="annotation")
    for _ in range(10):
        tr.cpu_range("aten::index", t, 1_500 * US)
        tr.launch("step_kernel", t + 1_490 * US, 5 * US, t + 1_500 * US, 500 * US)
        t += 2 * MS
    found = _findings(tr, tmp_path, fmt)
    once = _by(found, "one_off")
    assert once is not None
    labels = {w["label"] for w in once.figures["one_off_windows"]}
    assert labels == {f"{WARMUP_STEP} Warm-up Step {i}" for i in range(3)} | {
        f"Warm-up Step {i}" for i in range(3)
    }
    assert _steady_idle(found) >= 9 * 1_500 * US  # the benchmark's stalls


@pytest.mark.parametrize(
    ("name", "setup"),
    [
        ("init_model", True),
        ("Initialize Model", True),
        ("warmup", True),
        ("Warm-up Step 1", True),
        ("[param|pytorch.model.alex_net|0|0|0|warmup|forward]", True),
        ("load_checkpoint", True),
        ("checkpoint restore", True),
        ("model.to", True),
        ("torch.compile", True),
        ("setup", True),
        ("Torch-Compiled Region: 0/0", False),
        ("CompiledFunction", False),
        ("checkpoint", False),
        ("ProfilerStep#3", False),
        ("benchmark_loop", False),
        ("dataloader_init_workers", True),
        ("reinitialize_buffers", False),
    ],
)
def test_setup_signs(name: str, setup: bool) -> None:
    import re

    assert (re.search(SETUP_RE, name) is not None) is setup
