"""What kind of program a trace records: its framework and GPU vendor, read from event names.

Remedies must be written in the program's own terms (a ``cudaMallocHost`` for a CUDA C program,
a ``data`` region for OpenACC, ``DataLoader`` only for PyTorch), so findings first decide what
made the work. The decision uses names only, matched once per distinct ``(kind, name)`` pair
with polars string expressions (a trace has millions of rows but a few thousand names).

Framework rules, first match wins:

1. ``pytorch``: host names ``aten::*``, ``ProfilerStep#*``, ``c10d::*``/``nccl:*``/``gloo:*``
   process-group ranges, PyTorch runtime ranges (``Optimizer.step#``, ``enumerate(DataLoader)``,
   ``Torch-Compiled Region``, autograd nodes ``*Backward0``), ``torch/`` Python frames; or
   PyTorch kernels (``at::native::``, ``c10::`` in the signature, ``pytorch_flash::``,
   Inductor's ``triton_poi_*``/``triton_red_*``...). nsys ``emit_nvtx`` text
   (``aten::addmm, seq = 3``) starts with ``aten::`` too. CUDA graphs, Triton and NCCL
   inside a PyTorch program do not change the answer.
2. ``jax``: XLA ranges (``XlaModule``, ``Thunk``, ``#hlo_module=``, ``jit_*``/``pjit*``) or XLA
   fusion kernels (``loop_add_fusion``, ``input_reduce_fusion_3``, ``fusion_12``, ``wrapped_*``).
3. ``tensorrt``: kernels ``__myl_*`` (Myelin) or with a ``trt`` token (``trt_*``,
   ``*_kernel_trt``); ranges naming ``TensorRT`` or ``ExecutionContext::enqueue``. A bare
   ``sm80_xmma_*`` kernel is not enough: cuBLAS and cuDNN use the same names (the shared
   PyTorch traces have ``sm80_xmma_fprop_*`` from cuDNN and ``sm90_xmma_gemm_*`` from cuBLAS).
4. ``openacc``: kernels ``__pgi_uacc*`` or nvc's ``<function>_<line>_gpu``; OpenACC API rows.
5. ``openmp``: kernels ``__omp_offloading_*`` (clang, amdclang) or nvc's
   ``nvkernel_<function>_F<n>L<line>_<n>``; libomptarget ``__tgt_*`` rows.
6. ``pytorch`` again when only the recorder says so: Kineto's ``Iteration Start: PyTorch
   Profiler`` marker means torch.profiler recorded it. It ranks below the named frameworks
   because it names the recorder, not the code that ran.
7. ``hip`` when the vendor is AMD, else ``cuda`` (a plain CUDA C/C++/Fortran program).

Vendor: ``amd`` when a device's vendor or name says AMD or the host called ``hip*``/``hsa_*``
APIs; else ``nvidia`` when a device says NVIDIA, the trace came from nsys (NVIDIA only), or the
host called ``cuda*``/``cu*`` APIs; else ``unknown``.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Final, NamedTuple

import polars as pl

from traceforensics.analysis.engines import engine_for
from traceforensics.analysis.facts import TraceFacts, facts_from
from traceforensics.model.session import TraceMeta, TraceSession

FRAMEWORKS: Final[tuple[str, ...]] = (
    "pytorch",
    "jax",
    "tensorrt",
    "openacc",
    "openmp",
    "cuda",
    "hip",
)
VENDORS: Final[tuple[str, ...]] = ("nvidia", "amd", "unknown")


@dataclass(frozen=True)
class Program:
    """The program behind a trace: ``framework`` (one of ``FRAMEWORKS``), ``vendor`` (one of
    ``VENDORS``) and ``evidence``, one short line saying which names decided it; ``facts``:
    what the trace shows already applied and what its chip can do (``facts``, read
    from the same name counts; not part of equality: two programs are the same program)."""

    framework: str
    vendor: str
    evidence: str
    facts: TraceFacts = field(default_factory=TraceFacts, compare=False)


class _Sign(NamedTuple):
    framework: str
    kinds: tuple[str, ...]
    pattern: str  # a polars (Rust) regex, matched anywhere in the name
    label: str  # what the matched rows are, for the evidence line


# Host kinds that carry framework or NVTX range names (nsys NVTX rows are annotation/cpu_op;
# cuda_api holds OpenACC and libomptarget API rows when an ingester maps them).
_HOST: Final = ("cpu_op", "annotation", "gpu_annotation", "python", "marker", "cuda_api")
_KERNEL: Final = ("kernel",)
# Kineto's own instant event: libkineto writes it into every trace torch.profiler records.
_KINETO_MARKER: Final = "^Iteration Start: PyTorch Profiler$"

#: Every sign in rule order; within a framework the first sign that matched names the evidence.
SIGNS: Final[tuple[_Sign, ...]] = (
    _Sign("pytorch", _HOST, r"^aten::", "aten:: operators"),
    _Sign("pytorch", _HOST, r"^ProfilerStep#", "ProfilerStep# ranges"),
    _Sign(
        "pytorch",
        _HOST,
        r"^(c10d|_c10d_functional|c10d_functional)::|^(nccl|gloo):[a-z_]+$",
        "torch.distributed ranges",
    ),
    _Sign(
        "pytorch",
        _HOST,
        r"^(Optimizer\.(step|zero_grad)#|enumerate\(DataLoader\)|Torch-Compiled Region|"
        r"TorchDynamo|autograd::engine|## Call CompiledFxGraph)|^[A-Z]\w*Backward\d*$",
        "PyTorch runtime ranges",
    ),
    _Sign("pytorch", ("python",), r"torch/|^nn\.Module: ", "torch Python frames"),
    _Sign("pytorch", _KERNEL, r"\bat::(native|cuda)::|\bc10::|pytorch_flash::", "ATen kernels"),
    _Sign("pytorch", _KERNEL, r"^triton_(poi|red|per|tem)_", "Inductor-generated kernels"),
    _Sign(
        "jax",
        _HOST,
        r"^(XlaModule|Thunk)\b|#hlo_(module|op)=|^p?jit_\w|^PjitFunction|^(xla|jax)::",
        "XLA module/thunk ranges",
    ),
    _Sign(
        "jax",
        _KERNEL,
        r"^(\w+_)?fusion(_\d+)*$|^wrapped_\w+$",
        "XLA fusion kernels",
    ),
    _Sign("tensorrt", _KERNEL, r"^__myl_", "Myelin (__myl_*) kernels"),
    _Sign("tensorrt", _KERNEL, r"(?i)(^|_)trt(_|$)", "TensorRT (trt) kernels"),
    _Sign("tensorrt", _HOST, r"TensorRT|^ExecutionContext::(enqueue|execute)", "TensorRT ranges"),
    _Sign("openacc", _KERNEL, r"^__pgi_uacc", "__pgi_uacc* kernels"),
    _Sign("openacc", _KERNEL, r"^\w+_\d+_gpu(__red)?$", "nvc <function>_<line>_gpu kernels"),
    _Sign(
        "openacc",
        _HOST,
        r"^acc_[a-z_]+|^(Enter Data|Exit Data|Compute Construct|Enqueue \w+|Update \w+)@",
        "OpenACC API rows",
    ),
    _Sign("openmp", _KERNEL, r"^__omp_offloading_", "__omp_offloading_* kernels"),
    _Sign("openmp", _KERNEL, r"^nvkernel_\w+_F\d+L\d+", "nvc nvkernel_* OpenMP kernels"),
    _Sign("openmp", _HOST, r"^__tgt_", "libomptarget __tgt_* rows"),
    _Sign("pytorch", ("marker",), _KINETO_MARKER, "Kineto 'PyTorch Profiler' markers"),
)
# Vendor signs from runtime API names (the device list can be empty or unnamed).
_AMD_API: Final = r"^(hip|hsa_|roctx)"
_NVIDIA_API: Final = r"^(cuda|cu[A-Z])"
_AMD_DEVICE_RE: Final = re.compile(r"amd|radeon|instinct|\bmi\d{3}", re.IGNORECASE)


def name_counts(session: TraceSession) -> pl.DataFrame:
    """Rows per distinct ``(kind, name)`` (``kind``, ``name``, ``len``), names as text: the only
    table the rules read; the counts of several sessions (ranks analysed apart) add up.
    Counted over the two key columns, by the streaming engine on a big table (``engines``;
    integer counts: the order rows are met in does not matter); an eager group_by of the
    whole event table held ~490 MB at 4M events, ~1 MB this way."""
    return (
        session.events.lazy()
        .group_by("kind", "name")
        .len()
        .with_columns(pl.col("kind").cast(pl.String), pl.col("name").cast(pl.String))
        .collect(engine=engine_for(session.events.height))
    )


def _match_counts(kinds: tuple[str, ...], pattern: str) -> pl.Expr:
    # rows and distinct names matched, as a 2-field struct (one expression per sign)
    hit = pl.col("kind").is_in(list(kinds)) & pl.col("name").str.contains(pattern)
    return pl.struct(
        pl.col("len").filter(hit).sum().alias("rows"),
        hit.sum().alias("distinct"),
    )


def _count(rows: int, distinct: int, label: str) -> str:
    return f"{rows:,} {label} ({distinct:,} distinct)"


def _vendor(meta: TraceMeta, amd_api: int, nvidia_api: int) -> tuple[str, str]:
    """Vendor and the reason, by the rule in the module docstring."""
    devices = meta.devices
    named = [d.name for d in devices if _AMD_DEVICE_RE.search(d.name)]
    vendors = " ".join((d.vendor or "").lower() for d in devices)
    # AMD evidence goes first: the Kineto ingester calls a device it cannot name "nvidia"
    rules = (
        (bool(named), "amd", f"AMD device {named[0]!r}" if named else ""),
        (amd_api > 0, "amd", f"{amd_api:,} hip*/hsa_* API calls"),
        ("amd" in vendors, "amd", "AMD device"),
        ("nvidia" in vendors, "nvidia", "NVIDIA device"),
        (meta.source_format == "nsys", "nvidia", "Nsight Systems trace"),
        (nvidia_api > 0, "nvidia", f"{nvidia_api:,} CUDA API calls"),
    )
    unknown = ("unknown", "no GPU device or runtime API named")
    return next(((vendor, why) for hit, vendor, why in rules if hit), unknown)


def detect_program(session: TraceSession) -> Program:
    """Framework and vendor of the program ``session`` records (rules in the module docstring)."""
    return program_from(name_counts(session), session.meta)


def _sign_counts(i: int) -> pl.Expr:
    """``_match_counts`` of ``SIGNS[i]``, as column ``s{i}``."""
    return _match_counts(SIGNS[i].kinds, SIGNS[i].pattern).alias(f"s{i}")


def program_from(names: pl.DataFrame, meta: TraceMeta) -> Program:
    """``detect_program`` from the name counts (``name_counts``, summed over the ranks of a job
    analysed apart) and the trace's metadata."""
    api = pl.col("kind") == "cuda_api"
    exprs = [
        pl.col("len").filter(api & pl.col("name").str.contains(_AMD_API)).sum().alias("amd"),
        pl.col("len").filter(api & pl.col("name").str.contains(_NVIDIA_API)).sum().alias("nv"),
        pl.col("len").filter(pl.col("kind") == "kernel").sum().alias("kernels"),
    ]
    # the first sign with rows names the framework: the first one (``aten::``, nearly every
    # PyTorch trace) is tried with the vendor's counts, the others only when it finds none
    # (each regex costs ~0.1-0.3 ms to compile and run, ~4 ms for all of them)
    facts = facts_from(names, meta)
    counts = names.select(*exprs, _sign_counts(0)).row(0, named=True)
    if not counts["s0"]["rows"]:
        counts |= names.select(_sign_counts(i) for i in range(1, len(SIGNS))).row(0, named=True)
    vendor, why_vendor = _vendor(meta, int(counts["amd"] or 0), int(counts["nv"] or 0))
    for i, sign in enumerate(SIGNS):
        hit = counts[f"s{i}"]
        if hit["rows"]:
            evidence = _count(hit["rows"], hit["distinct"], sign.label)
            return Program(sign.framework, vendor, evidence, facts)
    framework = "hip" if vendor == "amd" else "cuda"
    kernels = int(counts["kernels"] or 0)
    return Program(
        framework, vendor, f"no framework names in {kernels:,} kernel rows; {why_vendor}", facts
    )


__all__ = ["FRAMEWORKS", "SIGNS", "VENDORS", "Program", "detect_program"]
