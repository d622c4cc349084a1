"""Issue 44 items 2 and 9: the facts read from a trace's names and devices, and the one table of
remedy preconditions (no advice the trace already shows applied; hardware-aware wording)."""

from __future__ import annotations

import polars as pl
import pytest

from traceforensics.analysis.facts import TraceFacts, facts_from
from traceforensics.analysis.findings.preconditions import RULES, apply, checked
from traceforensics.analysis.findings.remedies import GENERIC, remedy
from traceforensics.analysis.findings.results import CATEGORIES, Finding
from traceforensics.analysis.idle.causes import CAUSES
from traceforensics.analysis.program import Program, program_from
from traceforensics.analysis.tensor_cores import is_layout_conversion, matmul_dtype
from traceforensics.model.session import DeviceInfo, TraceMeta

A100 = DeviceInfo(0, 0, "NVIDIA A100-SXM4-80GB", 108, "8.0", vendor="nvidia")
V100 = DeviceInfo(0, 0, "Tesla V100-SXM2-32GB", 80, "7.0", vendor="nvidia")
RTX3070TI = DeviceInfo(0, 0, "NVIDIA GeForce RTX 3070 Ti", 48, "8.6", vendor="nvidia")
MI210 = DeviceInfo(0, 0, "AMD Instinct MI210", 104, "9.0", vendor="amd")


def _names(rows: list[tuple[str, str, int]]) -> pl.DataFrame:
    return pl.DataFrame(
        rows, schema={"kind": pl.String, "name": pl.String, "len": pl.UInt32}, orient="row"
    )


def _program(rows: list[tuple[str, str, int]], device: DeviceInfo = A100) -> Program:
    meta = TraceMeta(source_format="kineto", devices=[device])
    return program_from(_names([("cpu_op", "aten::mm", 1), *rows]), meta)


def _finding(category: str, program: Program, prefix: str = "") -> Finding:
    return Finding(category, 0, 0, 1_000, 0.5, f"GPU idle: {category}", prefix
                   + remedy(category, program), "medium")  # fmt: skip


@pytest.mark.parametrize(
    ("name", "dtype"),
    [
        ("ampere_sgemm_128x64_tn", "fp32"),
        ("volta_scudnn_128x128_stridedB_splitK_medium_nn_v1", "fp32"),
        ("void implicit_convolve_sgemm<float, float, 1024, 6, 7>", "fp32"),
        ("void cutlass::Kernel2<cutlass_80_simt_sgemm_128x64_8x5_nt_align1>", "fp32"),
        ("Cijk_Ailk_Bjlk_SB_Bias_AS_SAV_UserArgs_MT64x16x16", "fp32"),
        ("sm80_xmma_fprop_implicit_gemm_indexed_tf32f32_tf32f32_f32_nhwckrsc_nchw", "tf32"),
        ("void cutlass::Kernel<cutlass_80_tensorop_s1688gemm_128x64_32x6_nt_align1>", "tf32"),
        ("sm90_xmma_gemm_bf16bf16_bf16f32_f32_tn_n_tilesize128x128x64", "bf16"),
        ("Cijk_Alik_Bljk_BBS_BH_Bias_HA_S_SAV_UserArgs_MT16x16x256", "bf16"),
        ("ampere_fp16_s16816gemm_fp16_128x128_ldg8_f2f_stages_32x5_nn", "fp16"),
        ("volta_h884gemm_64x64_ldg8_nn", "fp16"),
        ("sm90_xmma_gemm_e4m3e4m3_bf16f32_f32_tn_n", "fp8"),
        ("nvjet_tst_192x192_64x3_1x2_h_bz_coopB_NTN", "other"),
        ("void cudnn::ops::nchwToNhwcKernel<float, float, float, false, true>", None),
        ("void fbgemm_gpu::permute_2D_data_kernel<false, int, int>", None),
        (
            "void at::native::vectorized_elementwise_kernel<4, at::native::FillFunctor<float> >",
            None,
        ),
    ],
)
def test_matmul_dtype_from_the_kernel_name(name: str, dtype: str | None) -> None:
    assert matmul_dtype(name) == dtype


def test_layout_conversion_names() -> None:
    assert is_layout_conversion("void cudnn::ops::nhwcToNchwKernel<float, float, float>")
    assert is_layout_conversion("void cudnn::engines_precompiled::nchwToNhwcKernel<__half>")
    assert is_layout_conversion("batched_transpose_16x64_pack_1x4_ediv_1x2_half")
    assert not is_layout_conversion("sm80_xmma_fprop_implicit_gemm_tf32f32_tf32f32_f32_nhwckrsc")


def test_facts_from_names() -> None:
    rows = [
        ("cpu_op", "enumerate(DataLoader)#_MultiProcessingDataLoaderIter.__next__", 4),
        ("cuda_api", "cudaGraphLaunch", 3),
        ("memcpy", "Memcpy HtoD (Pinned -> Device)", 5),
        ("kernel", "void at::native::multi_tensor_apply_kernel<TensorListMetadata<4> >", 2),
        ("kernel", "triton_poi_fused_add_0", 7),
        ("kernel", "ampere_sgemm_128x64_tn", 3),
        ("kernel", "sm80_xmma_gemm_bf16bf16_bf16f32_f32_tn_n", 5),
        ("kernel", "void cudnn::ops::nchwToNhwcKernel<float>", 6),
    ]
    f = _program(rows).facts
    assert f.loader == "multiprocess" and f.graph_replays == 3
    assert (f.pinned_copies, f.pageable_copies, f.fused_optimizer) == (5, 0, 2)
    assert f.matmul_rows == {"fp32": 3, "bf16": 5} and f.layout_rows == 6
    assert f.compiled_kernels == 7 and f.kernel_rows == 23 and f.mostly_compiled
    assert f.chip.tensor_dtypes == {"tf32", "fp16", "bf16"} and f.chip.tf32_gain
    empty = facts_from(_names([]), TraceMeta(source_format="nsys"))
    assert empty == TraceFacts() and not empty.chip.known


def test_chip_facts_follow_the_peak_table() -> None:
    v100 = _program([], V100).facts.chip
    assert v100.tensor_dtypes == {"fp16"}
    geforce = _program([], RTX3070TI).facts.chip
    assert geforce.has("tf32") and geforce.tf32_gain is False  # TF32 at the FP32 rate
    mi210 = _program([], MI210).facts.chip
    assert mi210.vendor == "amd" and mi210.tensor_dtypes == {"fp16", "bf16"}
    # no device description: the oldest architecture the kernel names were built for
    meta = TraceMeta(source_format="nsys")
    hinted = program_from(_names([("kernel", "volta_sgemm_128x64_nn", 1)]), meta).facts.chip
    assert hinted.known and hinted.tensor_dtypes == {"fp16"}


def test_tf32_gemms_get_no_tf32_advice() -> None:
    """VGG13 on an A100: every GEMM/conv kernel already TF32."""
    p = _program([("kernel", "sm80_xmma_fprop_implicit_gemm_tf32f32_tf32f32_f32_nhwc", 9)])
    f = apply(_finding("kernel_efficiency", p), p)
    assert "tf32" not in f.remedy.lower() and "bf16" not in f.remedy.lower()
    assert "already run on tensor cores (tf32)" in f.title
    assert f.figures["precondition"] == "matmuls_on_tensor_cores"
    assert apply(f, p) == f  # once is enough


def test_composed_remedy_keeps_its_other_parts() -> None:
    p = _program([("kernel", "sm90_xmma_gemm_bf16bf16_bf16f32_f32_tn_n", 9)])
    f = apply(_finding("kernel_efficiency", p, prefix="use fused attention; then "), p)
    assert f.remedy.startswith("use fused attention; then aligned shapes")


@pytest.mark.parametrize("category", ["kernel_efficiency", "fp32_matmul"])
def test_v100_wording_has_no_bf16_or_tf32(category: str) -> None:
    p = _program([("kernel", "volta_sgemm_128x64_nn", 9)], V100)
    text, note, rule = checked(category, p)
    assert rule == "fp16_only_chip" and "float16" in text and "GradScaler" in text
    assert "bfloat16" not in text and "allow_tf32" not in text and "channels_last" in text
    assert note is not None and "fp16 tensor cores only" in note


def test_amd_and_geforce_wording() -> None:
    mi = _program([("kernel", "Cijk_Ailk_Bjlk_SB_Bias", 9)], MI210)
    text, note, _ = checked("fp32_matmul", mi)
    assert "bfloat16" in text and "set_float32_matmul_precision" not in text
    hip = Program("hip", "amd", "", mi.facts)
    text, note, _ = checked("fp32_matmul", hip)
    assert "matrix cores" in text and "torch" not in text
    geforce = _program([("kernel", "ampere_sgemm_128x64_tn", 9)], RTX3070TI)
    text, note, _ = checked("fp32_matmul", geforce)
    assert "bfloat16" in text and note == "TF32 is absent or no faster than FP32 on this GPU"


def test_launch_remedy_preconditions() -> None:
    graphs = _program([("cuda_api", "cudaGraphLaunch", 2)])
    text, note, rule = checked("launch_overhead", graphs)
    assert rule == "graph_replay" and "CUDA graph" not in text and "fewer, larger" in text
    assert note == "the step is already replayed as a graph (cudaGraphLaunch)"
    fused = _program([("kernel", "void at::native::multi_tensor_apply_kernel<4>", 2)])
    text, note, rule = checked("launch_overhead", fused)
    assert "foreach" not in text and "CUDA graphs" in text and note == ""
    plain = _program([])
    assert checked("launch_overhead", plain) == (remedy("launch_overhead", plain), None, None)


def test_pinned_copies_are_not_told_to_pin() -> None:
    p = _program([("memcpy", "Memcpy HtoD (Pinned -> Device)", 9)])
    f = apply(_finding("memcpy", p), p)
    assert "pin_memory" not in f.remedy and "non_blocking" in f.remedy
    mixed = _program([("memcpy", "Memcpy HtoD (Pinned -> Device)", 9),
                      ("memcpy", "Memcpy HtoD (Pageable -> Device)", 1)])  # fmt: skip
    assert "pin_memory=True" in apply(_finding("memcpy", mixed), mixed).remedy


def test_rules_name_known_categories_and_gpu_pickup_is_tolerated() -> None:
    assert set(GENERIC) == set(CATEGORIES)
    assert {r.category for r in RULES} <= set(CATEGORIES) | {"gpu_pickup"}
    if "gpu_pickup" in CAUSES:  # once the idle pass has the cause, it has a remedy
        assert "fewer, larger kernels" in GENERIC["gpu_pickup"]
