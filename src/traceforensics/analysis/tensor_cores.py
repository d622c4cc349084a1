"""What a kernel's name says about its math: the dtype of a GEMM/convolution kernel, whether it is
a memory-layout conversion, and which chip a kernel was built for. No shapes needed.

Rules, matched once per distinct name (a trace holds a few thousand names; Python ``re``, which
the ordered classes need):

- **GEMM/convolution kernel**: the name matches ``MATMUL_RE`` (cuBLAS ``*gemm*``, ``xmma``,
  ``nvjet``, rocBLAS/hipBLASLt Tensile ``Cijk_*``, cuDNN ``scudnn``/``convolve``/``fprop``/
  ``dgrad``/``wgrad``, MIOpen ``igemm``, CUTLASS ``tensorop``/``s1688``/``h884``...) and is not a
  layout conversion nor FBGEMM's (``NOT_MATMUL_RE``).
- **Its dtype**, first class that matches (``DTYPE_CLASSES``): ``fp8``, ``int8``, ``bf16``,
  ``fp16``, ``tf32`` (tensor-core classes), then ``fp32`` (no tensor cores: ``sgemm``,
  ``scudnn``, ``cgemm``, ``simt``, ``f32f32_f32f32``, cuDNN's ``engine<float``, Tensile's
  ``_SB_``/``_S_`` single-precision kernels), else ``other`` (the name does not say: cuBLASLt
  ``nvjet_*``). ``s1688gemm``/``tensorop_s`` without a 16-bit token is TF32 (CUTLASS's name for
  FP32 data on TF32 tensor cores).
- **Layout conversion** (``LAYOUT_RE``): cuDNN ``nchwToNhwc``/``nhwcToNchw`` kernels (any
  namespace), MIOpen ``batched_transpose_*`` and ``transpose_NCHW2CNHW``-style kernels: the
  transposes a convolution in the other memory format pays for (``channels_last`` removes them).
- **Architecture hint** (``ARCH_HINTS``): the ``ampere_``/``sm80_``... prefix cuBLAS/cuDNN put on
  their kernels, the compute capability they were built for; used only when the trace does not
  describe its device.
"""

from __future__ import annotations

import re
from typing import Final

import polars as pl

#: GEMM or convolution kernels (before the layout test, which wins).
MATMUL_RE: Final = re.compile(
    r"gemm|xmma|nvjet|^Cijk_|scudnn|convolve|fprop|dgrad|wgrad|igemm|conv_?(fwd|bwd|wrw)|"
    r"s1688|s16816|h884|h1688|hmma|tensorop|wmma",
    re.IGNORECASE,
)
#: Names that match ``MATMUL_RE`` but are no GEMM/convolution (FBGEMM's embedding kernels).
NOT_MATMUL_RE: Final = re.compile(r"fbgemm", re.IGNORECASE)
#: Tensor-core dtype classes, in match order.
TENSOR_DTYPES: Final[tuple[str, ...]] = ("fp8", "int8", "bf16", "fp16", "tf32")
#: ``(dtype class, pattern)``; the first that matches names a GEMM/conv kernel's dtype.
DTYPE_CLASSES: Final[tuple[tuple[str, re.Pattern[str]], ...]] = (
    ("fp8", re.compile(r"e4m3|e5m2|fp8|_f8", re.IGNORECASE)),
    ("int8", re.compile(r"int8|i8i8|imma|_i8", re.IGNORECASE)),
    ("bf16", re.compile(r"bf16|bfloat16|_BBS_|_B_BS_|_BB_", re.IGNORECASE)),
    (
        "fp16",
        re.compile(r"fp16|f16f16|h884|h1688|h16816|hgemm|half|_HHS_|_HB_|_HH_", re.IGNORECASE),
    ),
    ("tf32", re.compile(r"tf32|xf32|s1688|tensorop_s", re.IGNORECASE)),
    (
        "fp32",
        re.compile(
            r"sgemm|scudnn|cgemm|simt|f32f32_f32f32|engine<float|^Cijk_\w*?_S(B)?_", re.IGNORECASE
        ),
    ),
)
#: Memory-layout conversion kernels (cuDNN, MIOpen).
LAYOUT_RE: Final = re.compile(
    r"nchwToNhwc|nhwcToNchw|nchw2nhwc|nhwc2nchw|batched_transpose_|transpose_NCHW2CNHW|"
    r"transpose_CNHW2NCHW|transpose_NHWC2NCHW|transpose_NCHW2NHWC",
    re.IGNORECASE,
)
#: ``(pattern, compute capability)``: the chip a cuBLAS/cuDNN kernel name was built for.
ARCH_HINTS: Final[tuple[tuple[re.Pattern[str], str], ...]] = (
    (re.compile(r"^(cudnn_)?(infer_)?(hopper|sm9\d)_", re.IGNORECASE), "9.0"),
    (re.compile(r"^(cudnn_)?(infer_)?(ampere|sm8\d)_", re.IGNORECASE), "8.0"),
    (re.compile(r"^(cudnn_)?(infer_)?(volta|turing|sm7\d)_", re.IGNORECASE), "7.0"),
)


def matmul_dtype(name: str) -> str | None:
    """The dtype class of a GEMM/convolution kernel name (``DTYPE_CLASSES``, ``other`` when the
    name does not say), None for any other kernel (layout conversions included)."""
    if LAYOUT_RE.search(name) or not MATMUL_RE.search(name) or NOT_MATMUL_RE.search(name):
        return None
    return next((dtype for dtype, rx in DTYPE_CLASSES if rx.search(name)), "other")


def is_layout_conversion(name: str) -> bool:
    """Whether the kernel converts a tensor between memory layouts (``LAYOUT_RE``)."""
    return LAYOUT_RE.search(name) is not None


def arch_hint(name: str) -> str | None:
    """The compute capability a kernel name's prefix says it was built for, or None."""
    return next((cc for rx, cc in ARCH_HINTS if rx.search(name)), None)


def name_classes(names: pl.Series) -> pl.DataFrame:
    """``name`` (text), ``matmul_dtype`` (``matmul_dtype``, null for other kernels) and
    ``layout`` (bool) for each distinct name of ``names``."""
    distinct = names.cast(pl.String).drop_nulls().unique().sort().to_list()
    return pl.DataFrame(
        {
            "name": distinct,
            "matmul_dtype": [matmul_dtype(n) for n in distinct],
            "layout": [is_layout_conversion(n) for n in distinct],
        },
        schema={"name": pl.String, "matmul_dtype": pl.String, "layout": pl.Boolean},
    )


__all__ = [
    "DTYPE_CLASSES",
    "LAYOUT_RE",
    "MATMUL_RE",
    "TENSOR_DTYPES",
    "arch_hint",
    "is_layout_conversion",
    "matmul_dtype",
    "name_classes",
]
