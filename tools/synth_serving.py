"""Built serving traces: vLLM- and SGLang-shaped decode loops with exactly known iterations,
phases, host gaps (and their split) and graph replays, written in both formats by ``synth``.

``serving_trace(engine, cause)`` lays out, on one host thread and one stream:

- one prefill iteration (eager: prefill is never graphed), then decode iterations whose batch
  sizes are ``batches``; sizes in ``captured`` replay a graph (one graph launch, its nodes
  back to back), the others run eagerly (one launch per kernel: the GPU waits for the host);
- between iterations, on the host: sampling (after the forward's GPU work ended), output
  processing (detokenisation), the scheduler, then the next iteration's input preparation:
  the GPU is idle all along, so each gap's split is known to the ns (``Truth``);
- ``cause="scheduler"``: a long scheduler step (the first finding must be
  ``serving_scheduler_gap``); ``cause="eager"``: a short one, and a batch size without a graph
  whose eager launches leave the GPU idle (first finding ``serving_eager_decode``).

Names follow the engines (docs/serving.md): vLLM's ``execute_<tokens>_context_<n>(..)
_generation_<m>(..)`` annotation around ``gpu_model_runner.py(..): execute_model``; SGLang's
``model_runner.py(..): forward_extend`` / ``forward_decode`` frames (batch and tokens from the
``aten::linear`` input dims); TensorRT-LLM's ``[Executor] _forward_step`` NVTX range.

Variants (keywords of ``serving_trace``; the truth follows each):

- ``style``: vLLM ``"v1"`` (default) or ``"new_cached"`` (``execute_new_<n>_cached_<m>``, the
  model runner's ``gpu_model_runner: preprocess`` / ``bookkeeping`` annotations, the engine
  core's ``core step: update_from_output``: a scheduler class); SGLang ``"frames"`` (default),
  ``"replay"`` (``ModelRunner.forward`` around ``forward_decode`` when eager, around the graph
  runner's ``replay`` when graphed, all under the scheduler's ``run_batch``) or ``"step"``
  (``step[DECODE bs=N]`` / ``step[EXTEND bs=N toks=M]`` ranges as well);
- ``sampler_ns``: a sampler kernel launched outside the iterations, during each scheduler step
  (vLLM >= 0.11 samples after ``execute_model``): busy, so no gap;
- ``processes``: that many server processes (tensor-parallel workers) in one file, process
  ``k`` on device ``k``, ``k * 7 us`` later (the truth is process 0's);
- ``kernel``: the layers' kernel name (SGLang runs vLLM's ``vllm::`` kernels).
"""

from __future__ import annotations

import copy
from dataclasses import dataclass, field

from synth import SynthTrace

HIDDEN = 4096
VOCAB = 32_000
LAUNCH_NS = 5_000  # a launch call's host time
PICKUP_NS = 3_000  # launch start -> GPU start (the gap's "other" part)
KERNEL_NS = 20_000  # one layer kernel's GPU time
LAYERS = 12
GRAPH_LAUNCH_NS = 30_000


@dataclass
class IterTruth:
    """What a correct serving view reports for one iteration (ns)."""

    phase: str
    batch_size: int
    tokens: int
    graph: bool
    start_ns: int = 0
    dur_ns: int = 0
    gpu_start_ns: int = 0
    gpu_end_ns: int = 0
    busy_ns: int = 0
    gap: dict[str, int] = field(default_factory=dict)

    @property
    def host_gap_ns(self) -> int:
        return sum(self.gap.values())


@dataclass
class Truth:
    engine: str
    cause: str
    iterations: list[IterTruth] = field(default_factory=list)


#: The class of each host range of the gap (``engines.GAP_CLASSES``).
CLASSES = {
    "sched": "scheduler",
    "prep": "scheduler",
    "sample": "sampling",
    "detok": "detokenisation",
}


def _names(engine: str, style: str = "") -> dict[str, str]:
    if engine == "vllm" and style == "new_cached":
        return {
            "sched": "vllm/v1/core/sched/scheduler.py(240): schedule",
            "prep": "gpu_model_runner: preprocess",
            "sample": "gpu_model_runner: bookkeeping",
            "detok": "core step: update_from_output",
            "frame": "vllm/v1/worker/gpu_model_runner.py(3380): execute_model",
            "kernel": "void vllm::rotary_embedding_kernel<c10::BFloat16, true>",
        }
    if engine == "vllm":
        return {
            "sched": "vllm/v1/core/sched/scheduler.py(240): schedule",
            "prep": "vllm/v1/worker/gpu_model_runner.py(1518): _prepare_inputs",
            "sample": "vllm/v1/worker/gpu_model_runner.py(2370): _sample",
            "detok": "vllm/v1/engine/output_processor.py(410): process_outputs",
            "frame": "vllm/v1/worker/gpu_model_runner.py(3380): execute_model",
            "kernel": "void vllm::rotary_embedding_kernel<c10::BFloat16, true>",
        }
    if engine == "tensorrt_llm":  # NVTX only (an nsys trace has no Python frames)
        return {
            "sched": "_schedule",
            "prep": "_prepare_inputs",
            "sample": "_sample_async",
            "detok": "_handle_responses",
            "frame": "",
            "kernel": "void tensorrt_llm::kernels::fusedQKNormRopeKernel<__nv_bfloat16>",
        }
    return {
        "sched": "sglang/srt/managers/scheduler.py(1500): get_next_batch_to_run",
        "prep": "sglang/srt/managers/schedule_batch.py(1400): prepare_for_decode",
        "sample": "sglang/srt/model_executor/model_runner.py(1900): sample",
        "detok": "sglang/srt/managers/scheduler_output_processor_mixin.py(700): stream_output",
        "frame": "sglang/srt/model_executor/model_runner.py(1800): forward_{phase}",
        "kernel": "void flashinfer::BatchDecodeWithPagedKVCacheKernel<sgl_kernel>",
    }


def _classes(engine: str, style: str) -> dict[str, str]:
    if engine == "vllm" and style == "new_cached":  # update_from_output is the scheduler's
        return {**CLASSES, "detok": "scheduler"}
    if engine == "tensorrt_llm":  # no detokenisation name: the responses' handling is other
        return {**CLASSES, "detok": "other"}
    return CLASSES


def serving_trace(
    engine: str = "vllm",
    cause: str = "scheduler",
    *,
    batches: tuple[int, ...] = (8, 8, 8, 16, 16, 16, 8, 8),
    captured: tuple[int, ...] = (1, 2, 4, 8),
    prefill_tokens: int = 512,
    style: str = "",
    sampler_ns: int = 0,
    processes: int = 1,
    kernel: str | None = None,
) -> tuple[SynthTrace, Truth]:
    """A built server trace and its truth (module docstring)."""
    if engine not in ("vllm", "sglang", "tensorrt_llm") or cause not in ("scheduler", "eager"):
        raise ValueError(f"engine {engine!r} / cause {cause!r}")
    tr, nm, cls = SynthTrace(), _names(engine, style), _classes(engine, style)
    if kernel is not None:
        nm["kernel"] = kernel
    sched_ns = 400_000 if cause == "scheduler" else 20_000
    eager_host_ns = 120_000 if cause == "eager" else 25_000  # host per eager launch
    sample_ns, detok_ns, prep_ns = 30_000, 40_000, 50_000
    truth = Truth(engine, cause)
    t, prev_gpu_end = 10_000, None
    plan = [("prefill", prefill_tokens // 128, prefill_tokens, False)]
    plan += [("decode", b, b, b in captured) for b in batches]
    for phase, batch, tokens, graph in plan:
        it = IterTruth(phase, batch, tokens, graph)
        if prev_gpu_end is not None:  # the previous iteration's output processing
            tr.cpu_range(nm["detok"], t, detok_ns, kind=_kind(engine, nm["detok"]))
            t += detok_ns
        tr.cpu_range(nm["sched"], t, sched_ns, kind=_kind(engine, nm["sched"]))
        if sampler_ns and prev_gpu_end is not None:  # sampling launched after the forward
            if sampler_ns + PICKUP_NS + LAUNCH_NS > sched_ns:
                raise ValueError("sampler_ns must fit in the scheduler step")
            tr.launch("sampler_kernel", t, LAUNCH_NS, t + PICKUP_NS, sampler_ns)
        t += sched_ns
        it.start_ns = t
        tr.cpu_range(nm["prep"], t, prep_ns, kind=_kind(engine, nm["prep"]))
        t = _forward(tr, nm, it, t + prep_ns, eager_host_ns)
        tr.cpu_range(nm["sample"], t, sample_ns, kind=_kind(engine, nm["sample"]))
        t += sample_ns
        it.dur_ns = t - it.start_ns
        _engine_range(tr, engine, nm, it, style, len(truth.iterations))
        it.gap = dict.fromkeys(("sampling", "detokenisation", "scheduler", "other"), 0)
        if prev_gpu_end is not None:
            named = sample_ns + detok_ns + sched_ns + prep_ns
            it.gap["other"] = it.gpu_start_ns - prev_gpu_end - named
            for part, ns in (("sample", sample_ns), ("detok", detok_ns), ("prep", prep_ns)):
                it.gap[cls[part]] += ns
            it.gap[cls["sched"]] += sched_ns - sampler_ns  # the sampler kernel is busy
        prev_gpu_end = it.gpu_end_ns
        truth.iterations.append(it)
    for k in range(1, processes):
        _add_process(tr, k)
    return tr, truth


def _kind(engine: str, name: str) -> str:
    """Python frames read ``file.py(N): fn``; the rest (NVTX, record_function) annotations."""
    return "python" if engine != "tensorrt_llm" and ".py(" in name else "annotation"


def _add_process(tr: SynthTrace, k: int) -> None:
    """A copy of process 0's events as process ``k`` on device ``k``, ``k * 7 us`` later."""
    for e in [copy.deepcopy(e) for e in tr.events if e.pid is None or e.pid == tr.pid]:
        e.start_ns += 7_000 * k
        if e.correlation is not None:
            e.correlation += 1_000_000 * k
        if e.external_id is not None:
            e.external_id += 1_000_000 * k
        if e.device is not None:
            e.device = k
        else:
            e.pid = tr.pid + k
        e.tid = (e.tid or 1) + 10 * k
        tr.events.append(e)


def _forward(tr: SynthTrace, nm: dict[str, str], it: IterTruth, t: int, eager_host: int) -> int:
    """The iteration's GPU work from host time ``t``: the layers (a graph replay, or one
    launch per kernel ``eager_host`` ns apart), then the logits; the host waits for the GPU.
    Fills ``it``'s GPU span and busy time; returns the host time after the wait."""
    dims = [[it.tokens, HIDDEN], [HIDDEN, HIDDEN], [HIDDEN]]
    tr.cpu_range("aten::linear", t, 2_000, args={"Input Dims": dims})
    t += 2_000
    gpu = it.gpu_start_ns = t + PICKUP_NS
    if it.graph:
        nodes = [(nm["kernel"], gpu + i * KERNEL_NS, KERNEL_NS) for i in range(LAYERS)]
        tr.graph_launch(t, GRAPH_LAUNCH_NS, nodes, api="cudaGraphLaunch")
        t += GRAPH_LAUNCH_NS
        gpu += LAYERS * KERNEL_NS
    else:
        per = eager_host if it.phase == "decode" else LAUNCH_NS
        for _ in range(LAYERS):
            start = max(gpu, t + PICKUP_NS)
            tr.launch(nm["kernel"], t, LAUNCH_NS, start, KERNEL_NS)
            gpu = start + KERNEL_NS
            t += per
    # the logits (eager, after the graph): one row per sequence
    t = max(t, gpu)
    logits = [[it.batch_size, HIDDEN], [VOCAB, HIDDEN]]
    tr.cpu_range("aten::linear", t, 2_000, args={"Input Dims": logits})
    tr.launch("lm_head_gemm_kernel", t, LAUNCH_NS, t + PICKUP_NS, KERNEL_NS)
    it.busy_ns = (LAYERS + 1) * KERNEL_NS
    it.gpu_end_ns = t + PICKUP_NS + KERNEL_NS
    return it.gpu_end_ns


def _engine_range(
    tr: SynthTrace, engine: str, nm: dict[str, str], it: IterTruth, style: str, i: int
) -> None:
    """The engine's own iteration range(s) around ``it`` (the ``i``-th)."""
    if engine == "vllm":
        name = _range_name(engine, it.phase, it.batch_size, it.tokens)
        if style == "new_cached":
            new = it.batch_size if it.phase == "prefill" else 0
            name = f"execute_new_{new}_cached_{it.batch_size - new}"
        tr.cpu_range(name, it.start_ns, it.dur_ns, kind="annotation")
        tr.cpu_range(nm["frame"], it.start_ns, it.dur_ns, kind="python")
    elif engine == "tensorrt_llm":
        c, g = (it.batch_size, 0) if it.phase == "prefill" else (0, it.batch_size)
        name = f"[Executor] _forward_step {i}: {c} ctx reqs, {g} gen reqs"
        tr.cpu_range(name, it.start_ns, it.dur_ns, kind="annotation")
    else:
        mode = "extend" if it.phase == "prefill" else "decode"
        frame = nm["frame"].format(phase=mode)
        if style in ("replay", "step"):
            tr.cpu_range(
                "sglang/srt/managers/scheduler.py(900): run_batch",
                it.start_ns, it.dur_ns, kind="python",
            )  # fmt: skip
            tr.cpu_range(
                "sglang/srt/model_executor/model_runner.py(1790): forward",
                it.start_ns, it.dur_ns, kind="python",
            )  # fmt: skip
            if it.graph:
                frame = "sglang/srt/model_executor/cuda_graph_runner.py(700): replay"
        if style == "step":
            toks = f" toks={it.tokens}" if mode == "extend" else ""
            step = f"step[{mode.upper()} bs={it.batch_size}{toks}]"
            tr.cpu_range(step, it.start_ns, it.dur_ns, kind="annotation")
        tr.cpu_range(frame, it.start_ns, it.dur_ns, kind="python")


def _range_name(engine: str, phase: str, batch: int, tokens: int) -> str:
    if engine != "vllm":
        return ""
    ctx, gen = (batch, 0) if phase == "prefill" else (0, batch)
    return f"execute_{tokens}_context_{ctx}(sq{tokens})_generation_{gen}(sq{gen})"


__all__ = ["IterTruth", "Truth", "serving_trace"]
