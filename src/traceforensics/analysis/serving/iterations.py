"""The engine's iterations: its own ranges (``engines.ITERATION_TIERS``), each with its phase,
batch size and tokens, graph replay, device and GPU span.

Rules (docs/serving.md):

- **process**: every rule is keyed by (rank, pid): one file may hold several processes (an
  nsys export of a tensor-parallel server puts every row on rank 0); a GPU op belongs to the
  process of its launch call;
- **ranges**: per (rank, pid), the rows of the first tier with a match; a range inside (or
  starting inside) an earlier one is left out (the outer call is the iteration);
- **phase**: the name gives it: vLLM's execute annotation (prefill requests only: ``prefill``;
  decode only: ``decode``; both: ``mixed``; ``execute_new_<n>_cached_<m>``: new only
  ``prefill``, both ``mixed``, cached only left to the shapes), SGLang's ``step[MODE ..]``,
  TensorRT-LLM's ``<n> ctx reqs, <m> gen reqs``, with ``tokens`` and ``batch_size`` when
  shown; otherwise a phase word of the name (``engines.PHASE_WORDS``); otherwise that of the
  first engine range starting inside it (SGLang's ``forward`` wraps ``forward_decode``);
  else ``unknown``;
- **tokens** (when no name says): the largest leading dim of the first 2-D input of the
  matmul-like operators (linear, mm, matmul, gemm: activations first) started inside the
  iteration, the logits projection left out (its second input has a dim of at least
  ``VOCAB_MIN``: it runs on one row per sequence, the last token's); none without such an
  operator (piecewise graphs hide the layers);
- **sequences**: the smallest leading dim of the logits projections; an ``unknown`` iteration
  whose tokens equal its sequences is ``decode`` (one token per sequence), and a ``decode``
  one's ``batch_size`` is its tokens; otherwise ``batch_size`` is the sequences;
- **graph**: a graph launch call (``cudaGraphLaunch``, ``hipGraphLaunch``, ``cuGraphLaunch``)
  of the process started inside it; ``untraced_graph_ns``: the start of its first graph launch
  with no GPU row (Kineto may record a replay without its kernels): the gap ends there;
- **GPU span and device**: the GPU ops whose launch call started inside it: the first start,
  the last end, and the device most of them ran on (the rank's first device without any).
"""

from __future__ import annotations

from typing import Final

import polars as pl

from traceforensics.analysis.context import HOST_KINDS, AnalysisContext
from traceforensics.analysis.serving.engines import (
    FUNC_NAME,
    ITERATION_TIERS,
    PHASE_WORDS,
    RANGE_KINDS,
    SGLANG_STEP_RE,
    TRTLLM_STEP_RE,
    VLLM_EXECUTE_RE,
    VLLM_NEW_CACHED_RE,
)
from traceforensics.analysis.work_shapes import op_shapes

#: Graph launch calls (CUDA runtime, HIP, CUDA driver).
GRAPH_LAUNCH_RE: Final = r"^(cuda|hip|cu)GraphLaunch"
#: Operators whose first 2-D input leads with the tokens of the batch.
TOKEN_OPS_RE: Final = r"(?i)linear|::mm$|matmul|gemm"
#: A matmul whose second input has a dim this large is the logits projection (vocabulary).
VOCAB_MIN: Final = 32_000
KEY: Final = ["rank", "pid"]
_I64: Final = pl.Int64


def host_ranges(ctx: AnalysisContext) -> pl.DataFrame:
    """The host ranges (``rank, pid, name, start_ns, end_ns``; pid -1 when unknown), read once."""
    got: pl.DataFrame | None = vars(ctx).get("_serving_ranges")
    if got is None:
        got = ctx.session.events.filter(
            pl.col("kind").is_in(RANGE_KINDS) & pl.col("dur_ns").is_not_null()
        ).select(
            pl.col("rank").cast(_I64),
            pl.col("pid").cast(_I64).fill_null(-1),
            pl.col("name").cast(pl.String),
            "start_ns",
            (pl.col("start_ns") + pl.col("dur_ns")).alias("end_ns"),
        )
        vars(ctx)["_serving_ranges"] = got
    return got


def thread_pids(ctx: AnalysisContext) -> pl.DataFrame:
    """``thr, rank, pid``: the context's thread index (``context.host_rows``: host rows numbered
    in (rank, pid, tid) order) with its rank and process; read once."""
    got: pl.DataFrame | None = vars(ctx).get("_serving_threads")
    if got is None:
        got = (
            ctx.session.events.filter(
                pl.col("kind").is_in(HOST_KINDS) & pl.col("tid").is_not_null()
            )
            .select("rank", pl.col("pid").fill_null(-1), "tid")
            .unique()
            .with_columns(
                (pl.struct("rank", "pid", "tid").rank("dense") - 1).cast(_I64).alias("thr")
            )
            .select("thr", pl.col("rank").cast(_I64), pl.col("pid").cast(_I64))
        )
        vars(ctx)["_serving_threads"] = got
    return got


def engine_ranges(ctx: AnalysisContext, engines: tuple[str, ...] | None) -> pl.DataFrame:
    """The iteration ranges (``rank, pid, name, start_ns, end_ns``, sorted by rank, pid and
    start) of the tiers of ``engines`` (None: every tier)."""
    tier = pl.lit(None, dtype=_I64)
    for i, (pattern, engine) in reversed(list(enumerate(ITERATION_TIERS))):
        if engines is None or engine in engines:
            tier = pl.when(pl.col("name").str.contains(pattern)).then(pl.lit(i)).otherwise(tier)
    rows = host_ranges(ctx)
    hit = rows.with_columns(tier.alias("tier")).filter(pl.col("tier").is_not_null())
    hit = hit.filter(pl.col("tier") == pl.col("tier").min().over(KEY)).sort(*KEY, "start_ns")
    # nested or overlapping ranges of the same tier: the outer call is the iteration
    prev_end = pl.col("end_ns").cum_max().shift(1).over(KEY)
    return hit.filter(prev_end.is_null() | (pl.col("start_ns") >= prev_end)).select(
        *KEY, "name", "start_ns", "end_ns"
    )


def name_phase(rows: pl.DataFrame) -> pl.DataFrame:
    """``rows`` with ``phase``, ``batch_size`` and ``tokens`` read from ``name`` (null where the
    name does not show them; phase ``unknown``)."""
    name = pl.col("name")

    def grp(pattern: str, k: int) -> pl.Expr:
        return name.str.extract(pattern, k).cast(_I64)

    tok, ctx_n, ctx_t = grp(VLLM_EXECUTE_RE, 1), grp(VLLM_EXECUTE_RE, 2), grp(VLLM_EXECUTE_RE, 3)
    gen_n, gen_t = grp(VLLM_EXECUTE_RE, 4), grp(VLLM_EXECUTE_RE, 5)
    new_n, cached_n = grp(VLLM_NEW_CACHED_RE, 1), grp(VLLM_NEW_CACHED_RE, 2)
    trt_c, trt_g = grp(TRTLLM_STEP_RE, 1), grp(TRTLLM_STEP_RE, 2)
    mode = name.str.extract(SGLANG_STEP_RE, 1)
    step_bs, step_toks = grp(SGLANG_STEP_RE, 2), grp(SGLANG_STEP_RE, 3)
    prefill_n = pl.coalesce(ctx_n, new_n, trt_c)
    other_n = pl.coalesce(gen_n, trt_g)  # decode requests
    func = FUNC_NAME.str.to_lowercase()
    word: pl.Expr = pl.lit("unknown")
    for label, pattern in reversed(PHASE_WORDS):
        word = pl.when(func.str.contains(pattern)).then(pl.lit(label)).otherwise(word)
    mode_phase = (
        pl.when(mode == "DECODE")
        .then(pl.lit("decode"))
        .when(mode.is_in(["EXTEND", "PREFILL"]))
        .then(pl.lit("prefill"))
        .when(mode == "MIXED")
        .then(pl.lit("mixed"))
        .otherwise(pl.lit("unknown"))
    )
    p, d, c = prefill_n, other_n, cached_n
    phase = (
        pl.when(mode.is_not_null())
        .then(mode_phase)
        .when(p.is_null())
        .then(word)
        .when((p > 0) & ((d.fill_null(0) > 0) | (c.fill_null(0) > 0)))
        .then(pl.lit("mixed"))
        .when(p > 0)
        .then(pl.lit("prefill"))
        .when(d > 0)
        .then(pl.lit("decode"))
        .otherwise(pl.lit("unknown"))
    )
    tokens = pl.coalesce(tok, ctx_t + gen_t, step_toks, pl.when(mode == "DECODE").then(step_bs))
    batch = pl.coalesce(p + pl.coalesce(d, c), step_bs)
    return rows.with_columns(
        phase.alias("phase"), batch.alias("batch_size"), tokens.alias("tokens")
    )


def _in_iteration(its: pl.DataFrame, rows: pl.DataFrame, at: str) -> pl.DataFrame:
    """``rows`` (with ``rank``, ``pid`` and time column ``at``) joined to the iteration
    (``it``) of the same process whose range holds ``at``; rows outside every iteration
    dropped."""
    keys = its.select(*KEY, pl.col("start_ns").alias(at), "it", pl.col("end_ns").alias("it_end"))
    return (
        rows.sort(at)
        .join_asof(keys.sort(at), on=at, by=KEY, strategy="backward", check_sortedness=False)
        .filter(pl.col("it").is_not_null() & (pl.col(at) < pl.col("it_end")))
    )


def _inner_phase(ctx: AnalysisContext, its: pl.DataFrame) -> pl.DataFrame:
    """Per iteration, the phase, batch and tokens of the first engine range (any tier) that
    starts inside it and whose name gives a phase."""
    pattern = "|".join(f"(?:{p})" for p, _ in ITERATION_TIERS)
    rows = name_phase(host_ranges(ctx).filter(pl.col("name").str.contains(pattern)))
    rows = rows.filter(pl.col("phase") != "unknown").select(
        *KEY, "start_ns", pl.col("phase").alias("in_phase"),
        pl.col("batch_size").alias("in_batch"), pl.col("tokens").alias("in_tokens"),
    )  # fmt: skip
    inside = _in_iteration(its, rows, "start_ns").sort("start_ns")
    return inside.group_by("it").agg(pl.col("in_phase", "in_batch", "in_tokens").first())


def _tokens_from_shapes(ctx: AnalysisContext, its: pl.DataFrame) -> pl.DataFrame:
    empty = {"it": pl.UInt32, "shape_tokens": _I64, "shape_seqs": _I64}
    shapes = op_shapes(ctx, (), matrix=True).filter(
        pl.col("name").str.contains(TOKEN_OPS_RE) & (pl.col("ndim0") == 2)
    )
    if shapes.height == 0:
        return pl.DataFrame(schema=empty)
    dims1 = pl.col("dims1").fill_null("").str.extract_all(r"\d+").cast(pl.List(_I64))
    rows = shapes.join(thread_pids(ctx), on="thr").select(
        *KEY, "start_ns", "lead0", (dims1.list.max().fill_null(0) >= VOCAB_MIN).alias("logits")
    )
    inside = _in_iteration(its, rows, "start_ns")
    logits = pl.col("logits")
    return inside.group_by("it").agg(
        pl.col("lead0").filter(~logits).max().alias("shape_tokens"),
        pl.col("lead0").filter(logits).min().alias("shape_seqs"),
    )


def _graphs(ctx: AnalysisContext, its: pl.DataFrame) -> pl.DataFrame:
    ev = ctx.session.events
    calls = ev.filter(
        (pl.col("kind") == "cuda_api")
        & pl.col("name").cast(pl.String).str.contains(GRAPH_LAUNCH_RE)
    ).select(
        pl.col("rank").cast(_I64), pl.col("pid").cast(_I64).fill_null(-1), "start_ns",
        "correlation",
    )  # fmt: skip
    # a launch with no GPU row (kernel, graph span...) of its correlation: its replay is not
    # in the trace (without a correlation id nothing can be said: taken as shown)
    shown = (
        ev.filter(pl.col("device").is_not_null() & pl.col("correlation").is_not_null())
        .select(pl.col("rank").cast(_I64), "correlation", pl.lit(True).alias("shown"))
        .unique(["rank", "correlation"])
    )
    calls = calls.join(shown, on=["rank", "correlation"], how="left")
    inside = _in_iteration(its, calls, "start_ns")
    return inside.group_by("it").agg(
        pl.len().alias("graph_launches"),
        pl.col("start_ns")
        .filter(pl.col("shown").is_null() & pl.col("correlation").is_not_null())
        .min()
        .alias("untraced_graph_ns"),
    )


def _gpu_spans(ctx: AnalysisContext, its: pl.DataFrame) -> pl.DataFrame:
    ops = ctx.work.filter(pl.col("launch_start_ns").is_not_null()).select(
        pl.col("l_thr").cast(_I64).alias("thr"), pl.col("device").alias("op_dev"),
        "start_ns", "end_ns", pl.col("launch_start_ns").cast(_I64),
    )  # fmt: skip
    ops = ops.join(thread_pids(ctx), on="thr")
    inside = _in_iteration(its, ops, "launch_start_ns")
    return inside.group_by("it").agg(
        pl.col("start_ns").min().alias("gpu_start_ns"),
        pl.col("end_ns").max().alias("gpu_end_ns"),
        pl.col("op_dev").mode().min().cast(_I64).alias("op_device"),
    )


def iteration_table(ctx: AnalysisContext, engines: tuple[str, ...] | None) -> pl.DataFrame:
    """One row per iteration: ``rank, pid, device, name, start_ns, end_ns, phase, batch_size,
    tokens, graph, gpu_start_ns, gpu_end_ns, untraced_graph_ns`` (rules in the module
    docstring)."""
    its = name_phase(engine_ranges(ctx, engines).with_row_index("it"))
    first_dev = (
        pl.DataFrame(
            {"rank": [r for r, _ in ctx.devices], "first_device": [d for _, d in ctx.devices]},
            schema={"rank": _I64, "first_device": _I64},
        )
        .group_by("rank")
        .agg(pl.col("first_device").min())
    )
    out = (
        its.join(_inner_phase(ctx, its), on="it", how="left")
        .join(_tokens_from_shapes(ctx, its), on="it", how="left")
        .join(_graphs(ctx, its), on="it", how="left")
        .join(_gpu_spans(ctx, its), on="it", how="left")
        .join(first_dev, on="rank", how="left")
    )
    own = pl.col("phase") != "unknown"
    out = out.with_columns(
        pl.when(own).then("phase").otherwise(pl.coalesce("in_phase", pl.lit("unknown"))),
        pl.when(own).then("batch_size").otherwise(pl.coalesce("batch_size", "in_batch")),
        pl.when(own).then("tokens").otherwise(pl.coalesce("tokens", "in_tokens")),
    )
    seqs = pl.coalesce("batch_size", "shape_seqs")
    out = out.with_columns(pl.coalesce("tokens", "shape_tokens").alias("tokens")).with_columns(
        pl.when((pl.col("phase") == "unknown") & (pl.col("tokens") == seqs))
        .then(pl.lit("decode"))
        .otherwise("phase")
        .alias("phase")
    )
    decode = pl.col("phase") == "decode"
    batch = pl.when(decode).then(pl.coalesce("batch_size", "tokens"))
    return out.with_columns(
        batch.otherwise(seqs).alias("batch_size"),
        (pl.col("graph_launches").fill_null(0) > 0).alias("graph"),
        pl.coalesce("op_device", "first_device", pl.lit(0)).cast(_I64).alias("device"),
    ).select(
        "rank", "pid", "device", "name", "start_ns", "end_ns", "phase", "batch_size", "tokens",
        "graph", "gpu_start_ns", "gpu_end_ns", "untraced_graph_ns",
    ).sort("rank", "pid", "start_ns")  # fmt: skip


__all__ = [
    "GRAPH_LAUNCH_RE",
    "KEY",
    "TOKEN_OPS_RE",
    "VOCAB_MIN",
    "engine_ranges",
    "host_ranges",
    "iteration_table",
    "name_phase",
    "thread_pids",
]
