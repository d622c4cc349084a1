"""The GPU peak table: sources, dense-only figures, name and SM-count mapping, override."""

from __future__ import annotations

import csv
import gzip
import json
import re
from importlib import resources

import pytest

from tests.conftest import TRACES, kineto_trace_files, nonempty
from traceforensics.analysis.kernels.peaks import (
    DTYPES,
    match_by_name,
    match_by_shape,
    peak_table,
    resolve_device_peak,
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
    for name in ("NVIDIA A10G", "AMD Radeon Graphics", "", "NVIDIA GeForce RTX 3090 Ti"):
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
