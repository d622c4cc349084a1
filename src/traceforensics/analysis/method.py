"""The investigation: one device's analysis read in the order GPU engineers follow (issue 47).

``investigation(analysis)`` answers six checks, always in this order (ids are a contract:
JSON ``method[].check``; the rules in full: docs/method.md):

``step_time``      is the step time stable? p50, p95, CV = stdev / mean (population) of the
                   steps' ``dur_ns`` (``step_summary``); stable: CV <= ``STABLE_CV``, no
                   outlier. A first step that is one-off warm-up (``one_off``'s rule), or
                   the first of 3+ tiled windows (it misses its lead-in), is named apart,
                   with the CV of the others; no steps: how to mark them
``busy_idle``      how much is GPU work: the device's ``busy_ns / window_ns``, and inside the
                   steps ``sum(busy_ns) / sum(dur_ns)`` when they do not cover the window
``idle_cause``     if idle, which cause: data loading and copy waits first (``data_loading``,
                   ``memcpy``), then the steady state's top cause (the idle findings; else
                   ``ranked_causes``) with its share of idle and of the window, the one-off
                   rest; the copies no compute overlaps (``exposed_copy_ns``)
``kernels``        if busy, which kernels, how efficient: the top compute kernel's share of
                   kernel time (collectives are ``communication``'s), its measured class
                   (``measured_class``), MFU / TFLOPS if known
``communication``  waits across GPUs: communication and its exposed part; a job's straggler
                   (``ranks.straggler``) and this rank's wait in collectives
``model``          shapes (``work_size``: ``DeviceWork.sentence()``), phases (optimizer's and
                   backward's share of the steps' GPU busy), precision (``program.facts``)

Each answer is one sentence with its figures (ns as ms/µs, shares as %); ``evidence`` names
the fields (and steps, kernels) the figures come from. The walk stops at the top finding:
``stop`` is true on the check ``check_of(analysis.findings[0].category)`` and on no other; no
finding, no stop. A job (several devices) gets one walk, for the device of the top finding,
else the device idle the largest share of its window (``walk_device``). Without GPU work
there is no walk (an empty list: the reports say so in one line).

Typed by the protocols below (``pipeline``, which holds ``Analysis``, imports this module).
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass
from typing import Any, Final

import numpy as np

from traceforensics.analysis.cause_table import (
    CAUSES,
    COMMUNICATION,
    DATA_LOADING,
    MEMCPY,
    ranked_causes,
)
from traceforensics.analysis.devices import DeviceRecord
from traceforensics.analysis.method_views import AnalysisView, StepView
from traceforensics.analysis.one_off import SETUP_RE, WARMUP_MIN_STEPS, WARMUP_STEP_FACTOR
from traceforensics.model.comm import is_comm_kernel
from traceforensics.model.units import fmt_ns, fmt_pct

#: The checks, in the method's order (a contract: JSON ``method[].check``).
CHECKS: Final[tuple[str, ...]] = (
    "step_time", "busy_idle", "idle_cause", "kernels", "communication", "model",
)  # fmt: skip
#: Step time is stable when its coefficient of variation is at most this (and no outlier).
STABLE_CV: Final = 0.10
#: Finding category -> the check it belongs to (idle cause ids: ``idle_cause``; the rest by
#: ``check_of``'s rules). Ids: ``findings/results.py`` (``CATEGORIES``).
CHECK_OF_CATEGORY: Final[Mapping[str, str]] = {
    **dict.fromkeys(CAUSES, "idle_cause"),
    # the GPU idle while the host sat in a collective: GPUs waiting for each other
    COMMUNICATION: "communication",
    "one_off": "step_time",
    "transfer_bound": "idle_cause",
    "kernel_efficiency": "kernels",
    "fp32_matmul": "kernels",
    "layout_conversion": "kernels",
    "exposed_communication": "communication",
    "straggler_wait": "communication",
    "zero_grad": "model",
    "optimizer_step": "model",
    # issue 48: a server's host gaps and eager decode cost idle; memory is the model's
    "serving_scheduler_gap": "idle_cause",
    "serving_eager_decode": "idle_cause",
    "allocator_churn": "idle_cause",
    "reserved_unused": "model",
    "memory_near_capacity": "model",
}
#: Findings that hold idle time under their own name (it is not in the idle-cause findings).
IDLE_FINDINGS: Final = frozenset(
    {"serving_scheduler_gap", "serving_eager_decode", "allocator_churn"}
)
#: A category not in the table belongs to ``model`` when its id says optimizer, shapes, work
#: size, phases or precision (findings being added by issue 47), else to ``busy_idle``.
_MODEL_WORDS: Final = re.compile(r"optimi[sz]er|shape|work|phase|precision|dtype")
#: Characters of a kernel name in an answer, and in the evidence (names can run to KBs).
_NAME_CHARS: Final = 60
_EVIDENCE_CHARS: Final = 200
#: The measured classes (``kernels.bound.bound_class``; ``unknown`` is not a class).
_MEASURED: Final = ("compute", "memory", "latency")


@dataclass(frozen=True)
class MethodLine:
    """One check of the walk: ``answer`` one sentence with figures, ``evidence`` where they
    come from, ``stop`` whether the top finding belongs to this check."""

    check: str
    answer: str
    evidence: str
    stop: bool

    def to_json(self) -> dict[str, Any]:
        """``{check, answer, evidence, stop}``."""
        return asdict(self)


# ------------------------------------------------------------------------------------ the walk
def check_of(category: str) -> str:
    """The check a finding category belongs to (``CHECK_OF_CATEGORY``, then ``_MODEL_WORDS``,
    else ``busy_idle``: every finding stops the walk somewhere)."""
    if category in CHECK_OF_CATEGORY:
        return CHECK_OF_CATEGORY[category]
    return "model" if _MODEL_WORDS.search(category) else "busy_idle"


def walk_device(analysis: AnalysisView) -> tuple[DeviceRecord, str] | None:
    """The device the walk reads and why: the top finding's device, else the device idle the
    largest share of its window (ties: the first in rank, device order); None without GPU
    work. ``why`` is "" for a trace with one device."""
    devices = list(analysis.devices)
    if not devices:
        return None
    many = len(devices) > 1
    if analysis.findings:
        f = analysis.findings[0]
        found = next((d for d in devices if (d.rank, d.device) == (f.rank, f.device)), None)
        if found is not None:
            return found, "the top finding's device" if many else ""
    worst = min(devices, key=lambda d: (d.busy_fraction, d.rank, d.device))
    return worst, f"the most idle of {len(devices)} devices" if many else ""


def investigation(analysis: AnalysisView) -> list[MethodLine]:
    """The six checks for the walk's device (module docstring); [] without GPU work."""
    chosen = walk_device(analysis)
    if chosen is None:
        return []
    d = chosen[0]
    stop = check_of(analysis.findings[0].category) if analysis.findings else None
    built = {
        "step_time": _step_time(analysis, d),
        "busy_idle": _busy_idle(analysis, d),
        "idle_cause": _idle_cause(analysis, d),
        "kernels": _kernels(analysis, d),
        "communication": _communication(analysis, d),
        "model": _model(analysis, d),
    }
    return [MethodLine(c, *built[c], stop=c == stop) for c in CHECKS]


def measured_class(analysis: AnalysisView, rank: int, device: int, kernel: str) -> str | None:
    """The measured class of one of the device's top kernels with its figures, when Nsight
    Compute is joined (``tf analyze --ncu``: a ``kernels.ncu.kernels[]`` row with ``source ==
    "ncu"``): ``memory-bound (Nsight Compute: SM 38%, memory 85%, DRAM 81%, occupancy
    45%)``; None when the kernel is not measured (its bound stays an estimate). The one place
    the walk reads measured kernel figures (read by name: the join is optional)."""
    join = getattr(analysis.kernels, "ncu", None)
    for row in getattr(join, "kernels", None) or ():
        got = (row.rank, row.device, row.name, row.source, row.bound)
        if got[:4] != (rank, device, kernel, "ncu") or got[4] not in _MEASURED:
            continue
        named = (
            ("SM", "sm_pct"),
            ("memory", "mem_pct"),  # the figure the class is judged on (DRAM beside it)
            ("DRAM", "dram_pct"),
            ("occupancy", "achieved_occupancy_pct"),
        )
        values = [(label, getattr(row.ncu, field, None)) for label, field in named]
        parts = [f"{label} {v:.0f}%" for label, v in values if isinstance(v, int | float)]
        return f"{row.bound}-bound (Nsight Compute: {', '.join(parts) or 'measured'})"
    return None


# ------------------------------------------------------------------------------ the six checks
Answer = tuple[str, str]  # (answer, evidence)


def _count(n: int, word: str) -> str:  # ``1 step``, ``6 steps``
    return f"{n} {word}{'' if n == 1 else 's'}"


def _cut(name: str, chars: int) -> str:
    return name if len(name) <= chars else name[: chars - 1] + "…"


def _where(d: DeviceRecord) -> str:
    return f"rank {d.rank} GPU {d.device}"  # (as the verdicts name a device)


def _steps(analysis: AnalysisView, d: DeviceRecord) -> list[StepView]:
    """The device's steps in time order."""
    mine = [s for s in analysis.idle.steps if (s.rank, s.device) == (d.rank, d.device)]
    return sorted(mine, key=lambda s: s.start_ns)


def _warmup_first(steps: Sequence[StepView]) -> bool:
    """Whether the first step is one-off warm-up (``one_off``'s rule, on the step table)."""
    if steps and re.search(SETUP_RE, steps[0].name):
        return True
    dur = np.array([s.dur_ns for s in steps], dtype=np.float64)
    return bool(dur.size >= WARMUP_MIN_STEPS and dur[0] > WARMUP_STEP_FACTOR * np.median(dur[1:]))


def _cv(durations: Sequence[int]) -> float:  # stdev / mean (population), as step_summary
    d = np.asarray(durations, dtype=np.float64)
    return float(d.std() / d.mean()) if d.size and d.mean() > 0 else 0.0


def _step_time(analysis: AnalysisView, d: DeviceRecord) -> Answer:
    steps = _steps(analysis, d)
    key = (d.rank, d.device)
    summ = next((m for m in analysis.idle.step_summary if (m.rank, m.device) == key), None)
    if not steps or summ is None:
        return (
            "No steps were found (0 step ranges), so step stability cannot be judged: mark "
            "each step with a range named like a step (ProfilerStep#N from the profiler's "
            "step(), an NVTX or annotation range 'step N') or pass --step-pattern.",
            f"steps[] (none for {_where(d)})",
        )
    names = f"{steps[0].name} .. {steps[-1].name}" if len(steps) > 1 else steps[0].name
    evidence = f"step_summary {_where(d)} ({summ.source}): steps {names}"
    if len(steps) == 1:
        return (
            f"Only 1 step was recorded ({fmt_ns(steps[0].dur_ns)}), so step stability cannot "
            "be judged: record several steps after warm-up.",
            evidence,
        )
    warm = _warmup_first(steps)
    # a tiled window runs from the last step's GPU work: the first has none before it, so it
    # misses its own lead-in (loading, the host prologue) and is not the steps' equal
    partial = not warm and len(steps) >= 3 and analysis.options.steps.window == "tiled"
    apart = warm or partial
    steady_cv = _cv([s.dur_ns for s in steps[1:]]) if apart else summ.cv
    slow = [o for o in summ.outliers if not (apart and o.name == steps[0].name)]
    stable = steady_cv <= STABLE_CV and not slow
    word = "is stable" if stable else "varies"
    if warm and stable:
        word = "is stable after the warm-up step"
    text = (
        f"Step time {word}: {len(steps)} steps, p50 {fmt_ns(summ.p50_ns)}, "
        f"p95 {fmt_ns(summ.p95_ns)}, CV {summ.cv:.2f}"
    )
    if warm:
        text += (
            f" ({steps[0].name} is one-off warm-up of {fmt_ns(steps[0].dur_ns)}; "
            f"CV {steady_cv:.2f} without it)"
        )
    elif partial:
        text += (
            f" (the first window, {steps[0].name}, {fmt_ns(steps[0].dur_ns)}, starts at its "
            f"first GPU work and misses its lead-in; CV {steady_cv:.2f} without it)"
        )
    if slow:
        top = max(slow, key=lambda o: o.excess_ns)
        more = f" and {_count(len(slow) - 1, 'more slow step')}" if len(slow) > 1 else ""
        text += f"; slowest {top.name} +{fmt_ns(top.excess_ns)} ({top.reason}){more}"
    return text + ".", evidence


def _busy_idle(analysis: AnalysisView, d: DeviceRecord) -> Answer:
    text = (
        f"The GPU is busy {fmt_pct(d.busy_fraction)} of its {fmt_ns(d.window_ns)} window "
        f"({fmt_ns(d.busy_ns)} busy, {fmt_ns(d.idle_ns)} idle)"
    )
    evidence = f"devices[{_where(d)}].busy_ns / window_ns ({d.window_kind} window)"
    steps = _steps(analysis, d)
    span = sum(s.dur_ns for s in steps)
    # the steps' own share only where they are not the window itself (start-up, a tail)
    if span > 0 and abs(span - d.window_ns) > 0.01 * d.window_ns:
        busy = sum(s.busy_ns for s in steps)
        within = f"{fmt_pct(busy / span)} of {fmt_ns(span)}"
        text += f"; inside its {_count(len(steps), 'step')} busy {within}"
        evidence += "; steps[].busy_ns / dur_ns"
    return text + ".", evidence


def _idle_cause(analysis: AnalysisView, d: DeviceRecord) -> Answer:
    evidence = f"devices[{_where(d)}].idle_by_cause"
    ranked = ranked_causes(d.idle_by_cause)
    idle = d.idle_ns
    if idle <= 0 or not ranked:
        no = f"The GPU has no idle time (0 ns of its {fmt_ns(d.window_ns)} window), so there"
        return no + " is no idle cause to look for.", evidence
    load, copy = d.idle_by_cause.get(DATA_LOADING, 0), d.idle_by_cause.get(MEMCPY, 0)
    text = (
        f"Of {fmt_ns(idle)} idle, data loading takes {fmt_ns(load)} ({fmt_pct(load / idle)}) "
        f"and copy waits {fmt_ns(copy)} ({fmt_pct(copy / idle)})"
    )
    # the steady state's causes (the idle findings: one-off start-up and warm-up left out;
    # a server's gaps and the loop's allocator calls hold their idle under their own names)
    steady = {
        f.category: f.recoverable_ns
        for f in analysis.findings
        if (f.rank, f.device) == (d.rank, d.device)
        and (f.category in CAUSES or f.category in IDLE_FINDINGS)
    }
    top, top_ns = max(steady.items(), key=lambda kv: kv[1]) if steady else ranked[0]
    where = "in the steady state " if steady else ""
    if top in (DATA_LOADING, MEMCPY):
        text += f"; {top} is the top cause {where}({fmt_pct(top_ns / d.window_ns)} of the window)"
    else:
        text += (
            f"; the top cause {where}is {top}, {fmt_ns(top_ns)} ({fmt_pct(top_ns / idle)} of "
            f"idle, {fmt_pct(top_ns / d.window_ns)} of the window)"
        )
    one_off = idle - sum(steady.values()) if steady else 0
    if one_off > 0.01 * idle:
        text += f"; {fmt_ns(one_off)} more is one-off (start-up, warm-up)"
        evidence += "; findings (steady idle by cause)"
    evidence += f" ({DATA_LOADING}, {MEMCPY}; top {top})"
    if d.exposed_copy_ns > 0:
        text += f"; copies no compute overlaps take {fmt_ns(d.exposed_copy_ns)}"
        evidence += "; exposed_copy_ns"
    return text + ".", evidence


def _kernels(analysis: AnalysisView, d: DeviceRecord) -> Answer:
    evidence = f"devices[{_where(d)}].top_kernels"
    if d.kernel_count == 0 or not d.top_kernels:
        no = f"No kernel ran on this GPU ({d.kernel_count} kernels), so there is no kernel"
        return no + " efficiency to judge.", evidence
    # collectives are the communication check's: the top compute kernel
    compute = [(i, k) for i, k in enumerate(d.top_kernels) if not is_comm_kernel(k.name)]
    if not compute:
        shown = len(d.top_kernels)
        return (
            f"The {_count(shown, 'kernel')} with most time are all collectives (the "
            "communication check), so no compute kernel stands out."
        ), evidence
    i, k = compute[0]
    text = (
        f"Of {d.kernel_count} kernels, the top compute one ({_cut(k.name, _NAME_CHARS)}) takes "
        f"{fmt_pct(k.share_of_kernel_time)} of kernel time ({fmt_ns(k.total_ns)}, x{k.count})"
    )
    cls = measured_class(analysis, d.rank, d.device, k.name)
    if cls:
        text += f", measured {cls}"
    evidence += f"[{i}]: {_cut(k.name, _EVIDENCE_CHARS)}"
    key = (d.rank, d.device)
    row = next((m for m in analysis.kernels.mfu_by_device if (m.rank, m.device) == key), None)
    if row is None or row.tflops is None:
        return text + "; MFU unknown (no FLOPs model covers these kernels).", evidence
    if row.mfu is None:
        text += f"; {row.tflops:.2f} TFLOPS achieved, MFU unknown (no peak for this GPU)"
    else:
        flag = ", suspect" if row.suspect else ""
        peak = f" of {row.peak_tflops:.1f}" if row.peak_tflops else ""
        text += f"; MFU {fmt_pct(row.mfu)} ({row.tflops:.2f}{peak} TFLOPS{flag})"
    return text + ".", evidence + "; mfu.devices"


def _communication(analysis: AnalysisView, d: DeviceRecord) -> Answer:
    evidence = f"devices[{_where(d)}].comm_ns, exposed_comm_ns"
    ranks = analysis.ranks
    rows = list(ranks.per_rank) if ranks is not None else []
    job = len({r.rank for r in rows}) >= 2
    if d.comm_ns == 0 and not job:
        no = "No communication ran on this GPU (0 ns of collectives), so it waits for no other"
        return no + " GPU.", evidence
    share = d.exposed_comm_ns / d.window_ns if d.window_ns else 0.0
    text = (
        f"Communication takes {fmt_ns(d.comm_ns)}, of which {fmt_ns(d.exposed_comm_ns)} "
        f"({fmt_pct(share)} of the window) no compute overlaps"
    )
    if ranks is not None and job:
        evidence += "; ranks.straggler, ranks.per_rank"
        lead = ranks.straggler
        mine = next((r for r in rows if (r.rank, r.device) == (d.rank, d.device)), None)
        if lead is not None:
            wait = lead.waited_for_ns if lead.waited_for_ns > 0 else lead.others_wait_ns
            text += (
                f"; rank {lead.rank} is the job's straggler ({lead.cause}), the others wait "
                f"{fmt_ns(wait)} each"
            )
        elif not ranks.matched_collectives:
            text += f"; no collective was matched across the {len(rows)} ranks"
        else:
            text += f"; no straggler among {len(rows)} ranks"
        if mine is not None:
            text += f"; this rank waits {fmt_ns(mine.comm_wait_ns)} in collectives"
    return text + ".", evidence


def _model(analysis: AnalysisView, d: DeviceRecord) -> Answer:
    evidence = []
    key = (d.rank, d.device)
    work = next((w for w in analysis.work_size if (w.rank, w.device) == key), None)
    if work is not None:
        shapes = work.sentence().strip().rstrip(".")
        evidence.append(f"work_size[{_where(d)}] ({work.verdict})")
    else:
        shapes = "work size per step not measured (0 steps sized)"
    phased = [s for s in _steps(analysis, d) if s.phases]
    busy = sum(s.busy_ns for s in phased)
    if busy > 0:
        opt = sum(s.phases["optimizer"].gpu_ns for s in phased if "optimizer" in s.phases)
        back = sum(s.phases["backward"].gpu_ns for s in phased if "backward" in s.phases)
        phases = (
            f"the optimizer takes {fmt_pct(opt / busy)} and backward {fmt_pct(back / busy)} "
            f"of GPU busy in {_count(len(phased), 'step')}"
        )
        evidence.append("steps[].phases (optimizer, backward gpu_ns / busy_ns)")
    else:
        phases = "phases not split (0 steps with phases)"
    facts = analysis.program.facts
    matmuls = sum(facts.matmul_rows.values())
    if matmuls:
        used = ", ".join(facts.matmul_types) or "none"
        precision = (
            f"{facts.fp32_matmuls} of {matmuls} GEMM/convolution kernels are FP32 without "
            f"tensor cores (tensor-core types used: {used})"
        )
        if facts.fp32_matmuls and facts.chip.tensor_cores:
            precision += f" on a GPU with {', '.join(sorted(facts.chip.tensor_dtypes))} cores"
    else:
        precision = "no GEMM/convolution kernel names a dtype (0 rows)"
    evidence.append("program.facts.matmul_rows")
    text = f"Shapes: {_lower(shapes)}; phases: {phases}; precision: {precision}."
    return text, "; ".join(evidence)


def _lower(text: str) -> str:
    """``text`` with its first letter lower-cased (a clause inside the sentence), unless the
    first word is an acronym or a name (a second capital)."""
    head = text.split(" ", 1)[0]
    return text if sum(c.isupper() for c in head) > 1 else text[:1].lower() + text[1:]
