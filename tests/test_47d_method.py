"""The investigation (issue 47 item 4, ``analysis.method`` and ``report.method_text``).

On every shared trace, the multi-rank job directory and generated traces of both formats
(training loops with data-loader stalls and a warm-up step, exposed communication, copies, low
MFU, a healthy loop, a straggler job): the six checks come in the method's order, each answer
is one sentence with a figure, the stop sits on the check of ``findings[0]`` (mapping written
here from the issue, not read from the module), and the text report shows the same answers as
the JSON. Figures are recomputed independently: busy/window from a plain union of the trace's
GPU rows, the step CV with numpy from the steps' ``dur_ns``, the top idle cause from
``idle_by_cause``, the optimizer share from the steps' phases.
"""

from __future__ import annotations

import dataclasses
import json
import re
import subprocess
import tempfile
from collections.abc import Callable
from dataclasses import replace
from functools import lru_cache
from pathlib import Path

import numpy as np
import polars as pl
import pytest

import synth
import synth_findings
import synth_ranks
from tests.conftest import (
    TRACES,
    chromium,
    kineto_trace_files,
    nsys_trace_files,
    plain_union,
    shared_trace,
)
from traceforensics.analysis.cause_table import CAUSES
from traceforensics.analysis.devices import DeviceRecord
from traceforensics.analysis.findings.results import CATEGORIES
from traceforensics.analysis.method import CHECKS, MethodLine, investigation, walk_device
from traceforensics.analysis.pipeline import Analysis, analyze
from traceforensics.ingest import load_path
from traceforensics.report.html import page, render_html
from traceforensics.report.markdown import render_markdown
from traceforensics.report.method_text import method_html, no_gpu_method
from traceforensics.report.terminal import SECTIONS, render_text

SHARED = [*kineto_trace_files(), *nsys_trace_files()]
SHARED = [r for r in SHARED if "job128_sampled/" not in r] + ["hta/job128_sampled"]
#: The order of the issue ("step time stable? busy vs idle; idle -> which cause; busy -> which
#: kernels; waits across GPUs; the model").
ORDER = ["step_time", "busy_idle", "idle_cause", "kernels", "communication", "model"]
#: Where the walk stops for each finding category (the brief's mapping, written out here).
STOP_AT = {
    **{c: "idle_cause" for c in CAUSES},
    "communication": "communication",  # idle in a collective: GPUs waiting for each other
    "transfer_bound": "idle_cause",
    "one_off": "step_time",
    "exposed_communication": "communication",
    "straggler_wait": "communication",
    "kernel_efficiency": "kernels",
    "fp32_matmul": "kernels",
    "layout_conversion": "kernels",
    "zero_grad": "model",
    "optimizer_step": "model",
    "serving_scheduler_gap": "idle_cause",  # issue 48
    "serving_eager_decode": "idle_cause",
    "allocator_churn": "idle_cause",
    "reserved_unused": "model",
    "memory_near_capacity": "model",
}
GPU_KINDS = ["kernel", "memcpy", "memset", "cuda_graph"]
#: Findings that hold idle under their own name (issue 48): a server's gaps, the allocator.
HOLD_IDLE = {"serving_scheduler_gap", "serving_eager_decode", "allocator_churn"}


@lru_cache(maxsize=4)
def _shared(rel: str) -> Analysis:
    return analyze(load_path(shared_trace(rel)))


def _plain_busy(a: Analysis, rank: int, device: int) -> tuple[int, int]:
    """(busy, window) ns of one device from a plain sorted union of its GPU rows."""
    rows = a.session.events.filter(
        pl.col("kind").cast(pl.String).is_in(GPU_KINDS)
        & (pl.col("rank") == rank)
        & (pl.col("device") == device)
        & (pl.col("dur_ns") > 0)
    )
    spans = [(s, s + d) for s, d in rows.select("start_ns", "dur_ns").iter_rows()]
    merged = plain_union(spans)
    return sum(e - s for s, e in merged), merged[-1][1] - merged[0][0]


def _flat(text: str) -> str:
    return " ".join(text.split())


def check_walk(a: Analysis) -> list[dict[str, object]]:
    """Every contract of the walk on ``a``; returns its JSON."""
    lines = investigation(a)
    if not a.devices:
        assert lines == []
        return []
    assert [m.check for m in lines] == ORDER == list(CHECKS)
    for m in lines:
        # one sentence: ends with a full stop, no sentence break inside, a figure in it
        assert m.answer.endswith(".") and not m.answer.endswith(".."), m
        assert not re.search(r"[.!?]\s+[A-Z]", m.answer[:-1]), m.answer
        assert re.search(r"\d", m.answer), m.answer
        assert m.evidence and "\n" not in m.answer + m.evidence
    stops = [m.check for m in lines if m.stop]
    if a.findings:
        assert stops == [STOP_AT[a.findings[0].category]]
    else:
        assert stops == []
    chosen = walk_device(a)
    assert chosen is not None
    d = chosen[0]
    if a.findings:
        assert (d.rank, d.device) == (a.findings[0].rank, a.findings[0].device)
    _figures(a, d, {m.check: m.answer for m in lines})
    _text_shows(a, lines, stops)
    out = [m.to_json() for m in lines]
    assert all(list(j) == ["check", "answer", "evidence", "stop"] for j in out)
    json.dumps(out)  # plain JSON
    return out


def _figures(a: Analysis, d: DeviceRecord, by: dict[str, str]) -> None:
    """The answers' figures against independent recomputations."""
    # busy / window: a plain union of the GPU rows
    busy, window = _plain_busy(a, d.rank, d.device)
    if d.window_kind == "device":
        assert f"busy {100 * busy / window:.1f}% of its" in by["busy_idle"]
    # step CV with numpy, on the device's steps
    durs = [s.dur_ns for s in a.idle.steps if (s.rank, s.device) == (d.rank, d.device)]
    if len(durs) >= 2:
        cv = float(np.std(durs) / np.mean(durs))
        assert f"CV {cv:.2f}" in by["step_time"], (cv, by["step_time"])
    elif not durs:
        assert "0 step ranges" in by["step_time"]
    # the top idle cause and its share of idle
    idle = sum(d.idle_by_cause.values())
    if idle > 0:
        # the steady state's top cause: the device's idle findings (one-off time left out)
        steady = {
            f.category: f.recoverable_ns
            for f in a.findings
            if (f.rank, f.device) == (d.rank, d.device)
            and (f.category in CAUSES or f.category in HOLD_IDLE)
        }
        top = (
            max(steady.items(), key=lambda kv: kv[1])
            if steady
            else max(d.idle_by_cause.items(), key=lambda kv: (kv[1], -CAUSES.index(kv[0])))
        )
        if top[0] in ("data_loading", "memcpy"):
            assert f"{top[0]} is the top cause" in by["idle_cause"]
        else:
            assert f"is {top[0]}, " in by["idle_cause"]
            assert f"({100 * top[1] / idle:.1f}% of idle" in by["idle_cause"]
    # optimizer share of the steps' GPU busy, from the phases
    phased = [s for s in a.idle.steps if (s.rank, s.device) == (d.rank, d.device) and s.phases]
    if phased and sum(s.busy_ns for s in phased):
        opt = sum(s.phases["optimizer"].gpu_ns for s in phased)
        share = 100 * opt / sum(s.busy_ns for s in phased)
        assert f"the optimizer takes {share:.1f}%" in by["model"]
    # the device's own work-size sentence (``analysis.work_size``), when the analysis has one
    mine = [w for w in a.work_size if (w.rank, w.device) == (d.rank, d.device)]
    if mine:
        assert mine[0].sentence().rstrip(".")[1:] in by["model"]


def _text_shows(a: Analysis, lines: list[MethodLine], stops: list[str]) -> None:
    """The text report shows every answer, in order, and marks the stop."""
    text = render_text(a, sections=("method",))
    body = _flat(text.split("== Investigation", 1)[1])
    places = [body.index(_flat(m.answer)) for m in lines]
    assert places == sorted(places)
    if a.findings:
        assert _flat(f"<- start here: {a.findings[0].title}") in body
        n = ORDER.index(stops[0]) + 1
        assert re.search(rf"^> {n}\. ", text, re.M)
        assert all(f"({k}) " in text for k in range(n + 1, 7))


@pytest.mark.parametrize("rel", SHARED)
def test_shared_traces(rel: str) -> None:
    a = _shared(rel)
    out = check_walk(a)
    if not a.devices:  # a trace without GPU work: the section's one line, in every report
        assert no_gpu_method() in _flat(render_text(a))
        assert no_gpu_method() in render_markdown(a)
        assert no_gpu_method() in render_html(a).replace("&#x27;", "'")
        return
    assert len(out) == 6


# ------------------------------------------------------------------ generated traces
def _warmup_loop(steps: int = 6) -> synth.SynthTrace:
    """Steps of two kernels each; the first step's kernels run 10x longer (autotuning), so
    the first step lasts > 3x the median of the others: one-off warm-up."""
    tr = synth.SynthTrace()
    t = 10_000
    for i in range(steps):
        kernel_ns = 2_000_000 if i == 0 else 200_000 + 60_000 * i
        span = 2 * kernel_ns + 100_000
        tr.cpu_range(f"ProfilerStep#{i + 1}", t, span, kind="annotation")
        for k in range(2):
            start = t + 10_000 + k * 20_000
            gpu = max(start + 6_000, t + 20_000 + k * kernel_ns)
            tr.launch(f"gemm_kernel_{k}", start, 4_000, gpu, kernel_ns)
        t += span
    return tr


BUILDERS: dict[str, Callable[[], synth.SynthTrace]] = {
    "loader_stalls": lambda: synth.training_loop(steps=6),
    "warmup_first": _warmup_loop,
    "exposed_comm": synth_findings.exposed_comm_loop,
    "transfer_bound": synth_findings.transfer_bound_loop,
    "low_mfu": synth_findings.low_mfu_loop,
    "healthy": synth_findings.healthy_loop,
    "no_steps": lambda: synth.stall_scenario("data_loading"),
}


@lru_cache(maxsize=4)
def _built(name: str, fmt: str) -> Analysis:
    tr = BUILDERS[name]()
    tmp = Path(tempfile.mkdtemp(prefix="tf47d-"))
    path = (
        tr.write_kineto(tmp / "t.pt.trace.json")
        if fmt == "kineto"
        else tr.write_nsys(tmp / "t.sqlite")
    )
    return analyze(load_path(path))


@pytest.mark.parametrize("fmt", ["kineto", "nsys"])
@pytest.mark.parametrize("name", list(BUILDERS))
def test_generated_traces(name: str, fmt: str) -> None:
    a = _built(name, fmt)
    out = check_walk(a)
    by = {str(j["check"]): str(j["answer"]) for j in out}
    if name == "warmup_first":
        steps = sorted(a.idle.steps, key=lambda s: s.start_ns)
        steady = [s.dur_ns for s in steps[1:]]
        cv = float(np.std(steady) / np.mean(steady))
        assert f"{steps[0].name} is one-off warm-up" in by["step_time"]
        assert f"CV {cv:.2f} without it" in by["step_time"]
    if name == "no_steps":
        assert "--step-pattern" in by["step_time"]
    if name == "loader_stalls":
        assert a.findings[0].category == "data_loading"
        assert [str(j["check"]) for j in out if j["stop"]] == ["idle_cause"]


def test_job_names_the_device_and_the_straggler(tmp_path: Path) -> None:
    synth_ranks.generate_job(
        tmp_path, ranks=4, steps=4, fmt="kineto", straggler_rank=2, cause="data_loading"
    )
    a = analyze(load_path(tmp_path))
    assert len(a.devices) == 4 and a.ranks is not None and a.ranks.straggler is not None
    out = check_walk(a)
    comm = next(str(j["answer"]) for j in out if j["check"] == "communication")
    assert f"rank {a.ranks.straggler.rank} is the job's straggler" in comm
    chosen = walk_device(a)
    assert chosen is not None and chosen[1] == "the top finding's device"
    head = next(ln for ln in render_text(a).splitlines() if ln.startswith("== Investigation"))
    assert f"rank {chosen[0].rank} GPU {chosen[0].device}, the top finding's device" in head


def test_the_stop_follows_the_top_finding() -> None:
    """Each category puts the stop on its check, and only there; no finding: no stop."""
    a = _built("loader_stalls", "kineto")
    top = a.findings[0]
    for category in [*CATEGORIES, "optimizer_step"]:
        moved = replace(a, findings=[replace(top, category=category), *a.findings[1:]])
        stops = [m.check for m in investigation(moved) if m.stop]
        assert stops == [STOP_AT[category]], category
    assert not any(m.stop for m in investigation(replace(a, findings=[])))
    # a category added later still stops the walk somewhere (model words, else busy vs idle)
    new = replace(a, findings=[replace(top, category="optimizer_share")])
    assert [m.check for m in investigation(new) if m.stop] == ["model"]
    new = replace(a, findings=[replace(top, category="something_else")])
    assert [m.check for m in investigation(new) if m.stop] == ["busy_idle"]


def test_model_line_reads_work_size_and_precision() -> None:
    work_size = pytest.importorskip("traceforensics.analysis.work_size")
    a = _built("loader_stalls", "kineto")
    d = a.devices[0]
    sized = [4096 + 512 * i for i in range(6)]
    mine = work_size.DeviceWork(d.rank, d.device, "tokens", list(sized), "follows_work", 0.93,
                                41.0, 6, work_min=min(sized), work_max=max(sized))  # fmt: skip
    other = replace(mine, device=d.device + 1, verdict="independent", r=0.1)
    model = investigation(replace(a, work_size=[other, mine]))[-1]
    said = mine.sentence().rstrip(".")
    assert said.startswith("step time follows") and f"Shapes: {said};" in model.answer
    assert "work_size[rank 0 GPU 0] (follows_work)" in model.evidence
    facts = a.program.facts
    total = sum(facts.matmul_rows.values())
    assert total and f"{facts.fp32_matmuls} of {total} GEMM/convolution kernels" in model.answer


def test_measured_class_when_nsight_compute_is_joined() -> None:
    results = pytest.importorskip("traceforensics.analysis.kernels.results")
    a = _built("low_mfu", "kineto")
    d = a.devices[0]
    k = d.top_kernels[0]
    figures = results.NcuFigures(3, k.mean_ns, 38.0, 80.0, 81.0, 45.0, 50.0, 2.0, "memory",
                                 False, False)  # fmt: skip
    row = results.KernelBoundRow(d.rank, d.device, k.name, k.count, k.total_ns, "ncu",
                                 "memory", figures)  # fmt: skip
    join = results.NcuJoin(3, 3, 0, 1, [], [row])
    kernels = dataclasses.replace(a.kernels, ncu=join)
    line = investigation(replace(a, kernels=kernels))[3]
    # the memory figure the class is judged on is cited, DRAM beside it
    assert (
        "measured memory-bound (Nsight Compute: SM 38%, memory 80%, DRAM 81%, occupancy 45%)"
        in line.answer
    )
    # an estimate is never called measured
    assert "measured" not in investigation(a)[3].answer


# ------------------------------------------------------------------------- the reports
def test_terminal_sections_put_the_method_after_the_findings() -> None:
    """The terminal's first screen is the verdict and the first findings (test_explain); the
    walk follows them, before the device evidence."""
    assert SECTIONS[:3] == ("verdict", "findings", "method")
    a = _shared("kineto/resnet50_v100_workers0.pt.trace.json.gz")
    heads = [ln for ln in render_text(a).splitlines() if ln.startswith("== ")]
    assert heads[1].startswith("== Findings") and heads[2].startswith("== Investigation")


def test_markdown_and_html_show_every_line() -> None:
    a = _shared("kineto/resnet50_v100_workers0.pt.trace.json.gz")
    lines = investigation(a)
    stop = next(i for i, m in enumerate(lines) if m.stop)
    md = render_markdown(a)
    section = md.split("## Investigation", 1)[1].split("\n## ", 1)[0]
    items = [ln for ln in section.splitlines() if re.match(r"\d\. ", ln)]
    assert [int(ln[0]) for ln in items] == [1, 2, 3, 4, 5, 6]
    assert "← **start here:**" in items[stop] and items[stop].startswith(f"{stop + 1}. **")
    assert all(ln.startswith(f"{i + 1}. *") and "**" not in ln for i, ln in
               enumerate(items) if i > stop)  # fmt: skip
    assert md.index("## Verdict") < md.index("## Investigation") < md.index("## Findings")
    doc = render_html(a)
    states = re.findall(r"<li class='(\w+)' data-check='(\w+)'>", doc)
    want = ["before"] * stop + ["stop"] + ["after"] * (5 - stop)
    assert states == list(zip(want, ORDER, strict=True))
    assert "← start here: " in doc


def _pixels(png: Path) -> set[tuple[int, int, int]]:
    """The distinct RGB colours of a screenshot."""
    image = pytest.importorskip("PIL.Image")
    with image.open(png) as im:
        return {tuple(c[1][:3]) for c in im.convert("RGB").getcolors(maxcolors=1 << 24)}


def test_html_section_in_chromium(tmp_path: Path) -> None:
    """The section alone, drawn by headless Chromium: the stop's amber band and border and
    the grey of the checks after it are on the screen."""
    browser = chromium()
    rel = "kineto/resnet50_v100_workers0.pt.trace.json.gz"
    if not (TRACES / rel).exists():
        pytest.skip("../shared/traces not present")
    a = _shared(rel)
    doc = tmp_path / "method.html"
    doc.write_text(page(method_html(a)))
    shot = Path("/tmp/tf47d_method.png")
    done = subprocess.run(
        [browser, "--headless", "--no-sandbox", "--disable-gpu", "--hide-scrollbars",
         "--window-size=1100,700", f"--screenshot={shot}", doc.as_uri()],
        capture_output=True, text=True, timeout=180, check=False,
    )  # fmt: skip
    assert done.returncode == 0 and shot.exists(), done.stderr[-500:]
    colours = _pixels(shot)
    assert (0xFF, 0xF8, 0xE1) in colours  # li.stop background
    assert (0xF0, 0xA0, 0x00) in colours  # li.stop border


def test_model_line_with_the_work_size_rule() -> None:
    """With ``analysis.work_size.step_work`` (issue 47 item 2), the model line carries the
    device's own sentence and verdict."""
    work_size = pytest.importorskip("traceforensics.analysis.work_size")
    from traceforensics.analysis.context import prepare

    session = load_path(shared_trace("kineto/resnet50_v100_workers0.pt.trace.json.gz"))
    a = analyze(session)
    found = work_size.step_work(prepare(session), a.idle.steps)
    line = investigation(replace(a, work_size=found))[-1]
    mine = next(w for w in found if (w.rank, w.device) == (0, 0))
    said = mine.sentence().rstrip(".")
    assert said[1:] in line.answer and f"({mine.verdict})" in line.evidence
