"""The GPU peak table: sources, dense-only figures, name and SM-count mapping, override."""

from __future__ import annotations

import csv
import gzip
import json
import re
from importlib import resources

import pytest

from tests.conftest import TRACES, kineto_trace_files, nonempty
from traceforensics.analysis.peaks import (
    DTYPES,
    match_by_name,
    match_by_shape,
    peak_table,
    resolve_device_peak,
    variant_of,
)
from traceforensics.model.session import DeviceInfo

REQUIRED = {
    "v100_sxm2",
    "v100_pcie",
    "v100_dgxs",
    "a100_sxm_40",
    "a100_sxm_80",
    "a100_pcie_40",
    "a100_pcie_80",
    "h100_sxm",
    "h100_pcie",
    "h200_sxm",
    "b200",
    "l4",
    "l40s",
    "a10",
    "t4",
    "rtx_3070_ti",
    "rtx_3090",
    "rtx_4090",
    "rtx_5000_ada",
    "rtx_5000_ada_laptop",
    "mi210",
    "mi250x",
    "mi300x",
    # issue 43: the GPUs people profile on
    *("rtx_2060", "rtx_2060_super", "rtx_2070", "rtx_2070_super", "rtx_2080"),
    *("rtx_2080_super", "rtx_2080_ti", "rtx_3050", "rtx_3060", "rtx_3060_ti", "rtx_3070"),
    *("rtx_3080", "rtx_3080_ti", "rtx_3090_ti", "rtx_4060", "rtx_4060_ti", "rtx_4070"),
    *("rtx_4070_super", "rtx_4070_ti", "rtx_4070_ti_super", "rtx_4080", "rtx_4080_super"),
    *("rtx_5060", "rtx_5060_ti", "rtx_5070", "rtx_5070_ti", "rtx_5080", "rtx_5090"),
    *("rtx_a2000", "rtx_a4000", "rtx_a4500", "rtx_a5000", "rtx_a5500", "rtx_a6000"),
    *("rtx_2000_ada", "rtx_4000_ada", "rtx_4000_sff_ada", "rtx_4500_ada", "rtx_6000_ada"),
    *("a30", "l40", "h800_sxm", "h800_pcie", "h20", "h200_nvl", "b300", "gb200"),
    *("mi325x", "mi355x"),
}


def _raw_rows() -> list[dict[str, str]]:
    text = resources.files("traceforensics.data").joinpath("gpu_peaks.csv").read_text("utf-8")
    return list(csv.DictReader(text.splitlines()))


def test_every_row_names_its_source() -> None:
    for row in nonempty(_raw_rows()):
        assert row["source_title"].strip(), row["key"]
        assert re.match(r"^https://[\w.-]+\.[a-z]{2,}/", row["source_url"]), row["key"]


def test_every_row_is_dense() -> None:
    # the table has a figures column that can only say dense; sparse figures never enter
    rows = _raw_rows()
    assert {r["figures"] for r in rows} == {"dense"}
    assert {r.figures for r in peak_table()} == {"dense"}


def test_dense_ratios_hold() -> None:
    """Dense tensor rates double per halving of precision on every GPU listed: FP8 = 2 x FP16
    and BF16 = 2 x TF32. A with-sparsity figure mixed into one column breaks the ratio."""
    checked = 0
    for row in peak_table():
        t = row.tflops
        if t["fp16"] is not None and t["bf16"] is not None:
            assert t["fp16"] == t["bf16"], row.key
        if t["fp8"] is not None and t["fp16"] is not None:
            assert t["fp8"] / t["fp16"] == pytest.approx(2.0, rel=0.03), row.key
            checked += 1
        if t["bf16"] is not None and t["tf32"] is not None:
            assert t["bf16"] / t["tf32"] == pytest.approx(2.0, rel=0.03), row.key
            checked += 1
        # tensor rates are at least the FP32 rate and never absurd multiples of it
        if t["fp16"] is not None and t["fp32"] is not None:
            assert 1.0 <= t["fp16"] / t["fp32"] <= 32.0, row.key
    assert checked >= 20


def test_known_dense_values_not_sparse() -> None:
    # H100 SXM: datasheet prints 1,979 BF16 "with sparsity"; the dense value is half
    h100 = match_by_name("NVIDIA H100 80GB HBM3")
    assert h100 is not None and h100.tflops["bf16"] == pytest.approx(1979 / 2, rel=0.001)
    b200 = match_by_name("NVIDIA B200")
    assert b200 is not None and b200.tflops["fp8"] == pytest.approx(9000 / 2)
    l4 = match_by_name("NVIDIA L4")
    assert l4 is not None and l4.tflops["bf16"] == pytest.approx(242 / 2)


def test_required_gpus_present() -> None:
    assert {r.key for r in peak_table()} >= REQUIRED
    assert all(r.mem_bw_gbs > 0 for r in peak_table())


@pytest.mark.parametrize(
    ("name", "key"),
    [
        ("NVIDIA H100 80GB HBM3", "h100_sxm"),
        ("NVIDIA H100 PCIe", "h100_pcie"),
        ("NVIDIA H200", "h200_sxm"),
        ("NVIDIA A100-PG509-200", "a100_sxm_40"),
        ("NVIDIA A100-SXM4-80GB", "a100_sxm_80"),
        ("NVIDIA A100 80GB PCIe", "a100_pcie_80"),
        ("Tesla V100-DGXS-32GB", "v100_dgxs"),
        ("Tesla V100-SXM2-32GB", "v100_sxm2"),
        ("Tesla V100-PCIE-16GB", "v100_pcie"),
        ("NVIDIA B200", "b200"),
        ("NVIDIA L4", "l4"),
        ("NVIDIA L40S", "l40s"),
        ("NVIDIA A10", "a10"),
        ("Tesla T4", "t4"),
        ("NVIDIA GeForce RTX 3090", "rtx_3090"),
        ("NVIDIA GeForce RTX 3070 Ti", "rtx_3070_ti"),
        ("NVIDIA GeForce RTX 4090", "rtx_4090"),
        ("NVIDIA RTX 5000 Ada Generation", "rtx_5000_ada"),
        ("NVIDIA RTX 5000 Ada Generation Laptop GPU", "rtx_5000_ada_laptop"),
        ("AMD Instinct MI300X VF", "mi300x"),
        ("AMD Instinct MI210", "mi210"),
        ("AMD Instinct MI250X", "mi250x"),
    ],
)
def test_name_mapping(name: str, key: str) -> None:
    row = match_by_name(name)
    assert row is not None and row.key == key


def test_names_that_must_not_match() -> None:
    assert match_by_name("NVIDIA A100-SXM4-40GB").key == "a100_sxm_40"  # type: ignore[union-attr]
    # a Ti is its own SKU: never the plain card's row
    assert match_by_name("NVIDIA GeForce RTX 3090 Ti").key == "rtx_3090_ti"  # type: ignore[union-attr]
    for name in ("NVIDIA A10G", "AMD Radeon Graphics", "", "Quadro RTX 6000", "NVIDIA A100"):
        assert match_by_name(name) is None, name


def test_fallback_on_sm_count_and_cc() -> None:
    gib = 1 << 30
    assert match_by_shape(304, "9.4", 192 * gib).key == "mi300x"  # type: ignore[union-attr]
    assert match_by_shape(132, "9.0", 80 * gib).key == "h100_sxm"  # type: ignore[union-attr]
    assert match_by_shape(132, "9.0", 141 * gib).key == "h200_sxm"  # type: ignore[union-attr]
    assert match_by_shape(108, "8.0", 40 * gib).key == "a100_sxm_40"  # type: ignore[union-attr]
    assert match_by_shape(108, "8.0", 80 * gib).key == "a100_sxm_80"  # type: ignore[union-attr]
    assert match_by_shape(148, "10.0", None).key == "b200"  # type: ignore[union-attr]
    assert match_by_shape(999, "9.0", None) is None
    # two candidates and no memory size to split them: refuse rather than guess
    assert match_by_shape(132, "9.0", None) is None


def test_per_device_split_and_override() -> None:
    mi250x = match_by_name("AMD Instinct MI250X")
    assert mi250x is not None
    assert mi250x.tflops_per_device("bf16") == pytest.approx(383 / 2)
    info = DeviceInfo(rank=0, device=0, name="NVIDIA H100 80GB HBM3")
    peak = resolve_device_peak(info)
    assert peak.how == "name" and peak.peak_tflops("bf16") == pytest.approx(989.4)
    assert peak.peak_tflops("fp32") == pytest.approx(67)
    assert peak.mem_bw_bytes_per_s == pytest.approx(3.35e12)
    over = resolve_device_peak(info, override_tflops=123.0)
    assert over.how == "override"
    assert {over.peak_tflops(d) for d in DTYPES} == {123.0}
    unknown = resolve_device_peak(DeviceInfo(rank=0, device=0, name="Mystery GPU"))
    assert unknown.how == "unknown" and unknown.peak_tflops("bf16") is None


@pytest.mark.parametrize("rel", [f for f in kineto_trace_files() if "cpu_only" not in f])
def test_real_trace_devices_resolve(rel: str) -> None:
    """Every GPU named in a shared Kineto trace maps to a table row (by name or fallback)."""
    with gzip.open(TRACES / rel) as fh:
        props = json.load(fh).get("deviceProperties") or []
    for p in props:  # some traces (job128) record no deviceProperties
        cc = f"{p.get('computeMajor')}.{p.get('computeMinor')}"
        info = DeviceInfo(
            0, int(p["id"]), p.get("name", ""), p.get("numSms"), cc, p.get("totalGlobalMem")
        )
        assert resolve_device_peak(info).sku is not None, p.get("name")


def test_every_row_resolves_its_own_names() -> None:
    """Each row lists the names drivers report for it; every one resolves to that row, by name
    alone (no SM count to fall back on), whatever the spacing or case."""
    for row in peak_table():
        assert row.names, row.key
        for name in row.names:
            for spelled in (name, name.upper(), f"  {name.replace(' ', '  ')} "):
                got = match_by_name(spelled)
                assert got is not None and got.key == row.key, (spelled, got and got.key)
            peak = resolve_device_peak(DeviceInfo(rank=0, device=0, name=name))
            assert (peak.sku, peak.how) == (row.key, "name"), name


@pytest.mark.parametrize(
    ("name", "key"),
    [
        ("NVIDIA GeForce RTX 2080 Ti", "rtx_2080_ti"),
        ("Tesla T4", "t4"),
        ("NVIDIA A100-SXM4-80GB", "a100_sxm_80"),
        ("NVIDIA A100-PCIE-40GB", "a100_pcie_40"),
        ("NVIDIA H100 80GB HBM3", "h100_sxm"),
        ("NVIDIA H100 PCIe", "h100_pcie"),
        ("NVIDIA H800", "h800_sxm"),
        ("NVIDIA H800 PCIe", "h800_pcie"),
        ("NVIDIA H20", "h20"),
        ("NVIDIA H200", "h200_sxm"),
        ("NVIDIA H200 NVL", "h200_nvl"),
        ("NVIDIA B200", "b200"),
        ("NVIDIA B300", "b300"),
        ("NVIDIA GB200", "gb200"),
        ("AMD Instinct MI300X VF", "mi300x"),
        ("AMD Instinct MI325X", "mi325x"),
        ("AMD Instinct MI355X", "mi355x"),
        ("NVIDIA RTX A6000", "rtx_a6000"),
        ("NVIDIA RTX 6000 Ada Generation", "rtx_6000_ada"),
        ("NVIDIA RTX 4000 SFF Ada Generation", "rtx_4000_sff_ada"),
        ("NVIDIA L40S", "l40s"),
        ("NVIDIA L40", "l40"),
        ("NVIDIA GeForce RTX 4090", "rtx_4090"),
        ("NVIDIA GeForce RTX 4070 Ti SUPER", "rtx_4070_ti_super"),
        ("NVIDIA GeForce RTX 4070 Ti", "rtx_4070_ti"),
        ("NVIDIA GeForce RTX 4070 SUPER", "rtx_4070_super"),
        ("NVIDIA GeForce RTX 5090", "rtx_5090"),
        ("NVIDIA A30", "a30"),
    ],
)
def test_real_device_name_strings(name: str, key: str) -> None:
    row = match_by_name(name)
    assert row is not None and row.key == key, (name, row and row.key)


@pytest.mark.parametrize(
    ("name", "base", "sms", "cc"),
    [
        # another SKU with fewer SMs (China), or laptop clocks: not the desktop card's peak
        ("NVIDIA GeForce RTX 4090 D", "rtx_4090", 114, "8.9"),
        ("NVIDIA GeForce RTX 4090 Laptop GPU", "rtx_4090", 76, "8.9"),
        # 48 SMs at 8.6 is the RTX 3070 Ti's shape: a fallback would pick that desktop card
        ("NVIDIA GeForce RTX 3080 Laptop GPU", "rtx_3080", 48, "8.6"),
        ("NVIDIA GeForce RTX 2080 with Max-Q Design", "rtx_2080", 46, "7.5"),
        # a MIG slice has a fraction of the SMs: the whole GPU's peak would be 7x too high
        ("NVIDIA A100-SXM4-40GB MIG 1g.5gb", "a100_sxm_40", 14, "8.0"),
        ("NVIDIA H100 80GB HBM3 MIG 3g.40gb", "h100_sxm", 60, "9.0"),
    ],
)
def test_near_miss_names_are_unknown(name: str, base: str, sms: int, cc: str) -> None:
    """A listed card's variant is not that card (documented in docs/kernels.md): no name match,
    and no SM-count guess either, so MFU is unknown until --peak-tflops is given."""
    assert match_by_name(name) is None
    assert variant_of(name).key == base  # type: ignore[union-attr]
    peak = resolve_device_peak(DeviceInfo(0, 0, name, sms, cc, None))
    assert (peak.sku, peak.how, peak.peak_tflops("bf16")) == (None, "unknown", None)
    assert variant_of(match_by_name("NVIDIA GeForce RTX 4090").names[0]) is None  # type: ignore[union-attr]


def test_fallback_rows_never_share_a_shape() -> None:
    """Two ``fallback=yes`` rows with one SM count and capability must be split by memory size
    (disjoint ranges), else a shape lookup could not choose between them."""
    rows = [r for r in peak_table() if r.fallback]
    for i, a in enumerate(rows):
        for b in rows[i + 1 :]:
            if (a.sm_count, a.compute_capability) != (b.sm_count, b.compute_capability):
                continue
            lo_a, hi_a = a.mem_min_gib or 0.0, a.mem_max_gib or float("inf")
            lo_b, hi_b = b.mem_min_gib or 0.0, b.mem_max_gib or float("inf")
            assert hi_a <= lo_b or hi_b <= lo_a, (a.key, b.key)
    gib = 1 << 30
    assert match_by_shape(304, "9.4", 256 * gib).key == "mi325x"  # type: ignore[union-attr]
    assert match_by_shape(68, "7.5", 11 * gib).key == "rtx_2080_ti"  # type: ignore[union-attr]


def test_derived_rows_agree_with_their_arithmetic() -> None:
    """Rows derived from the cards' specifications state the inputs in their note; recompute
    FP32 = cores x 2 x boost clock, bandwidth = Gbps x bus width / 8 and the Blackwell GeForce
    FP8 = AI TOPS / 8 from those inputs, independently of the stored figures."""
    cores = re.compile(r"(\d+) cores at (\d+) MHz")
    bus = re.compile(r"([\d.]+) Gbps x (\d+)-bit")
    tops = re.compile(r"(\d+) AI TOPS")
    checked = 0
    for row in peak_table():
        if m := cores.search(row.note):
            fp32 = int(m[1]) * 2 * int(m[2]) / 1e6
            assert row.tflops["fp32"] == pytest.approx(fp32, rel=0.01), row.key
            checked += 1
        if m := bus.search(row.note):
            assert row.mem_bw_gbs == pytest.approx(float(m[1]) * int(m[2]) / 8, rel=0.001), row.key
        if row.compute_capability == "12.0" and (m := tops.search(row.note)):
            assert row.tflops["fp8"] == pytest.approx(int(m[1]) / 8, rel=0.01), row.key
    assert checked >= 20


def test_turing_and_blackwell_values() -> None:
    """Spot values from the vendors' documents (dense, FP32 accumulate)."""
    ti = match_by_name("NVIDIA GeForce RTX 2080 Ti")
    assert ti is not None and (ti.tflops["fp16"], ti.tflops["fp32"], ti.mem_bw_gbs) == (
        53.8,
        13.4,
        616,
    )
    assert ti.tflops["bf16"] is None and ti.tflops["tf32"] is None  # no BF16/TF32 on Turing
    b300 = match_by_name("NVIDIA B300")
    assert b300 is not None and b300.tflops["bf16"] == pytest.approx(4500 / 2)
    gb200 = match_by_name("NVIDIA GB200")
    assert gb200 is not None and gb200.tflops["fp8"] == pytest.approx(20_000 / 4)
    mi355 = match_by_name("AMD Instinct MI355X")
    assert mi355 is not None and mi355.tflops["fp8"] == pytest.approx(5033.2)
