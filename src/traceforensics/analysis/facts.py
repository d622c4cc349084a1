"""Facts a remedy's precondition checks, read once from the trace's names and device list.

A remedy is only worth giving when the trace does not already show it applied
(``findings.preconditions``). The facts come from the distinct ``(kind, name)`` counts the
program detection reads (``program.name_counts``; summed over the ranks of a job analysed
apart) and from the trace's device descriptions, so every analysis path has them at no cost:

- ``matmul_rows``: GEMM/convolution kernel rows per dtype class, from the kernel names
  (``tensor_cores.matmul_dtype``: fp8, int8, bf16, fp16, tf32, fp32, other);
- ``layout_rows``: layout-conversion kernel rows (cuDNN ``nchwToNhwc``/``nhwcToNchw``, MIOpen
  transposes);
- ``loader``: ``multiprocess`` when a host range names ``_MultiProcessingDataLoaderIter``,
  ``single`` when it names ``_SingleProcessDataLoaderIter`` (and no multiprocess one), else None;
- ``graph_replays``: ``cudaGraphLaunch``/``hipGraphLaunch`` calls plus graph-level records
  (``cuda_graph`` rows);
- ``pinned_copies``/``pageable_copies``: host<->device copies whose name says ``Pinned`` or
  ``Pageable`` (``Memcpy HtoD (Pinned -> Device)``, in both formats);
- ``fused_optimizer``: multi-tensor optimizer kernels (``multi_tensor_apply``, ``_foreach_``,
  fused Adam/AdamW/SGD kernels);
- ``compiled_kernels``: Inductor-generated kernel rows (``triton_poi_*``, ``triton_red_*``...),
  of ``kernel_rows`` in all; ``mostly_compiled`` when they are at least ``COMPILED_SHARE`` of
  the kernel rows (a compiled model still runs its GEMMs in cuBLAS; one compiled helper in an
  eager model is not "compiled");
- ``chip``: what every device of the trace can do (``ChipFacts``): the dtypes with a
  tensor/matrix-core peak in the peak table (``peaks``), else from the NVIDIA compute
  capability (fp16 from 7.0, tf32/bf16 from 8.0, fp8 from 8.9), else from the kernel names'
  architecture prefix (``tensor_cores.arch_hint``); several devices: what all can do.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Final

import polars as pl

from traceforensics.analysis.peaks import resolve_device_peak
from traceforensics.analysis.tensor_cores import TENSOR_DTYPES, arch_hint, name_classes
from traceforensics.model.session import DeviceInfo, TraceMeta

_HOST: Final = ("cpu_op", "annotation", "gpu_annotation", "python", "marker")
_MULTI_LOADER: Final = r"_MultiProcessingDataLoaderIter"
_SINGLE_LOADER: Final = r"_SingleProcessDataLoaderIter"
_GRAPH_API: Final = r"^(cuda|hip)GraphLaunch"
FUSED_OPTIMIZER_RE: Final = (
    r"(?i)multi_tensor_apply|_foreach_|fused_adam|fusedadam|fused_sgd|FusedAdam|_fused_adamw?_"
)
_INDUCTOR_KERNEL: Final = r"^triton_(poi|red|per|tem)_"
#: Share of the kernel rows Inductor must have generated for a trace to count as compiled.
COMPILED_SHARE: Final = 0.3
#: A tensor-core TF32 rate at least this many times the FP32 rate makes TF32 worth enabling
#: (GeForce Ampere/Ada list TF32 at the FP32 rate: there only 16-bit types are faster).
TF32_GAIN_MIN: Final = 1.5


@dataclass(frozen=True)
class ChipFacts:
    """What the trace's GPUs can do. ``tensor_dtypes``: the dtypes with a tensor/matrix-core
    rate (subset of tf32, fp16, bf16, fp8); ``tf32_gain``: TF32 runs at least
    ``TF32_GAIN_MIN`` x FP32 (None: unknown); ``known``: the facts come from a device
    description or a kernel name, not a guess."""

    vendor: str = "unknown"
    name: str | None = None
    compute_capability: str | None = None
    tensor_dtypes: frozenset[str] = frozenset()
    tf32_gain: bool | None = None
    known: bool = False

    @property
    def tensor_cores(self) -> bool:
        return bool(self.tensor_dtypes)

    def has(self, dtype: str) -> bool:
        return dtype in self.tensor_dtypes


@dataclass(frozen=True)
class TraceFacts:
    """The checked facts of one trace (module docstring); counts are rows of the trace."""

    matmul_rows: dict[str, int] = field(default_factory=dict)
    layout_rows: int = 0
    loader: str | None = None
    graph_replays: int = 0
    pinned_copies: int = 0
    pageable_copies: int = 0
    fused_optimizer: int = 0
    compiled_kernels: int = 0
    kernel_rows: int = 0
    chip: ChipFacts = field(default_factory=ChipFacts)

    @property
    def mostly_compiled(self) -> bool:
        return self.compiled_kernels > 0 and self.compiled_kernels >= (
            COMPILED_SHARE * self.kernel_rows
        )

    @property
    def tensor_core_matmuls(self) -> int:
        """GEMM/conv kernel rows that already run on tensor cores (any 8/16-bit or TF32 type)."""
        return sum(self.matmul_rows.get(d, 0) for d in TENSOR_DTYPES)

    @property
    def fp32_matmuls(self) -> int:
        return self.matmul_rows.get("fp32", 0)

    @property
    def matmul_types(self) -> list[str]:
        """The tensor-core dtype classes the GEMM/conv kernels use, most rows first."""
        used = [(n, d) for d, n in self.matmul_rows.items() if d in TENSOR_DTYPES and n]
        return [d for _, d in sorted(used, key=lambda t: (-t[0], t[1]))]

    def to_json(self) -> dict[str, object]:
        return {
            "matmul_rows": dict(sorted(self.matmul_rows.items())),
            "layout_rows": self.layout_rows,
            "loader": self.loader,
            "graph_replays": self.graph_replays,
            "pinned_copies": self.pinned_copies,
            "pageable_copies": self.pageable_copies,
            "fused_optimizer": self.fused_optimizer,
            "compiled_kernels": self.compiled_kernels,
            "kernel_rows": self.kernel_rows,
            "tensor_dtypes": sorted(self.chip.tensor_dtypes),
        }


def _rows(names: pl.DataFrame, kinds: tuple[str, ...], pattern: str) -> int:
    hit = pl.col("kind").is_in(list(kinds)) & pl.col("name").str.contains(pattern)
    return int(names.select(pl.col("len").filter(hit).sum()).item() or 0)


def facts_from(names: pl.DataFrame, meta: TraceMeta) -> TraceFacts:
    """The facts of a trace from its name counts (``kind``, ``name`` as text, ``len``) and
    metadata (rules in the module docstring)."""
    if names.height == 0:
        return TraceFacts(chip=chip_facts(meta.devices, []))
    kernels = names.filter(pl.col("kind") == "kernel")
    classes = name_classes(kernels.get_column("name"))
    joined = kernels.select("name", "len").join(classes, on="name", how="inner")
    per_dtype = (
        joined.filter(pl.col("matmul_dtype").is_not_null())
        .group_by("matmul_dtype")
        .agg(pl.col("len").sum())
    )
    matmul = {str(d): int(n) for d, n in per_dtype.iter_rows()}
    layout = int(joined.filter(pl.col("layout")).get_column("len").sum() or 0)
    multi = _rows(names, _HOST, _MULTI_LOADER)
    single = _rows(names, _HOST, _SINGLE_LOADER)
    loader = "multiprocess" if multi else ("single" if single else None)
    copies = names.filter(pl.col("kind") == "memcpy")
    hints = [h for h in map(arch_hint, classes.get_column("name").to_list()) if h]
    return TraceFacts(
        matmul_rows=matmul,
        layout_rows=layout,
        loader=loader,
        graph_replays=_rows(names, ("cuda_api",), _GRAPH_API) + _rows(names, ("cuda_graph",), ""),
        pinned_copies=_rows(copies, ("memcpy",), r"(?i)\bpinned\b"),
        pageable_copies=_rows(copies, ("memcpy",), r"(?i)\bpageable\b"),
        fused_optimizer=_rows(names, ("kernel",), FUSED_OPTIMIZER_RE),
        compiled_kernels=_rows(kernels, ("kernel",), _INDUCTOR_KERNEL),
        kernel_rows=int(kernels.get_column("len").sum() or 0),
        chip=chip_facts(meta.devices, hints),
    )


def _cc_dtypes(cc: str | None) -> frozenset[str] | None:
    """Tensor-core dtypes of an NVIDIA compute capability ("8.0"), None when unreadable."""
    try:
        major, minor = (int(x) for x in (cc or "").split(".")[:2])
    except ValueError:
        return None
    out = set()
    if major >= 7:
        out.add("fp16")
    if major >= 8:
        out |= {"tf32", "bf16"}
    if (major, minor) >= (8, 9):
        out.add("fp8")
    return frozenset(out)


def _device_chip(info: DeviceInfo) -> ChipFacts:
    peak = resolve_device_peak(info)
    vendor = (info.vendor or "unknown").lower()
    if peak.sku is not None:
        rates = peak.tflops
        dtypes = frozenset(d for d in ("tf32", "fp16", "bf16", "fp8") if rates.get(d))
        fp32, tf32 = rates.get("fp32"), rates.get("tf32")
        gain = None if not (fp32 and tf32) else tf32 >= TF32_GAIN_MIN * fp32
        return ChipFacts(vendor, info.name, info.compute_capability, dtypes, gain, True)
    dtypes_cc = _cc_dtypes(info.compute_capability) if vendor != "amd" else None
    if dtypes_cc is None:
        return ChipFacts(vendor, info.name, info.compute_capability)
    gain = True if "tf32" in dtypes_cc else None
    return ChipFacts(vendor, info.name, info.compute_capability, dtypes_cc, gain, True)


def chip_facts(devices: list[DeviceInfo], hints: list[str]) -> ChipFacts:
    """What every described device can do (``ChipFacts``); without a usable description, the
    oldest architecture the kernel names were built for (``hints``: compute capabilities)."""
    chips = [c for c in map(_device_chip, devices) if c.known]
    if not chips and hints:
        cc = min(hints)
        dtypes = _cc_dtypes(cc) or frozenset()
        gain = True if "tf32" in dtypes else None
        return ChipFacts("nvidia", None, cc, dtypes, gain, True)
    if not chips:
        vendor = next((c.vendor for c in map(_device_chip, devices)), "unknown")
        return ChipFacts(vendor)
    first = chips[0]
    dtypes = frozenset.intersection(*(c.tensor_dtypes for c in chips))
    gains = [c.tf32_gain for c in chips]
    gain = None if None in gains else all(g for g in gains)
    return ChipFacts(first.vendor, first.name, first.compute_capability, dtypes, gain, True)


__all__ = ["COMPILED_SHARE", "TF32_GAIN_MIN", "ChipFacts", "TraceFacts", "chip_facts", "facts_from"]
