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

import polars as pl

from traceforensics.analysis.kernels.conv_flops import conv_flops_from_output
from traceforensics.analysis.kernels.flops import parse_json_list
from traceforensics.analysis.names import matching
from traceforensics.model.schema import ARG_INPUT_DIMS, ARG_SEQUENCE


def _dims(text: str | None) -> list[list[int]]:
    return [[int(x) for x in d] if isinstance(d, list) else [] for d in parse_json_list(text)]


CONV_BWD_NODE = r"^(Cudnn|Miopen|Mkldnn|Slow|Thnn)?Convolution\w*Backward\d*$"


def _filled(costs: pl.DataFrame, found: dict[int, int]) -> pl.DataFrame:
    """``costs`` with ``flops`` set from ``found`` (op_id -> FLOPs) where it was null."""
    if not found:
        return costs
    fill = pl.DataFrame(
        {"op_id": list(found), "_fill": list(found.values())},
        schema={"op_id": pl.Int64, "_fill": pl.Int64},
    )
    return (
        costs.join(fill, on="op_id", how="left", maintain_order="left")
        .with_columns(pl.coalesce("flops", "_fill").alias("flops"))
        .drop("_fill")
    )


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
    events: pl.DataFrame, args: pl.DataFrame, costs: pl.DataFrame
) -> pl.DataFrame:
    """Fill unknown forward-conv FLOPs from the backward node sharing the op's Sequence number
    (same rank): that node's first input is grad_output, whose shape is the conv's output.
    ``events``: the cpu_op rows; ``costs`` is ``throughput.op_costs``'s frame (``op_id, family,
    flops, Input Dims``, ...)."""
    todo = costs.filter((pl.col("family") == "conv") & pl.col("flops").is_null()).get_column(
        "op_id"
    )
    if todo.len() == 0:
        return costs
    seq = args.filter(pl.col("key") == ARG_SEQUENCE).select(
        "event_id", pl.col("value").alias("seq")
    )
    if seq.height == 0:
        return costs
    ev = events.select("event_id", "rank", "name")
    nodes = (
        ev.filter(matching(ev, CONV_BWD_NODE))
        .join(seq, on="event_id")
        .join(
            args.filter(pl.col("key") == ARG_INPUT_DIMS).select(
                "event_id", pl.col("value").alias("grad_dims")
            ),
            on="event_id",
        )
        .unique(["rank", "seq"], keep="first")
        .select("rank", "seq", "grad_dims")
    )
    fwd = (
        ev.filter(pl.col("event_id").is_in(todo.implode()))
        .join(seq, on="event_id")
        .join(nodes, on=["rank", "seq"])
        .join(costs.select(pl.col("op_id").alias("event_id"), ARG_INPUT_DIMS), on="event_id")
    )
    rows = fwd.select("event_id", "grad_dims", ARG_INPUT_DIMS).iter_rows()
    return _filled(costs, _flops_by_op(rows, _conv_from_grad))


def _conv_from_grad(grad_dims: str | None, dims_json: str | None) -> int | None:
    grads = parse_json_list(grad_dims)
    if grads and isinstance(grads[0], list):
        return conv_flops_from_output(_dims(dims_json), [int(x) for x in grads[0]])
    return None


WGRAD_OPS = ("aten::cudnn_convolution_backward_weight", "aten::miopen_convolution_backward_weight")
WGRAD_PARENTS = ("aten::cudnn_convolution_backward", "aten::miopen_convolution_backward")


def fill_wgrad_from_parent(
    tree: pl.DataFrame, args: pl.DataFrame, costs: pl.DataFrame
) -> pl.DataFrame:
    """Weight-gradient FLOPs from the parent backward op's weight dims (see module doc)."""
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
    wanted = pl.concat([child.get_column("event_id"), parent.get_column("parent_id")])
    dims = args.filter(
        (pl.col("key") == ARG_INPUT_DIMS) & pl.col("event_id").is_in(wanted.implode())
    ).select("event_id", "value")
    links = (
        child.join(parent, on="parent_id")
        .join(dims.rename({"value": "child_dims"}), on="event_id")
        .join(dims.rename({"event_id": "parent_id", "value": "parent_dims"}), on="parent_id")
    )
    rows = links.select("event_id", "child_dims", "parent_dims").iter_rows()
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
