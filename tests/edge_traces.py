"""The four edge traces every reporter and plot must handle (issue 13): a CPU-only trace, a
single-kernel trace, an 84 ms trace and a 40 s trace. ``SYNTH`` builds them with exactly known
times (``tools/synth.py``); ``REAL`` names recorded traces of the same shapes under
``../shared/traces`` (with the analysis options they need), used when present."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from synth import SynthTrace

MS = 1_000_000


def cpu_only() -> SynthTrace:
    """Host ranges only: no GPU work at all."""
    tr = SynthTrace()
    tr.cpu_range("ProfilerStep#1", 0, 5 * MS, kind="annotation")
    tr.cpu_range("aten::add", 1 * MS, 2 * MS)
    return tr


def single_kernel() -> SynthTrace:
    """One launch, one kernel: a window with no idle time."""
    tr = SynthTrace()
    tr.launch("gemm_kernel", 10_000, 5_000, 20_000, 7_000)
    return tr


def spread(span_ns: int, n: int, dur_ns: int) -> SynthTrace:
    """``n`` steps over ``span_ns``: a kernel on stream 7, an overlapping one on stream 9 and
    a copy, then an idle stretch."""
    tr = SynthTrace()
    every = span_ns // n
    for i in range(n):
        t = 50_000 + i * every
        tr.cpu_range(f"ProfilerStep#{i}", t - 40_000, every, kind="annotation")
        tr.launch("gemm_kernel", t - 30_000, 5_000, t, dur_ns)
        tr.launch("relu_kernel", t - 20_000, 5_000, t + dur_ns // 2, dur_ns, stream=9)
        tr.launch("", t - 10_000, 5_000, t + 2 * dur_ns, dur_ns // 4, kind="memcpy",
                  copy_kind="h2d", src_mem="pageable", dst_mem="device", bytes=1 << 20)  # fmt: skip
    return tr


SYNTH: dict[str, Callable[[], SynthTrace]] = {
    "cpu_only": cpu_only,
    "single_kernel": single_kernel,
    "84ms": lambda: spread(84 * MS, 28, 700_000),
    "40s": lambda: spread(40_000 * MS, 50, 150 * MS),
}
# name -> (path under ../shared/traces, analysis options)
REAL: dict[str, tuple[str, dict[str, Any]]] = {
    "real_cpu_only": ("hta/cpu_only_rank34.json.gz", {}),
    "real_single_kernel": ("hta/triton_a100.json.gz", {}),
    "real_84ms": ("tracelens/eager_b200.json.gz", {}),
    "real_43s": ("nsys/zx3xyy__assignment2-systems__result_2_7B_nvtx.sqlite", {"window": "trace"}),
}
