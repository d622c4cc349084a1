"""FLOPs and bytes of one framework op from its recorded shapes, dtypes and concrete inputs.

Inputs are what Kineto records with ``record_shapes=True`` (and what the nsys ingester maps
PyTorch NVTX ranges onto): ``Input Dims`` (one list per argument; ``[]`` for non-tensors),
``Input type`` (``float``, ``c10::BFloat16``, ``Scalar``, ...), ``Concrete Inputs`` (the text of
scalar / int-list arguments, ``""`` for tensors).

Rules (a FLOP is one multiply or one add; a fused multiply-add is 2):

- ``mm`` [M,K]x[K,N]: 2MKN.  ``bmm``/``baddbmm`` [B,M,K]x[B,K,N]: 2BMKN.
- ``addmm(bias, m1, m2)``: 2MKN. **The bias add is not counted** (it runs in the GEMM epilogue;
  same rule as PyTorch's profiler ``with_flops`` and ``torch.utils.flop_counter``); its bytes
  are counted.
- ``matmul``: broadcasting batch x 2MKN (1-D operands get M=1 / N=1). ``linear(x[...,K],
  w[N,K], b)``: 2 x prod(x[:-1]) x K x N.
- convolution (``conv1d/2d/3d``, ``convolution``, ``_convolution``, ``cudnn_convolution``, and
  transposed forms; the rules live in ``conv_flops``): 2 x numel(output) x prod(weight[1:])
  (weight[1] is C_in/groups, so groups are built in); the output spatial size is
  ``floor((in + 2p - d(k-1) - 1)/s) + 1`` from the stride/padding/dilation in Concrete Inputs.
  Without them (PyTorch < 2.0 traces) the output shape is taken from the autograd backward node
  with the same Sequence number (its first input is grad_output, shaped like the output;
  ``throughput.op_costs``); failing both, the FLOPs are unknown (never guessed).
  ``convolution_backward``: forward FLOPs x (number of True in output_mask[:2]);
  ``cudnn_convolution_backward_input``: 2 x numel(grad_out) x prod(weight[1:]).
- attention forward (``scaled_dot_product_attention``, ``_scaled_dot_product_{flash,efficient,
  cudnn}_attention``, ``_flash_attention_forward``, ``_efficient_attention_forward``):
  2BH·Lq·Lk·E + 2BH·Lq·Lk·Ev (QKᵀ and PV). Backward: 2BH·Lq·Lk·(3E + 2Ev) (score recompute,
  dV, dP, dQ, dK). Causal masks are not discounted (PyTorch ``FlopCounterMode`` convention).
- elementwise families (``add``, ``mul``, ``relu``, ``gelu``, ``*_backward`` activations, ...):
  1 FLOP per output element (output = broadcast of the tensor inputs).
- bytes = sum of tensor inputs + the output, each numel x itemsize of its dtype.
- dtype of the op = dtype of its first floating-point tensor input.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import dataclass
from typing import Final

import orjson

from traceforensics.analysis.kernels.conv_flops import conv_flops, numel

#: ``Input type`` text -> (dtype id used by the peak table, bytes per element).
DTYPE_OF: Final[dict[str, tuple[str, int]]] = {
    "float": ("fp32", 4),
    "double": ("fp64", 8),
    "c10::Half": ("fp16", 2),
    "c10::BFloat16": ("bf16", 2),
    "c10::Float8_e4m3fn": ("fp8", 1),
    "c10::Float8_e5m2": ("fp8", 1),
    "c10::Float8_e4m3fnuz": ("fp8", 1),
    "c10::Float8_e5m2fnuz": ("fp8", 1),
}
#: Non-float tensors: itemsize only (they count for bytes, never for the op dtype).
INT_ITEMSIZE: Final[dict[str, int]] = {
    "long int": 8,
    "int": 4,
    "short int": 2,
    "signed char": 1,
    "unsigned char": 1,
    "bool": 1,
}

GEMM_OPS: Final = frozenset(
    {"mm", "addmm", "bmm", "baddbmm", "matmul", "linear", "_addmm_activation"}
)
CONV_FWD: Final = frozenset(
    {
        "conv1d",
        "conv2d",
        "conv3d",
        "convolution",
        "_convolution",
        "cudnn_convolution",
        "conv_transpose1d",
        "conv_transpose2d",
        "conv_transpose3d",
        "cudnn_convolution_transpose",
        "miopen_convolution",
    }
)
ATTN_FWD: Final = frozenset(
    {
        "scaled_dot_product_attention",
        "_scaled_dot_product_flash_attention",
        "_scaled_dot_product_efficient_attention",
        "_scaled_dot_product_cudnn_attention",
        "_scaled_dot_product_flash_attention_for_cpu",
        "_flash_attention_forward",
        "_efficient_attention_forward",
    }
)
ATTN_BWD: Final = frozenset(
    {
        "_scaled_dot_product_flash_attention_backward",
        "_scaled_dot_product_efficient_attention_backward",
        "_scaled_dot_product_cudnn_attention_backward",
        "_flash_attention_backward",
        "_efficient_attention_backward",
    }
)
CONV_BWD: Final = frozenset(
    {
        "convolution_backward",
        "cudnn_convolution_backward_input",
        "cudnn_convolution_backward_weight",
        "miopen_convolution_backward_weight",
    }
)
#: Layout [B, L, H, E] instead of [B, H, L, E].
_BLHE: Final = frozenset(
    {
        "_flash_attention_forward",
        "_efficient_attention_forward",
        "_flash_attention_backward",
        "_efficient_attention_backward",
    }
)
ELEMENTWISE: Final = frozenset(
    {
        "add",
        "sub",
        "mul",
        "div",
        "rsub",
        "neg",
        "abs",
        "exp",
        "log",
        "sqrt",
        "rsqrt",
        "pow",
        "reciprocal",
        "sin",
        "cos",
        "tanh",
        "sigmoid",
        "relu",
        "gelu",
        "silu",
        "threshold",
        "hardtanh",
        "leaky_relu",
        "elu",
        "clamp",
        "clamp_min",
        "clamp_max",
        "maximum",
        "minimum",
        "where",
        "threshold_backward",
        "gelu_backward",
        "silu_backward",
        "sigmoid_backward",
        "tanh_backward",
        "hardtanh_backward",
        "addcmul",
        "addcdiv",
        "lerp",
        "erf",
        "sign",
    }
)


@dataclass(frozen=True)
class OpCost:
    """FLOPs (None = unknown), bytes moved, op dtype and family of one op instance."""

    flops: int | None
    bytes: int | None
    dtype: str | None
    family: str


#: Largest tensor dimension taken as recorded (2^40); larger values are garbage, not shapes.
MAX_DIM: Final = 1 << 40
INT64_MAX: Final = (1 << 63) - 1


def base_name(op: str) -> str:
    """``aten::add_`` -> ``add``; ``aten::_convolution`` -> ``_convolution``."""
    name = op.split("::", 1)[1] if "::" in op else op
    if name.endswith("_") and not name.endswith("__") and name[:-1] in ELEMENTWISE:
        name = name[:-1]
    return name


def family_of(op: str) -> str | None:
    """``gemm``, ``conv``, ``attention``, ``elementwise`` or None (FLOPs not modelled)."""
    if not op.startswith("aten::"):
        return None
    b = base_name(op)
    if b in GEMM_OPS:
        return "gemm"
    if b in CONV_FWD or b in CONV_BWD:
        return "conv"
    if b in ATTN_FWD or b in ATTN_BWD:
        return "attention"
    if b in ELEMENTWISE:
        return "elementwise"
    return None


def _broadcast(shapes: list[list[int]]) -> list[int] | None:
    """NumPy broadcasting of shapes; None when they are incompatible."""
    nd = max((len(s) for s in shapes), default=0)
    out = [1] * nd
    for s in shapes:
        for i, d in enumerate(s[::-1]):
            j = nd - 1 - i
            if out[j] == 1:
                out[j] = d
            elif d not in (1, out[j]):
                return None
    return out


def _attention(b: str, dims: list[list[int]]) -> tuple[int, list[int]] | None:
    bwd = b in ATTN_BWD
    q_i = 1 if bwd else 0  # backward ops start with grad_out
    if len(dims) < q_i + 3 or any(len(dims[q_i + j]) != 4 for j in range(3)):
        return None
    q, k, v = dims[q_i], dims[q_i + 1], dims[q_i + 2]
    if b in _BLHE:
        bsz, lq, h, e = q
        lk, ev = k[1], v[3]
    else:
        bsz, h, lq, e = q
        lk, ev = k[2], v[3]
    if bwd:
        return 2 * bsz * h * lq * lk * (3 * e + 2 * ev), list(q)
    out = [bsz, lq, h, ev] if b in _BLHE else [bsz, h, lq, ev]
    return 2 * bsz * h * lq * lk * (e + ev), out


#: GEMMs whose first argument is the added bias/input (``addmm(bias, m1, m2)``): the FLOPs
#: come from arguments 1 and 2; the epilogue add is not counted.
_GEMM_WITH_BIAS: Final = frozenset({"addmm", "baddbmm", "_addmm_activation"})


def _linear(dims: list[list[int]]) -> tuple[int, list[int]] | None:
    """``linear(x[..., K], w[N, K], b)``: 2 x prod(x[:-1]) x K x N; output [..., N]."""
    if len(dims) < 2 or not dims[0] or len(dims[1]) != 2:
        return None
    x, w = dims[0], dims[1]
    n, k = w
    if x[-1] != k:
        return None
    return 2 * numel(x[:-1]) * k * n, [*x[:-1], n]


def _matmul(dims: list[list[int]]) -> tuple[int, list[int]] | None:
    """``mm``/``bmm``/``matmul`` [..., M, K] x [..., K, N]: broadcast batch x 2MKN. A 1-D
    operand gets M=1 (left) or N=1 (right), and that dimension is dropped from the output."""
    if len(dims) < 2 or not dims[0] or not dims[1]:
        return None
    a, bb = list(dims[0]), list(dims[1])
    a1, b1 = len(a) == 1, len(bb) == 1
    if a1:
        a = [1, a[0]]
    if b1:
        bb = [bb[0], 1]
    m, k = a[-2], a[-1]
    k2, n = bb[-2], bb[-1]
    if k != k2:
        return None
    batch = _broadcast([a[:-2], bb[:-2]])
    if batch is None:
        return None
    out = [*batch, *([] if a1 else [m]), *([] if b1 else [n])]
    return 2 * numel(batch) * m * k * n, out


def _gemm(b: str, dims: list[list[int]]) -> tuple[int, list[int]] | None:
    """(flops, output shape) of a GEMM-family op; None when the shapes do not multiply."""
    if b in _GEMM_WITH_BIAS:
        dims = dims[1:3]
    if b == "linear":
        return _linear(dims)
    return _matmul(dims)


def _elementwise(dims: list[list[int]], types: list[str]) -> tuple[int, list[int]] | None:
    """1 FLOP per output element; the output is the broadcast of the tensor (non-Scalar)
    inputs. None without tensor inputs or when they do not broadcast."""
    tensors = [d for d, t in zip(dims, types, strict=False) if d and t != "Scalar"]
    if not tensors:
        return None
    shape = _broadcast(tensors)
    return None if shape is None else (numel(shape), shape)


_FlopsRule = Callable[[str, list[list[int]], list[str], list[str]], tuple[int, list[int]] | None]

#: FLOPs rule per op family: (base name, Input Dims, Input type, Concrete Inputs) ->
#: (flops, output shape) or None when unknown. Families not listed have no FLOPs model.
_FLOPS_RULES: Final[dict[str, _FlopsRule]] = {
    "gemm": lambda b, dims, _types, _conc: _gemm(b, dims),
    "attention": lambda b, dims, _types, _conc: _attention(b, dims),
    "elementwise": lambda _b, dims, types, _conc: _elementwise(dims, types),
    "conv": lambda b, dims, _types, conc: conv_flops(b, dims, conc),
}


def _op_dtype(types: list[str]) -> tuple[str | None, int | None]:
    """(dtype id, itemsize) of the first floating-point tensor input; (None, None) if none."""
    for t in types:
        if t in DTYPE_OF:
            return DTYPE_OF[t]
    return None, None


def op_cost(op: str, dims: list[list[int]], types: list[str], concrete: list[str]) -> OpCost:
    """FLOPs/bytes/dtype of one op call. Unknown FLOPs -> ``flops=None`` (never guessed)."""
    family = family_of(op) or "other"
    dtype, itemsize = _op_dtype(types)
    rule = _FLOPS_RULES.get(family)
    res = None if rule is None else rule(base_name(op), dims, types, concrete)
    flops, out = (None, None) if res is None else res
    nbytes = _bytes(dims, types, out, itemsize)
    return OpCost(flops, nbytes, dtype, family)


def _bytes(
    dims: list[list[int]], types: list[str], out: list[int] | None, out_itemsize: int | None
) -> int | None:
    total = 0
    for d, t in zip(dims, types, strict=False):
        if not d:
            continue
        size = DTYPE_OF[t][1] if t in DTYPE_OF else INT_ITEMSIZE.get(t)
        if size is None:
            continue
        total += numel(d) * size
    if out and out_itemsize:
        total += numel(out) * out_itemsize
    return total or None


def parse_json_list(text: str | None) -> list[object]:
    """An args value (JSON text) as a list; anything else -> []."""
    if not text:
        return []
    try:
        val = orjson.loads(text)
    except orjson.JSONDecodeError:
        try:  # the stdlib also reads NaN/Infinity literals, which orjson refuses
            val = json.loads(text)
        except ValueError:
            return []
    return val if isinstance(val, list) else []


def op_cost_from_args(
    op: str, dims_json: str | None, types_json: str | None, concrete_json: str | None
) -> OpCost:
    """``op_cost`` from the args side table's JSON texts. A shape that is not a list of
    dimensions in ``[0, MAX_DIM]`` is treated as unknown (the op's FLOPs become unknown, never a
    crash), and FLOPs or bytes beyond int64 are unknown too: no recorded op does that much."""
    dims = [
        [int(x) for x in d]
        if isinstance(d, list) and all(type(x) is int and 0 <= x <= MAX_DIM for x in d)
        else []
        for d in parse_json_list(dims_json)
    ]
    types = [str(t) for t in parse_json_list(types_json)]
    concrete = [c if isinstance(c, str) else json.dumps(c) for c in parse_json_list(concrete_json)]
    cost = op_cost(op, dims, types, concrete)
    if (cost.flops or 0) > INT64_MAX or (cost.bytes or 0) > INT64_MAX:
        return OpCost(None, None, cost.dtype, cost.family)
    return cost
