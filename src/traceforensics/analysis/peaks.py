"""Datasheet peaks per GPU: dense TFLOPS per dtype and memory bandwidth, and the device lookup.

The table lives in ``traceforensics/data/gpu_peaks.csv`` (one row per SKU, each row naming its
datasheet). Rules:

- **Dense only.** Every figure is the dense (no 2:4 structured sparsity) rate; where a datasheet
  prints only with-sparsity numbers the row stores half and says so in ``note``. The
  ``figures`` column must read ``dense`` (a test enforces it and checks the known dense ratios
  FP8 = 2 x FP16 and BF16 = 2 x TF32).
- **Per visible device.** Multi-die packages that PyTorch shows as several devices (MI250X:
  2 GCDs) store the package figures and ``devices_per_package``; lookups divide.
- **Tensor rates for tensor dtypes.** ``fp16``/``bf16``/``fp8`` are tensor-core rates with FP32
  accumulate (what PyTorch GEMMs use); ``fp32`` is the non-tensor FP32 rate on NVIDIA and the
  matrix-core FP32 rate on AMD; ``tf32`` is only reached when the user enables TF32.

Lookup order for a device: (1) its name (``deviceProperties.name`` / ``TARGET_INFO_GPU.name``)
against each row's ``name_regex``, first match in file order (``match_by_name``: whitespace
collapsed, case ignored, the match a whole token, not followed by a variant word); (2) SM/CU
count + compute capability (+ memory size to split 40/80 GB, H100/H200, MI300X/MI325X), among
rows marked ``fallback=yes`` - except for a name that is a listed card's variant
(``variant_of``: a Laptop, Max-Q, ``D``, MIG slice, ... has other clocks or SMs than the card,
and its SM count would pick a wrong desktop card); (3) nothing (MFU is then unknown, never
guessed). A user override (``peak_tflops``) replaces the compute peak of every dtype.

``names`` lists the device-name strings each row is for, as drivers report them (a test checks
that each resolves to its own row).
"""

from __future__ import annotations

import csv
import re
from dataclasses import dataclass
from functools import cache
from importlib import resources
from typing import Any, Final

from traceforensics.model.session import UNKNOWN_DEVICE, DeviceInfo

DTYPES: Final[tuple[str, ...]] = ("fp64", "fp32", "tf32", "fp16", "bf16", "fp8")
_GIB: Final = 1 << 30
#: A word right after a row's match that makes the device another SKU than the row (different
#: SMs, clocks or a slice of the GPU): "RTX 4090 D", "RTX 3080 Laptop GPU", "RTX 2080 with
#: Max-Q Design", "A100-SXM4-40GB MIG 1g.5gb", "H200 NVL", "H800 PCIe". A row for that SKU
#: spells the word in its own regex.
_VARIANT_AFTER: Final = re.compile(
    r"[ -](?:Ti|SUPER|D|Laptop|Mobile|Max-Q|with|MIG|NVL|PCIe)(?![A-Za-z0-9])", re.IGNORECASE
)


@dataclass(frozen=True)
class GpuPeak:
    """One SKU row. TFLOPS and GB/s (1e9 bytes/s) per *package*; see ``per_device``."""

    key: str
    display: str
    vendor: str
    name_regex: str
    names: tuple[str, ...]
    sm_count: int | None
    compute_capability: str | None
    mem_min_gib: float | None
    mem_max_gib: float | None
    fallback: bool
    devices_per_package: int
    tflops: dict[str, float | None]
    mem_bw_gbs: float
    figures: str
    source_title: str
    source_url: str
    note: str

    def tflops_per_device(self, dtype: str) -> float | None:
        """Dense peak TFLOPS of one visible device for ``dtype`` (None when unsupported)."""
        value = self.tflops.get(dtype)
        return None if value is None else value / self.devices_per_package

    @property
    def mem_bw_bytes_per_s(self) -> float:
        """Peak memory bandwidth of one visible device, bytes/s."""
        return self.mem_bw_gbs * 1e9 / self.devices_per_package


@dataclass(frozen=True)
class DevicePeak:
    """What a device's throughput is measured against. ``how`` says how it was chosen:
    ``name``, ``sm_count+cc``, ``override`` or ``unknown``."""

    rank: int
    device: int
    device_name: str
    sku: str | None
    how: str
    tflops: dict[str, float | None]
    mem_bw_bytes_per_s: float | None
    source: str | None

    def peak_tflops(self, dtype: str | None) -> float | None:
        """Peak TFLOPS for an op dtype; unknown dtypes get None."""
        if dtype is None:
            return self.tflops.get("*")
        return self.tflops.get(dtype, self.tflops.get("*"))

    def to_json(self) -> dict[str, Any]:
        return {
            "rank": self.rank,
            "device": self.device,
            "device_name": self.device_name,
            "sku": self.sku,
            "how": self.how,
            "tflops": self.tflops,
            "mem_bw_bytes_per_s": self.mem_bw_bytes_per_s,
            "source": self.source,
        }


def _opt_float(text: str) -> float | None:
    text = text.strip()
    return float(text) if text else None


@cache
def peak_table() -> tuple[GpuPeak, ...]:
    """All rows of ``gpu_peaks.csv`` in file order."""
    raw = resources.files("traceforensics.data").joinpath("gpu_peaks.csv").read_text("utf-8")
    rows: list[GpuPeak] = []
    for rec in csv.DictReader(raw.splitlines()):
        rows.append(
            GpuPeak(
                key=rec["key"],
                display=rec["display"],
                vendor=rec["vendor"],
                name_regex=rec["name_regex"],
                names=tuple(n for n in rec["names"].split("|") if n),
                sm_count=int(rec["sm_count"]) if rec["sm_count"] else None,
                compute_capability=rec["compute_capability"] or None,
                mem_min_gib=_opt_float(rec["mem_min_gib"]),
                mem_max_gib=_opt_float(rec["mem_max_gib"]),
                fallback=rec["fallback"] == "yes",
                devices_per_package=int(rec["devices_per_package"] or 1),
                tflops={d: _opt_float(rec[d]) for d in DTYPES},
                mem_bw_gbs=float(rec["mem_bw_gbs"]),
                figures=rec["figures"],
                source_title=rec["source_title"],
                source_url=rec["source_url"],
                note=rec["note"],
            )
        )
    return tuple(rows)


@cache
def _token_regex(name_regex: str) -> re.Pattern[str]:
    """``name_regex`` as a whole token: no letter or digit right before or after the match
    ("B200" is not in "GB200", "A10" not in "A100" or "A10G")."""
    return re.compile(rf"(?<![A-Za-z0-9])(?:{name_regex})(?![A-Za-z0-9])", re.IGNORECASE)


def _name_matches(name: str) -> list[tuple[GpuPeak, bool]]:
    """``(row, exact)`` for every row whose regex occurs in ``name`` as a token, in file order;
    ``exact`` is False when a variant word follows each occurrence (``_VARIANT_AFTER``)."""
    text = " ".join(name.split())
    out: list[tuple[GpuPeak, bool]] = []
    for row in peak_table():
        ends = [m.end() for m in _token_regex(row.name_regex).finditer(text)]
        if ends:
            out.append((row, any(not _VARIANT_AFTER.match(text, e) for e in ends)))
    return out


def match_by_name(name: str) -> GpuPeak | None:
    """First row (file order) whose ``name_regex`` occurs in ``name`` as a whole token not
    followed by a variant word; whitespace collapsed, case ignored."""
    return next((row for row, exact in _name_matches(name) if exact), None)


def variant_of(name: str) -> GpuPeak | None:
    """The listed card ``name`` is an unlisted variant of ("NVIDIA GeForce RTX 4090 D" ->
    RTX 4090), None when the name matches a row exactly or no row at all."""
    found = _name_matches(name)
    if any(exact for _, exact in found):
        return None
    return found[0][0] if found else None


def match_by_shape(
    sm_count: int | None, compute_capability: str | None, memory_bytes: int | None
) -> GpuPeak | None:
    """Fallback: a ``fallback=yes`` row with this SM/CU count and compute capability, split by
    memory size when several share them (A100 40/80 GB, H100/H200)."""
    if sm_count is None or not compute_capability:
        return None
    cc = _norm_cc(compute_capability)
    found = [
        r
        for r in peak_table()
        if r.fallback and r.sm_count == sm_count and r.compute_capability == cc
    ]
    if len(found) > 1 and memory_bytes is not None:
        gib = memory_bytes / _GIB
        found = [
            r
            for r in found
            if (r.mem_min_gib is None or gib >= r.mem_min_gib)
            and (r.mem_max_gib is None or gib < r.mem_max_gib)
        ]
    return found[0] if len(found) == 1 else None


def _norm_cc(cc: str) -> str:
    parts = cc.strip().split(".")
    return f"{parts[0]}.{parts[1] if len(parts) > 1 else '0'}"


def resolve_device_peak(info: DeviceInfo, override_tflops: float | None = None) -> DevicePeak:
    """The peak one device is measured against (see module rules for the order)."""
    row = match_by_name(info.name)
    how = "name"
    if row is None and variant_of(info.name) is None:
        row = match_by_shape(info.sm_count, info.compute_capability, info.memory_bytes)
        how = "sm_count+cc"
    bw: float | None = row.mem_bw_bytes_per_s if row is not None else None
    if bw is None and info.memory_bandwidth_bytes_per_s:
        bw = float(info.memory_bandwidth_bytes_per_s)
    if override_tflops is not None:
        return DevicePeak(
            info.rank,
            info.device,
            info.name,
            row.key if row else None,
            "override",
            {"*": float(override_tflops)},
            bw,
            "user override (peak_tflops)",
        )
    if row is None:
        return DevicePeak(info.rank, info.device, info.name, None, "unknown", {}, bw, None)
    return DevicePeak(
        info.rank,
        info.device,
        info.name,
        row.key,
        how,
        {d: row.tflops_per_device(d) for d in DTYPES},
        bw,
        f"{row.source_title} <{row.source_url}>",
    )


def resolve_peaks(
    devices: list[DeviceInfo], override_tflops: float | None = None
) -> dict[tuple[int, int], DevicePeak]:
    """``(rank, device) -> DevicePeak`` for every device the trace describes."""
    return {(d.rank, d.device): resolve_device_peak(d, override_tflops) for d in devices}


def unknown_peak(rank: int, device: int, override_tflops: float | None = None) -> DevicePeak:
    """Peak of a device the trace does not describe: the override, else unknown."""
    if override_tflops is not None:
        return DevicePeak(
            rank,
            device,
            UNKNOWN_DEVICE,
            None,
            "override",
            {"*": float(override_tflops)},
            None,
            "override",
        )
    return DevicePeak(rank, device, UNKNOWN_DEVICE, None, "unknown", {}, None, None)
