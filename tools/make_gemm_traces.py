"""Synthetic GEMM traces of known shape and duration, in Kineto and nsys formats.

Each GEMM op is a host ``cpu_op`` carrying ``Input Dims`` / ``Input type`` / ``Concrete
Inputs`` and launching one or more kernels of exactly known GPU duration, so the achieved
TFLOPS an analysis should report is ``flops / sum(kernel ns) / 1e3`` with nothing else to
estimate. One op (``aten::linear`` -> ``aten::addmm``) launches two kernels (GEMM + split-K
reduce) to check that FLOPs are spread over every kernel of the outermost op and counted once.

    python tools/make_gemm_traces.py OUT_DIR     # writes gemm.pt.trace.json.gz, gemm.sqlite

Tests import it (``sys.path.insert(0, ROOT / "tools")``) and use ``GEMMS`` / ``build()``.
"""

from __future__ import annotations

import sys
from dataclasses import dataclass
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from synth import SynthTrace


@dataclass(frozen=True)
class Gemm:
    """One GEMM op: ``op`` name, its inputs, and the kernels (name, ns) it launches.

    ``child`` is an optional nested op (same inputs order as recorded by PyTorch) enclosing
    the launches; ``flops`` is the hand-computed count the analysis must reproduce."""

    op: str
    dims: list[list[int]]
    types: list[str]
    kernels: list[tuple[str, int]]
    flops: int
    child: tuple[str, list[list[int]], list[str]] | None = None

    @property
    def kernel_ns(self) -> int:
        return sum(ns for _, ns in self.kernels)

    def tflops(self) -> float:
        """Expected achieved TFLOPS, computed the one obvious way."""
        return self.flops / self.kernel_ns / 1e3


BF16, FP16, FP32 = "c10::BFloat16", "c10::Half", "float"

GEMMS: list[Gemm] = [
    # mm [M,K]x[K,N]: 2MKN
    Gemm(
        "aten::mm",
        [[4096, 4096], [4096, 4096]],
        [BF16, BF16],
        [("nvjet_tst_256x128_64x4_bf16_gemm", 200_000)],
        2 * 4096 * 4096 * 4096,
    ),
    # addmm(bias[N], m1[M,K], m2[K,N]): 2MKN, bias add not counted
    Gemm(
        "aten::addmm",
        [[8192], [2048, 4096], [4096, 8192], [], []],
        [BF16, BF16, BF16, "Scalar", "Scalar"],
        [("sm90_xmma_gemm_bf16bf16_bf16f32_f32_tn_n", 150_000)],
        2 * 2048 * 4096 * 8192,
    ),
    # bmm [B,M,K]x[B,K,N]: 2BMKN
    Gemm(
        "aten::bmm",
        [[32, 512, 128], [32, 128, 512]],
        [FP16, FP16],
        [("ampere_fp16_s16816gemm_fp16_128x128_ldg8_f2f_tn", 20_000)],
        2 * 32 * 512 * 128 * 512,
    ),
    # linear(x[8,256,1024], w[4096,1024], b) -> addmm; two kernels share the FLOPs
    Gemm(
        "aten::linear",
        [[8, 256, 1024], [4096, 1024], [4096]],
        [BF16, BF16, BF16],
        [("sm90_xmma_gemm_bf16_splitk", 90_000), ("cublasLt::splitKreduce_kernel", 10_000)],
        2 * 8 * 256 * 1024 * 4096,
        child=(
            "aten::addmm",
            [[4096], [2048, 1024], [1024, 4096], [], []],
            [BF16, BF16, BF16, "Scalar", "Scalar"],
        ),
    ),
]

STEP_START_NS = 1_000
OP_GAP_NS = 50_000


def build(gemms: list[Gemm] | None = None) -> SynthTrace:
    """One ``ProfilerStep#1`` annotation holding the GEMM ops back to back on the host; each
    kernel starts 5 µs after its launch call and the GPU is idle between ops."""
    gemms = GEMMS if gemms is None else gemms
    tr = SynthTrace()
    t = STEP_START_NS + 10_000
    spans: list[tuple[int, int]] = []
    gpu_t = t
    for g in gemms:
        host_dur = 20_000 + 10_000 * len(g.kernels)
        tr.cpu_range(
            g.op,
            t,
            host_dur,
            args={
                "Input Dims": g.dims,
                "Input type": g.types,
                "Concrete Inputs": [""] * len(g.dims),
            },
        )
        launch_t = t + 5_000
        if g.child is not None:
            name, dims, types = g.child
            tr.cpu_range(
                name,
                t + 2_000,
                host_dur - 4_000,
                args={"Input Dims": dims, "Input type": types, "Concrete Inputs": [""] * len(dims)},
            )
            launch_t = t + 4_000
        gpu_t = max(gpu_t, launch_t + 5_000)
        for kname, ns in g.kernels:
            tr.launch(kname, launch_t, 4_000, gpu_t, ns)
            spans.append((gpu_t, gpu_t + ns))
            launch_t += 6_000
            gpu_t += ns
        t += host_dur + OP_GAP_NS
        gpu_t += 1_000
    end = max(t, spans[-1][1]) + 10_000
    tr.cpu_range("ProfilerStep#1", STEP_START_NS, end - STEP_START_NS, kind="annotation")
    return tr


def window_ns(tr: SynthTrace) -> int:
    """First kernel start to last kernel end (the MFU window of device 0)."""
    ks = tr.of_kind("kernel")
    return max(k.end_ns for k in ks) - min(k.start_ns for k in ks)


def main(argv: list[str]) -> int:
    out = Path(argv[1] if len(argv) > 1 else ".")
    out.mkdir(parents=True, exist_ok=True)
    tr = build()
    tr.write_kineto(out / "gemm.pt.trace.json.gz")
    tr.write_nsys(out / "gemm.sqlite")
    for g in GEMMS:
        print(
            f"{g.op:14s} flops={g.flops:>15d} kernel_ns={g.kernel_ns:>8d} tflops={g.tflops():.6f}"
        )
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv))
