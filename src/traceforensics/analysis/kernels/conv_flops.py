"""Convolution FLOPs from recorded shapes and Concrete Inputs (the conv family of ``flops``).

Rules (a FLOP is one multiply or one add): 2 x numel(output) x prod(weight[1:]) (weight[1] is
C_in/groups, so groups are built in). The output spatial size is
``floor((in + 2p - d(k-1) - 1)/s) + 1`` per dimension from the stride, padding and dilation in
Concrete Inputs (``padding="same"`` keeps the input's size, only with stride 1); a transposed
conv costs 2 x numel(input) x prod(weight[1:]). ``convolution_backward``: the forward FLOPs x
the number of True in output_mask[:2]; ``cudnn_convolution_backward_input``: 2 x
numel(grad_out) x prod(weight[1:]). Anything unreadable gives None: FLOPs are never guessed.
Also the text helpers the other rules share (``numel``, ``ints_of``, ``bools_of``).
"""

from __future__ import annotations

import json
import math
import re
from typing import Final


def numel(shape: list[int]) -> int:
    return math.prod(shape) if shape else 1


def ints_of(text: str) -> list[int] | None:
    """``"[1, 2]"`` -> [1, 2]; ``"2"`` -> [2]; anything else None."""
    text = text.strip()
    if not text:
        return None
    try:
        val = json.loads(text)
    except ValueError:
        return None
    if isinstance(val, int) and not isinstance(val, bool):
        return [val]
    if isinstance(val, list) and all(isinstance(v, int) for v in val):
        return [int(v) for v in val]
    return None


def bools_of(text: str) -> list[bool] | None:
    items = re.findall(r"True|False|true|false", text)
    return [i.lower() == "true" for i in items] or None


def _conv_out(
    inp: list[int], weight: list[int], stride: list[int], pad: list[int], dil: list[int]
) -> list[int] | None:
    nsp = len(weight) - 2
    if nsp < 1 or len(inp) < nsp + 1:
        return None

    def rep(v: list[int]) -> list[int]:
        return v * nsp if len(v) == 1 else v

    s, p, d = rep(stride), rep(pad), rep(dil)
    # a recorded stride of 0 (or below) is not a convolution a GPU ran: FLOPs unknown
    if not (len(s) == len(p) == len(d) == nsp) or min(s) <= 0:
        return None
    spatial = [
        (inp[-nsp + i] + 2 * p[i] - d[i] * (weight[2 + i] - 1) - 1) // s[i] + 1 for i in range(nsp)
    ]
    batch = inp[: -nsp - 1]
    return [*batch, weight[0], *spatial]


#: Concrete-Inputs positions of (stride, padding, dilation, transposed flag) per conv overload;
#: the aten overloads order these arguments differently. Overloads not listed use
#: ``_CONV_ARG_POS_DEFAULT`` (``conv1d/2d/3d``, ``conv_transpose*``: no transposed flag).
_CONV_ARG_POS: Final[dict[str, tuple[int, int, int, int | None]]] = {
    "cudnn_convolution": (3, 2, 4, None),
    "miopen_convolution": (3, 2, 4, None),
    "cudnn_convolution_transpose": (4, 2, 5, None),
    "convolution": (3, 4, 5, 6),
    "_convolution": (3, 4, 5, 6),
}
_CONV_ARG_POS_DEFAULT: Final[tuple[int, int, int, int | None]] = (3, 4, 5, None)


def _conv_flops_for(out_shape: list[int], weight: list[int]) -> int:
    """Conv FLOPs: 2 x numel(output) x prod(weight[1:]) (weight[1] is C_in/groups)."""
    return 2 * numel(out_shape) * numel(weight[1:])


def _conv_is_transposed(b: str, conc: list[str], pos_t: int | None) -> bool:
    """Transposed by name, or by the ``transposed`` flag of ``convolution``/``_convolution``."""
    return b.startswith(("conv_transpose", "cudnn_convolution_transpose")) or (
        pos_t is not None and len(conc) > pos_t and conc[pos_t].strip() == "True"
    )


def _conv_same_padding(
    inp: list[int], w: list[int], stride: list[int] | None
) -> tuple[int, list[int]] | None:
    """``padding="same"``: output spatial size = input's, but only claimed with stride 1
    (PyTorch rejects "same" with other strides); None otherwise."""
    if stride is None or not all(x == 1 for x in stride):
        return None
    out = [*inp[: -(len(w) - 1)], w[0], *inp[-(len(w) - 2) :]]
    return _conv_flops_for(out, w), out


def _conv_explicit_padding(
    inp: list[int],
    w: list[int],
    stride: list[int] | None,
    pad: list[int] | None,
    dil: list[int] | None,
) -> tuple[int, list[int]] | None:
    """Output shape from numeric stride/padding/dilation; None when any is unreadable or the
    computed shape is not positive."""
    if stride is None or pad is None or dil is None:
        return None
    out_shape = _conv_out(inp, w, stride, pad, dil)
    if out_shape is None or any(x <= 0 for x in out_shape):
        return None
    return _conv_flops_for(out_shape, w), out_shape


def _conv_fwd_flops(b: str, dims: list[list[int]], conc: list[str]) -> tuple[int, list[int]] | None:
    """(flops, output shape) of a forward convolution, or None when stride/padding are unknown."""
    if len(dims) < 2 or not dims[0] or len(dims[1]) < 3:
        return None
    inp, w = dims[0], dims[1]
    pos_s, pos_p, pos_d, pos_t = _CONV_ARG_POS.get(b, _CONV_ARG_POS_DEFAULT)
    if len(conc) <= pos_d:
        return None
    if _conv_is_transposed(b, conc, pos_t):
        # each input element scatters into prod(weight[1:]) outputs: 2 x numel(in) x prod(w[1:])
        return _conv_flops_for(inp, w), []
    pad_text = conc[pos_p].strip().strip("'\"")
    stride, dil = ints_of(conc[pos_s]), ints_of(conc[pos_d])
    if pad_text == "same":
        return _conv_same_padding(inp, w, stride)
    pad = [0] if pad_text == "valid" else ints_of(conc[pos_p])
    return _conv_explicit_padding(inp, w, stride, pad, dil)


def _convolution_backward(
    dims: list[list[int]], concrete: list[str]
) -> tuple[int, list[int]] | None:
    """``convolution_backward(grad_out, input, weight, ..., output_mask)``: forward FLOPs x
    (number of True in output_mask[:2]); grad_input and grad_weight each cost one forward conv,
    grad_bias (mask[2]) is not counted. The mask is Concrete Inputs[10]; None without it."""
    mask = bools_of(concrete[10]) if len(concrete) > 10 else None
    if mask is None or len(dims) < 3 or not dims[0] or len(dims[2]) < 3:
        return None
    return _conv_flops_for(dims[0], dims[2]) * sum(mask[:2]), []


def conv_flops(b: str, dims: list[list[int]], concrete: list[str]) -> tuple[int, list[int]] | None:
    """(flops, output shape or []) of any conv-family op.

    ``cudnn_convolution_backward_input(input_size, grad_out, weight, ...)``: 2 x numel(grad_out)
    x prod(weight[1:]). Every other op, including backward ops whose shapes are missing, goes
    through the forward rule: for ``*_backward_weight``/``*_backward_input`` the first argument
    is a size list (no Input Dims), so that rule returns None rather than guessing."""
    if b == "cudnn_convolution_backward_input" and len(dims) >= 3 and dims[1] and dims[2]:
        return _conv_flops_for(dims[1], dims[2]), []
    if b == "convolution_backward":
        return _convolution_backward(dims, concrete)
    return _conv_fwd_flops(b, dims, concrete)


def conv_flops_from_output(dims: list[list[int]], out_shape: list[int]) -> int | None:
    """Forward-conv FLOPs when the output shape is known from elsewhere (the autograd backward
    node's grad_output, linked by Sequence number): 2 x numel(out) x prod(weight[1:]).
    None unless batch and channel counts agree with input and weight."""
    if len(dims) < 2 or not dims[0] or len(dims[1]) < 3 or len(out_shape) != len(dims[0]):
        return None
    inp, w = dims[0], dims[1]
    if out_shape[0] != inp[0] or out_shape[1] != w[0]:
        return None
    return 2 * numel(out_shape) * numel(w[1:])
