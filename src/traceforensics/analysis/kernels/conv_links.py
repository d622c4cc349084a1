"""Shapes PyTorch < 2.0 traces leave out of a convolution, recovered from linked ops.

Those traces record ``Input Dims`` but no ``Concrete Inputs``, so a forward conv's stride and
padding, and a weight-gradient op's weight shape, are missing. Two links in the data fill them:

- forward conv <- autograd node with the same ``Sequence number`` (same rank): the node
  (``CudnnConvolutionBackward``, ``ConvolutionBackward0``) takes grad_output first, whose shape is
  the forward output shape.
- ``cudnn_convolution_backward_weight(weight_size, grad_output, input)`` <- its parent
  ``cudnn_convolution_backward(input, grad_output, weight)`` on the host op tree::

      [aten::cudnn_convolution_backward  dims [input, grad_out, weight]]
         [..._backward_input]  [..._backward_weight  dims [[], grad_out, input]]

  weight-gradient FLOPs = 2 x numel(grad_out) x prod(weight[1:]) (same as the data gradient).

A link that is absent or inconsistent leaves the FLOPs unknown.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable

import numpy as np
import polars as pl

from traceforensics.analysis.kernels.conv_flops import conv_flops_from_output
from traceforensics.analysis.kernels.flops import parse_json_list
from traceforensics.analysis.kernels.op_args import MISSING, OpArgs
from traceforensics.analysis.names import matching
from traceforensics.model.schema import ARG_INPUT_DIMS, ARG_SEQUENCE


def _dims(text: str | None) -> list[list[int]]:
    return [[int(x) for x in d] if isinstance(d, list) else [] for d in parse_json_list(text)]


CONV_BWD_NODE = r"^(Cudnn|Miopen|Mkldnn|Slow|Thnn)?Convolution\w*Backward\d*$"


def _filled(costs: pl.DataFrame, found: dict[int, int]) -> pl.DataFrame:
    """``costs`` (by ``op_id``) with ``flops`` set from ``found`` (op_id -> FLOPs) where it was
    null."""
    if not found:
        return costs
    ids = np.asarray(costs.get_column("op_id").to_numpy(), dtype=np.int64)
    want = np.fromiter(found, dtype=np.int64, count=len(found))
    pos = np.minimum(np.searchsorted(ids, want), max(ids.size - 1, 0))
    flops = costs.get_column("flops")
    keep = (ids[pos] == want) & flops.is_null().to_numpy()[pos]
    values = pl.Series(np.fromiter(found.values(), dtype=np.int64, count=len(found))[keep])
    return costs.with_columns(flops.clone().scatter(pos[keep], values))


def _flops_by_op(
    rows: Iterable[tuple[int, str | None, str | None]],
    rule: Callable[[str | None, str | None], int | None],
) -> dict[int, int]:
    """``op_id -> FLOPs`` from ``rule`` applied to each row's two JSON texts. Repeated layers
    share shapes: one computation per distinct pair."""
    memo: dict[tuple[str | None, str | None], int | None] = {}
    found: dict[int, int] = {}
    for op_id, a, b in rows:
        if (a, b) not in memo:
            memo[(a, b)] = rule(a, b)
        flops = memo[(a, b)]
        if flops is not None:
            found[int(op_id)] = flops
    return found


def fill_conv_from_sequence(
    events: pl.DataFrame, args: OpArgs, costs: pl.DataFrame
) -> pl.DataFrame:
    """Fill unknown forward-conv FLOPs from the backward node sharing the op's Sequence number
    (same rank): that node's first input is grad_output, whose shape is the conv's output.
    ``events``: the cpu_op rows (``event_id, rank, name``); ``args``: their ``Input Dims`` and
    ``Sequence number``; ``costs`` is ``throughput.op_costs``'s frame (``op_id, family, flops``,
    ...). A node needs both keys; of the nodes of one (rank, sequence number), the first in
    ``events`` is the link."""
    todo = costs.filter((pl.col("family") == "conv") & pl.col("flops").is_null()).get_column(
        "op_id"
    )
    if todo.len() == 0 or not args.has(ARG_SEQUENCE):
        return costs
    nodes = events.filter(matching(events, CONV_BWD_NODE))
    node_ids = np.asarray(nodes.get_column("event_id").to_numpy(), dtype=np.int64)
    node_seq = args.value_codes(args.rows(ARG_SEQUENCE, node_ids))
    grad_rows = args.rows(ARG_INPUT_DIMS, node_ids)
    linked: dict[tuple[int, int], int] = {}  # (rank, sequence number) -> the node's dims row
    for rank, seq, row in zip(
        nodes.get_column("rank").to_list(), node_seq.tolist(), grad_rows.tolist(), strict=True
    ):
        if MISSING not in (seq, row):
            linked.setdefault((rank, seq), row)
    fwd = events.filter(pl.col("event_id").is_in(todo.implode()))
    fwd_ids = np.asarray(fwd.get_column("event_id").to_numpy(), dtype=np.int64)
    fwd_seq = args.value_codes(args.rows(ARG_SEQUENCE, fwd_ids)).tolist()
    ranks = fwd.get_column("rank").to_list()
    found = (linked.get(key, MISSING) for key in zip(ranks, fwd_seq, strict=True))
    pairs = [(i, g) for i, g in zip(fwd_ids.tolist(), found, strict=True) if g != MISSING]
    if not pairs:
        return costs
    ids = np.asarray([op_id for op_id, _ in pairs], dtype=np.int64)
    grad_dims = args.texts(np.asarray([g for _, g in pairs], dtype=np.int64))
    dims = args.texts(args.rows(ARG_INPUT_DIMS, ids))
    rows = zip(ids.tolist(), grad_dims, dims, strict=True)
    return _filled(costs, _flops_by_op(rows, _conv_from_grad))


def _conv_from_grad(grad_dims: str | None, dims_json: str | None) -> int | None:
    grads = parse_json_list(grad_dims)
    if grads and isinstance(grads[0], list):
        return conv_flops_from_output(_dims(dims_json), [int(x) for x in grads[0]])
    return None


WGRAD_OPS = ("aten::cudnn_convolution_backward_weight", "aten::miopen_convolution_backward_weight")
WGRAD_PARENTS = ("aten::cudnn_convolution_backward", "aten::miopen_convolution_backward")


def fill_wgrad_from_parent(tree: pl.DataFrame, args: OpArgs, costs: pl.DataFrame) -> pl.DataFrame:
    """Weight-gradient FLOPs from the parent backward op's weight dims (see module doc);
    ``args``: the ops' ``Input Dims``."""
    todo = costs.filter(pl.col("op").is_in(WGRAD_OPS) & pl.col("flops").is_null()).get_column(
        "op_id"
    )
    if todo.len() == 0:
        return costs
    child = tree.filter(pl.col("event_id").is_in(todo.implode())).select("event_id", "parent_id")
    parent = tree.filter(
        pl.col("event_id").is_in(child.get_column("parent_id").implode())
        & pl.col("name").is_in(list(WGRAD_PARENTS))
    ).select(pl.col("event_id").alias("parent_id"))
    links = child.join(parent, on="parent_id")
    ids, parents = (
        np.asarray(links.get_column(c).to_numpy(), dtype=np.int64)
        for c in ("event_id", "parent_id")
    )
    child_rows, parent_rows = args.rows(ARG_INPUT_DIMS, ids), args.rows(ARG_INPUT_DIMS, parents)
    both = (child_rows != MISSING) & (parent_rows != MISSING)
    rows = zip(
        ids[both].tolist(), args.texts(child_rows[both]), args.texts(parent_rows[both]), strict=True
    )
    return _filled(costs, _flops_by_op(rows, _wgrad))


def _wgrad(child_json: str | None, parent_json: str | None) -> int | None:
    child, parent = _dims(child_json), _dims(parent_json)
    if len(child) < 3 or len(parent) < 3:
        return None
    grad_out, inp, weight = child[1], child[2], parent[2]
    # the parent must be this conv: same grad_output and input, and a real weight
    if grad_out != parent[1] or inp != parent[0] or len(weight) < 3:
        return None
    return conv_flops_from_output([inp, weight], grad_out)
