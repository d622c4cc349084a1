"""Every remedy's precondition, in one table: advice the trace already shows applied is not given.

``remedies`` says what to do when nothing of it is in place. ``RULES`` declares, per category
(and framework), a condition on the trace's facts (``facts``, read once from the
trace's names and device list) under which that advice is wrong or pointless, the note that
says what the trace shows, and the next step instead. The first rule that holds wins; no rule:
the table remedy stands. Two kinds of rule:

- **already applied** (the trace shows it): DataLoader workers (``_MultiProcessingDataLoaderIter``),
  CUDA/HIP graph replay (``cudaGraphLaunch``), ``torch.compile`` ranges, fused/foreach optimizer
  kernels, pinned copies, GEMM/conv kernels already on tensor cores (tf32/bf16/fp16/fp8 names);
- **the chip cannot** (``facts.ChipFacts``, from the peak table): no bf16/TF32 (Volta, Turing:
  fp16 AMP), TF32 no faster than FP32 (GeForce Ampere/Ada) or absent (MI200: bf16), no tensor
  cores at all. AMD chips are told "matrix cores".

``apply`` is called on every finding once it is built (``findings.build``, and by
``busy_losses.efficiency_finding`` for the kernel findings a job's merge rebuilds): it replaces
the table text inside the finding's remedy (a remedy another rule composed around it keeps its
other parts; one worded elsewhere, without the table text, is left alone), adds the note (if
any: a rule that only drops a part of the advice has none) to the title and sets
``figures["precondition"]`` to the rule's id. Applying it twice changes nothing (the table
text is gone after the first time).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import replace
from typing import Final, NamedTuple

from traceforensics.analysis.facts import TraceFacts
from traceforensics.analysis.findings.remedies import VENDOR_WORDS, remedy
from traceforensics.analysis.findings.results import Finding
from traceforensics.analysis.program import Program


class Rule(NamedTuple):
    """``holds(facts)``: the table remedy of ``category`` (for ``frameworks``; empty: any) is
    wrong for this trace; ``note`` (title) says why, ``text`` is the advice instead. Both may
    use ``{rt}``/``{kprof}``/``{prof}`` (``remedies.VENDOR_WORDS``), ``{cores}`` (tensor or
    matrix cores) and ``{types}`` (the tensor-core dtypes the GEMM/conv kernels use)."""

    id: str
    category: str
    frameworks: tuple[str, ...]
    holds: Callable[[TraceFacts], bool]
    note: str
    text: str


def _fp16_only(f: TraceFacts) -> bool:
    c = f.chip
    return c.known and c.has("fp16") and not c.has("bf16") and not c.has("tf32")


def _no_fast_tf32(f: TraceFacts) -> bool:
    c = f.chip
    return c.known and c.has("bf16") and (not c.has("tf32") or c.tf32_gain is False)


def _no_tensor_cores(f: TraceFacts) -> bool:
    return f.chip.known and not f.chip.tensor_cores


def _matmuls_on_tensor_cores(f: TraceFacts) -> bool:
    return f.tensor_core_matmuls > 0 and f.fp32_matmuls == 0


def _graphs(f: TraceFacts) -> bool:
    return f.graph_replays > 0


_PT: Final = ("pytorch",)
_FP16_AMP: Final = (
    "fp16 autocast: torch.autocast('cuda', dtype=torch.float16) with a GradScaler, and "
    "channels_last for convolutions (no bf16/TF32 on this GPU)"
)
_BF16_AMP: Final = "bf16 autocast: torch.autocast('cuda', dtype=torch.bfloat16), and channels_last"
_FP16_NOTE: Final = "this GPU has fp16 {cores} only, no bf16/TF32"
_TF32_NOTE: Final = "TF32 is absent or no faster than FP32 on this GPU"
_NO_TC_NOTE: Final = "this GPU has no {cores}"

#: Every precondition, first match wins per finding (module docstring).
RULES: Final[tuple[Rule, ...]] = (
    # -- input pipeline
    Rule(
        "loader_workers",
        "data_loading",
        _PT,
        lambda f: f.loader == "multiprocess",
        "the DataLoader already runs worker processes (_MultiProcessingDataLoaderIter)",
        "the workers do not keep up: more num_workers, a larger prefetch_factor, "
        "persistent_workers=True, cheaper transforms or GPU decoding (worker start-up in the "
        "first step is one-off)",
    ),
    # -- launch-bound work
    Rule(
        "graph_replay",
        "launch_overhead",
        (),
        _graphs,
        "the step is already replayed as a graph ({rt}GraphLaunch)",
        "fewer, larger kernels inside the graph: fuse adjacent kernels, batch more work per "
        "kernel (the gaps left are between the graph's own kernels)",
    ),
    Rule(
        "graph_replay",
        "gpu_pickup",
        (),
        _graphs,
        "the step is already replayed as a graph ({rt}GraphLaunch)",
        "fewer, larger kernels inside the graph: fuse adjacent kernels, batch more work per kernel",
    ),
    Rule(
        "compiled",
        "launch_overhead",
        _PT,
        lambda f: f.mostly_compiled,
        "most kernels are already torch.compile (Inductor) kernels",
        "replay the compiled step as a CUDA graph (torch.compile mode='reduce-overhead'), "
        "larger batch, fused/foreach optimizer",
    ),
    Rule(
        "fused_optimizer",
        "launch_overhead",
        _PT,
        lambda f: f.fused_optimizer > 0,
        "",
        "launch fewer, larger kernels: torch.compile / fusion, CUDA graphs, larger batch",
    ),
    # -- copies
    Rule(
        "pinned_copies",
        "memcpy",
        _PT,
        lambda f: f.pinned_copies > 0 and f.pageable_copies == 0,
        "the copies already come from pinned memory",
        "copy with non_blocking=True on a side stream so copies overlap compute; copy less "
        "often (keep tensors on the GPU across steps)",
    ),
    Rule(
        "pinned_copies",
        "transfer_bound",
        _PT,
        lambda f: f.pinned_copies > 0 and f.pageable_copies == 0,
        "the copies already come from pinned memory",
        "overlap the copies with compute (non_blocking=True, a side stream), keep tensors on "
        "the GPU across steps, move preprocessing to the GPU",
    ),
    # -- the chip and the kernels' math
    Rule(
        "no_tensor_cores",
        "kernel_efficiency",
        (),
        _no_tensor_cores,
        _NO_TC_NOTE,
        "aligned shapes, fuse memory-bound kernels, larger batches; check the slowest kernels "
        "with {kprof}",
    ),
    Rule(
        "matmuls_on_tensor_cores",
        "kernel_efficiency",
        _PT,
        _matmuls_on_tensor_cores,
        "the GEMM/conv kernels already run on {cores} ({types})",
        "aligned shapes (multiples of 8/16), channels_last for convolutions, torch.compile to "
        "fuse memory-bound chains; check the slowest kernels with {kprof}",
    ),
    Rule(
        "matmuls_on_tensor_cores",
        "kernel_efficiency",
        (),
        _matmuls_on_tensor_cores,
        "the GEMM/conv kernels already run on {cores} ({types})",
        "aligned shapes (multiples of 8/16), NHWC convolutions, fuse memory-bound kernels; "
        "check the slowest kernels with {kprof}",
    ),
    Rule("fp16_only_chip", "kernel_efficiency", _PT, _fp16_only, _FP16_NOTE, _FP16_AMP),
    Rule(
        "fp16_only_chip",
        "kernel_efficiency",
        (),
        _fp16_only,
        _FP16_NOTE,
        "FP16 data with loss scaling on the {cores} (no BF16/TF32 on this GPU), NHWC layout "
        "for convolutions, fuse memory-bound kernels",
    ),
    Rule("fp16_only_chip", "fp32_matmul", _PT, _fp16_only, _FP16_NOTE, _FP16_AMP),
    Rule(
        "fp16_only_chip",
        "fp32_matmul",
        (),
        _fp16_only,
        _FP16_NOTE,
        "FP16 data with loss scaling on the {cores} (no BF16/TF32 on this GPU)",
    ),
    Rule("no_fast_tf32", "kernel_efficiency", _PT, _no_fast_tf32, _TF32_NOTE, _BF16_AMP),
    Rule("no_fast_tf32", "fp32_matmul", _PT, _no_fast_tf32, _TF32_NOTE, _BF16_AMP),
    Rule(
        "no_fast_tf32",
        "fp32_matmul",
        (),
        _no_fast_tf32,
        _TF32_NOTE,
        "BF16 (or FP16) data so the GEMMs/convolutions run on the {cores} at full rate",
    ),
)


def _words(program: Program) -> dict[str, str]:
    facts = program.facts
    words = dict(VENDOR_WORDS.get(program.vendor, VENDOR_WORDS["unknown"]))
    amd = program.vendor == "amd" or facts.chip.vendor == "amd"
    words["cores"] = "matrix cores" if amd else "tensor cores"
    words["types"] = ", ".join(facts.matmul_types) or "tensor-core types"
    return words


def rule_for(category: str, program: Program) -> Rule | None:
    """The first rule of ``RULES`` that holds for ``category`` in ``program``, or None."""
    for rule in RULES:
        if rule.category != category:
            continue
        if rule.frameworks and program.framework not in rule.frameworks:
            continue
        if rule.holds(program.facts):
            return rule
    return None


def checked(category: str, program: Program) -> tuple[str, str | None, str | None]:
    """``(remedy, note, rule id)``: the table remedy of ``category`` when no rule holds
    (note and id None), else the rule's advice (the table remedy where the rule gives none),
    its note and id, in the program's words."""
    table = remedy(category, program)
    rule = rule_for(category, program)
    if rule is None:
        return table, None, None
    words = _words(program)
    text = rule.text.format_map(words) if rule.text else table
    return text, rule.note.format_map(words), rule.id


def apply(finding: Finding, program: Program) -> Finding:
    """``finding`` with its remedy checked against the trace (rules in the module docstring)."""
    if "precondition" in finding.figures or finding.category not in _CATEGORIES:
        return finding
    table = remedy(finding.category, program)
    text, note, rule = checked(finding.category, program)
    if rule is None or table not in finding.remedy:
        return finding
    return replace(
        finding,
        title=f"{finding.title} ({note})" if note else finding.title,
        remedy=finding.remedy.replace(table, text),
        figures={**finding.figures, "precondition": rule},
    )


_CATEGORIES: Final = frozenset(r.category for r in RULES)

__all__ = ["RULES", "Rule", "apply", "checked", "rule_for"]
