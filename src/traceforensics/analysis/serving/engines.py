"""The table of signs that a trace comes from an inference server, and the engine's own ranges.

A trace is a server's when a name of one of ``SIGNS`` occurs (docs/serving.md lists them with
where each comes from). Every sign names the engine itself (its Python package in a frame's
file path, its custom ops, its model runner's ranges): a training script does not record them.
The engine with the most matching host rows (annotations, operators, Python frames) wins, its
kernel rows breaking ties only: SGLang and TGI run vLLM's custom kernels (``vllm::``), so a
kernel sign alone never outranks a host one. The evidence keeps its matched names.

Iterations come from the engine's ranges (``ITERATION_TIERS``): the first tier with a range on
a rank gives that rank's iterations (an annotation and the Python frame of the same call are
two tiers, so one call is never two iterations). Host ranges between iterations are classed by
``GAP_CLASSES`` (matched on the function name: a Python frame ``file.py(12): fn`` reads ``fn``).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Final

import polars as pl

#: Host kinds whose names can be signs, iteration ranges or gap ranges.
RANGE_KINDS: Final = ("annotation", "cpu_op", "python")
#: Engine id -> regex of its signs (matched on names of ``RANGE_KINDS`` and kernels).
SIGNS: Final[dict[str, str]] = {
    # vLLM: its package in Python frames, its custom ops/kernels (vllm::), the v1 model
    # runner's execute annotation ``execute_<tokens>_context_<n>(...)_generation_<m>(...)``
    "vllm": r"(^|/)vllm/|^vllm::|[ :]vllm::|^execute_(\d+_)?context_\d+"
    r"|^execute_new_\d+_cached_\d+",
    # SGLang: its package (sglang/srt/...), its kernel library (sgl_kernel)
    "sglang": r"(^|/)sglang/|sgl_kernel",
    # TensorRT-LLM: its Python package (PyTorch backend), its executor's NVTX range, its
    # kernel namespace (an nsys trace has no Python frames)
    "tensorrt_llm": r"(^|/)tensorrt_llm/|^\[Executor\] _forward_step|tensorrt_llm::kernels::",
    # Hugging Face TGI: its server package
    "tgi": r"(^|/)text_generation_server/",
}
#: Iteration ranges, tried in order per rank: (regex, engine the tier belongs to).
ITERATION_TIERS: Final[tuple[tuple[str, str], ...]] = (
    # vLLM v1 annotations: ``execute_<tokens>_context_<n>(..)_generation_<m>(..)`` (older:
    # no tokens) and ``execute_new_<n>_cached_<m>``
    (r"^execute_(\d+_)?context_\d+|^execute_new_\d+_cached_\d+", "vllm"),
    (r"model_runner\.py\(\d+\): execute_model$|^execute_model$|ModelRunner\.execute_model", "vllm"),
    # SGLang's ``step[DECODE bs=N]`` / ``step[EXTEND bs=N toks=M]`` ranges, then
    # ``ModelRunner.forward`` (graph replays run under it without ``forward_decode``), then
    # the eager ``forward_<mode>`` frames (model_runner.py; recent releases: eager_runner.py)
    (r"^step\[[A-Z_]+\b[^\]]*\]", "sglang"),
    (r"sglang/.*model_runner\.py\(\d+\): forward$|ModelRunner\.forward$", "sglang"),
    (
        r"_runner\.py\(\d+\): forward_(extend|decode|mixed|idle)$|^forward_(extend|decode|mixed)$"
        r"|ModelRunner\.forward_(extend|decode|mixed)",
        "sglang",
    ),
    # TensorRT-LLM: the executor's NVTX ``[Executor] _forward_step <i>: <n> ctx reqs, <m> gen
    # reqs``, then its Python frame
    (r"^\[Executor\] _forward_step", "tensorrt_llm"),
    (r"py_executor\.py\(\d+\): _forward_step$|^_forward_step$", "tensorrt_llm"),
    (r"causal_lm\.py\(\d+\): generate_token$|^generate_token$", "tgi"),
)
#: The vLLM v1 execute annotation: scheduled tokens, prefill (context) and decode requests.
#: Older releases leave the tokens out but give each group's tokens first in parentheses:
#: ``execute_context_<n>(<tokens>_..)_generation_<m>(<tokens>)``.
VLLM_EXECUTE_RE: Final = (
    r"^execute_(?:(\d+)_)?context_(\d+)(?:\((\d+)[_)])?.*_generation_(\d+)(?:\((\d+)[_)])?"
)
#: vLLM v1's ``execute_new_<n>_cached_<m>``: new requests (prefill) and cached ones.
VLLM_NEW_CACHED_RE: Final = r"^execute_new_(\d+)_cached_(\d+)"
#: SGLang's ``step[<MODE> bs=<n> toks=<m>]`` (mode DECODE, EXTEND, MIXED, IDLE).
SGLANG_STEP_RE: Final = r"^step\[([A-Z_]+)(?:[^\]]*?\bbs=(\d+))?(?:[^\]]*?\btoks=(\d+))?"
#: TensorRT-LLM's ``[Executor] _forward_step <i>: <n> ctx reqs, <m> gen reqs``.
TRTLLM_STEP_RE: Final = r"^\[Executor\] _forward_step \d+: (\d+) ctx reqs?, (\d+) gen reqs?"
#: Phase words in a range name (after the vLLM numbers): checked in this order.
PHASE_WORDS: Final[tuple[tuple[str, str], ...]] = (
    ("mixed", r"mixed"),
    ("prefill", r"prefill|extend|context"),
    ("decode", r"decode"),
)
#: Host-gap classes in priority order: an idle ns covered by ranges of several classes goes to
#: the first (sampling and detokenisation run inside the scheduler's loop: the inner names win).
GAP_CLASSES: Final[tuple[tuple[str, str], ...]] = (
    ("sampling", r"(?i)sampl|logits|top_?[kp]\b|(^|[ :_])bookkeeping|rejection"),
    (
        "detokenisation",
        r"(?i)detoken|decode_tokens?\b|incremental_decode|output_processor"
        r"|process_outputs|stream_output|convert_ids",
    ),
    (
        "scheduler",
        r"(?i)schedul|_update_states|prepare_input|_prepare_inputs|get_next_batch"
        r"|build_batch|prepare_for_(extend|decode)|allocat|block_table|kv_cache|preprocess"
        r"|synchronize_input_prep|process_batch_result|recv_requests|add_request"
        r"|update_from_output",
    ),
)
#: The engine's own loop when it overlaps scheduling with the GPU (vLLM's batch queue under
#: ``--async-scheduling`` / pipeline parallel, SGLang's overlap scheduler's loop).
ASYNC_RE: Final = r"step_with_batch_queue|event_loop_overlap"
GAP_CLASS_IDS: Final = (*(c for c, _ in GAP_CLASSES), "other")
#: A Python frame's function name: the text after ``file.py(line): ``.
FUNC_NAME: Final = pl.col("name").cast(pl.String).str.replace(r"^.*\(\d+\): ", "")


@dataclass(frozen=True)
class EngineSign:
    """The engine recognised (``engine``) with its evidence: matched names with row counts."""

    engine: str
    rows: int
    evidence: list[str]


def detect_engine(name_counts: pl.DataFrame) -> EngineSign | None:
    """The engine whose signs match the most host rows (``RANGE_KINDS``) of ``name_counts``
    (``kind, name, len``), kernel rows breaking ties; None when no sign matches (not a
    server)."""
    if name_counts.height == 0:
        return None
    rows = name_counts.filter(pl.col("kind").is_in([*RANGE_KINDS, "kernel"]))
    host = pl.col("kind").is_in(RANGE_KINDS)
    best: tuple[int, int] = (0, 0)
    found: EngineSign | None = None
    for engine, pattern in SIGNS.items():
        # (name last: equal counts in a stable order, whatever the table's row order)
        hit = rows.filter(pl.col("name").str.contains(pattern)).sort(
            [host, "len", pl.col("name").cast(pl.String)], descending=[True, True, False]
        )
        if hit.height == 0:
            continue
        n_host = int(hit.filter(host).get_column("len").sum())
        score = (n_host, int(hit.get_column("len").sum()) - n_host)
        if score > best:
            ev = [f"{k} {nm[:80]!r} x{c}" for k, nm, c in hit.head(5).iter_rows()]
            best, found = score, EngineSign(engine, sum(score), ev)
    return found


__all__ = [
    "ASYNC_RE",
    "FUNC_NAME",
    "GAP_CLASSES",
    "GAP_CLASS_IDS",
    "ITERATION_TIERS",
    "PHASE_WORDS",
    "RANGE_KINDS",
    "SGLANG_STEP_RE",
    "SIGNS",
    "TRTLLM_STEP_RE",
    "VLLM_EXECUTE_RE",
    "VLLM_NEW_CACHED_RE",
    "EngineSign",
    "detect_engine",
]
