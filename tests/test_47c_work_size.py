"""Step time explained by input size (``analysis.work_size``), issue 47 item 2.

Built traces (``tools/synth_work.py``) in both formats: Kineto with ``Input Dims`` /
``Input type`` args, nsys with ``emit_nvtx``-style ``sizes = [[..]]`` range names. The work per
step is checked against the builder's own counts (batch x length), r and the slope against
numpy's ``corrcoef`` / ``polyfit`` over the same steps, and the slope against the built ns per
token. Every shared trace gives a verdict; the ResNet-50 ones say ``fixed_shapes``.
"""

from __future__ import annotations

import itertools
import json
import sys
from pathlib import Path

import numpy as np
import polars as pl
import pytest

from tests.conftest import ROOT, TRACES, kineto_trace_files, nsys_trace_files, shared_trace
from traceforensics import load
from traceforensics.analysis import analyze
from traceforensics.analysis.context import AnalysisContext, prepare
from traceforensics.analysis.idle.gaps import analyze_idle
from traceforensics.analysis.idle.results import StepStats
from traceforensics.analysis.work_size import FOLLOW_R, MIN_STEPS, VERDICTS, DeviceWork, step_work

sys.path.insert(0, str(ROOT / "tools"))
import synth_work
from synth import SynthTrace, training_loop

FORMATS = ("kineto", "nsys")
#: Sequence lengths of 12 steps (batch 8): 256..4,096 tokens per step.
LENGTHS = [64, 128, 96, 256, 32, 200, 160, 80, 512, 48, 384, 224]
#: Kernel time of each step unrelated to its length (no monotone link with ``LENGTHS``).
NOISE = [90_000, 10_000, 170_000, 0, 130_000, 40_000, 150_000, 60_000, 20_000, 110_000, 0, 80_000]


#: How the ResNet-50 traces' image batch reads in ``Input Dims``.
IMAGES = "[[32, 3, 224, 224]"


def _run(tr: SynthTrace, fmt: str, tmp: Path) -> tuple[list[StepStats], list[DeviceWork]]:
    path = tmp / ("t.json" if fmt == "kineto" else "t.sqlite")
    (tr.write_kineto if fmt == "kineto" else tr.write_nsys)(path)
    ctx = prepare(load(path))
    steps = analyze_idle(ctx).steps
    return steps, step_work(ctx, steps)


def _one(tr: SynthTrace, fmt: str, tmp: Path) -> tuple[list[StepStats], DeviceWork]:
    steps, got = _run(tr, fmt, tmp)
    assert len(got) == 1
    assert len(got[0].per_step) == len(steps)
    json.dumps(got[0].to_json())  # plain JSON
    return steps, got[0]


def _fit(steps: list[StepStats], work: list[int], used: list[bool]) -> tuple[float, float]:
    """Independent r and slope (numpy) over the steps used."""
    x = np.array([w for w, u in zip(work, used, strict=True) if u], dtype=float)
    y = np.array([s.dur_ns for s, u in zip(steps, used, strict=True) if u], dtype=float)
    return float(np.corrcoef(x, y)[0, 1]), float(np.polyfit(x, y, 1)[0])


@pytest.mark.parametrize("fmt", FORMATS)
def test_follows_tokens(fmt: str, tmp_path: Path) -> None:
    tr = synth_work.token_steps(LENGTHS, ns_per_token=100)
    steps, dw = _one(tr, fmt, tmp_path)
    tokens = [8 * n for n in LENGTHS]
    # the builder's timeline: every step after the first lasts overhead + its kernel
    assert [s.dur_ns for s in steps[1:]] == [
        synth_work.step_dur_ns(200_000 + 100 * t) for t in tokens[1:]
    ]
    assert (dw.unit, dw.verdict, dw.per_step) == ("tokens", "follows_work", tokens)
    assert all(dw.used) and dw.steps_used == len(LENGTHS)
    r, slope = _fit(steps, tokens, dw.used)
    assert dw.r == pytest.approx(r) and dw.slope_ns == pytest.approx(slope)
    assert dw.r is not None and dw.r >= FOLLOW_R
    assert dw.slope_ns == pytest.approx(100, rel=0.05)  # the built 100 ns per token
    assert (dw.work_min, dw.work_max) == (min(tokens), max(tokens))
    text = dw.sentence()
    assert "follows tokens per step" in text and "r = 1.00" in text
    assert f"{dw.slope_ns:+.1f} µs per 1k tokens over 12 steps" in text
    assert "bucket by length" in text


@pytest.mark.parametrize("fmt", FORMATS)
def test_length_varies_step_time_does_not(fmt: str, tmp_path: Path) -> None:
    tr = synth_work.token_steps(LENGTHS, follows=False, extra_ns=NOISE)
    steps, dw = _one(tr, fmt, tmp_path)
    assert (dw.unit, dw.verdict) == ("tokens", "independent")
    r, slope = _fit(steps, [8 * n for n in LENGTHS], dw.used)
    assert r < FOLLOW_R and dw.r == pytest.approx(r) and dw.slope_ns == pytest.approx(slope)
    assert "does not follow tokens per step" in dw.sentence()


@pytest.mark.parametrize("fmt", FORMATS)
def test_fixed_shapes(fmt: str, tmp_path: Path) -> None:
    tr = synth_work.token_steps([512] * 8, extra_ns=NOISE)
    _, dw = _one(tr, fmt, tmp_path)
    assert (dw.unit, dw.verdict, dw.r, dw.slope_ns) == ("tokens", "fixed_shapes", None, None)
    assert dw.per_step == [4096] * 8 and dw.shape == "8 x 512"
    assert dw.sentence().startswith("shapes are fixed (8 x 512, 4,096 tokens every step")


@pytest.mark.parametrize("fmt", FORMATS)
def test_no_shapes_no_copies(fmt: str, tmp_path: Path) -> None:
    tr = synth_work.token_steps(LENGTHS, shapes=False, copies=False)
    _, dw = _one(tr, fmt, tmp_path)
    assert (dw.unit, dw.verdict, dw.per_step) == (None, "no_sizes", [None] * len(LENGTHS))
    assert "no work size" in dw.sentence()


@pytest.mark.parametrize("fmt", FORMATS)
def test_copies_without_shapes_give_bytes(fmt: str, tmp_path: Path) -> None:
    tr = synth_work.token_steps(LENGTHS, shapes=False, ns_per_token=100)
    steps, dw = _one(tr, fmt, tmp_path)
    copied = [8 * 8 * n for n in LENGTHS]  # int64 ids
    assert (dw.unit, dw.verdict, dw.per_step) == ("h2d_bytes", "follows_work", copied)
    assert dw.slope_ns == pytest.approx(_fit(steps, copied, dw.used)[1])
    assert "bytes copied host-to-device" in dw.sentence()


@pytest.mark.parametrize("fmt", FORMATS)
def test_copied_ids_without_embedding(fmt: str, tmp_path: Path) -> None:
    """The copy of a [B, L] id batch counts tokens: typed in Kineto, 8 bytes per element in
    nsys (no types there)."""
    tr = synth_work.token_steps(LENGTHS, embedding=False, ns_per_token=100)
    _, dw = _one(tr, fmt, tmp_path)
    assert (dw.unit, dw.verdict) == ("tokens", "follows_work")
    assert dw.per_step == [8 * n for n in LENGTHS]


@pytest.mark.parametrize("fmt", FORMATS)
def test_first_operator_when_no_copy(fmt: str, tmp_path: Path) -> None:
    """No lookup, no copy: the step's first operator with a tensor input (a float [B*L, 768]
    matmul: its leading dim, in samples)."""
    tr = synth_work.token_steps(LENGTHS, embedding=False, copies=False, ns_per_token=100)
    _, dw = _one(tr, fmt, tmp_path)
    assert (dw.unit, dw.verdict) == ("samples", "follows_work")
    assert dw.per_step == [8 * n for n in LENGTHS] and dw.shape == "512 x 768"


@pytest.mark.parametrize("fmt", FORMATS)
def test_image_batches_count_samples(fmt: str, tmp_path: Path) -> None:
    batches = [32, 64, 16, 48, 64, 8, 40, 24]
    # a 1-D tensor larger than the batch (flat ids, values) is no batch: its length is ignored
    tr = synth_work.image_steps(batches, flat=1_000_000)
    steps, dw = _one(tr, fmt, tmp_path)
    assert (dw.unit, dw.verdict, dw.per_step) == ("samples", "follows_work", batches)
    assert dw.slope_ns == pytest.approx(_fit(steps, batches, dw.used)[1])
    assert dw.slope_ns == pytest.approx(2_000, rel=0.1)


@pytest.mark.parametrize("fmt", FORMATS)
def test_lookups_add_up_per_table_and_host_only_ones_do_not_count(fmt: str, tmp_path: Path) -> None:
    """Three micro-batches looked up in one table add up (the position table [L] beside them
    is smaller); a lookup that launches nothing on the device is not its work."""
    tr = synth_work.token_steps(LENGTHS, micro_batches=3, cpu_lookup=True, ns_per_token=100)
    _, dw = _one(tr, fmt, tmp_path)
    assert (dw.unit, dw.verdict, dw.per_step) == (
        "tokens",
        "follows_work",
        [3 * 8 * n for n in LENGTHS],
    )


@pytest.mark.parametrize("fmt", FORMATS)
def test_warmup_step_left_out(fmt: str, tmp_path: Path) -> None:
    extra = [20_000_000] + [0] * (len(LENGTHS) - 1)  # a first step far over 3x the median
    tr = synth_work.token_steps(LENGTHS, ns_per_token=100, extra_ns=extra)
    _, dw = _one(tr, fmt, tmp_path)
    assert dw.used == [False] + [True] * (len(LENGTHS) - 1)
    assert (dw.verdict, dw.steps_used, dw.steps_kept) == ("follows_work", 11, 11)
    assert dw.r == pytest.approx(1.0) and dw.slope_ns == pytest.approx(100)  # exact after it


@pytest.mark.parametrize("fmt", FORMATS)
def test_too_little_spread_is_independent(fmt: str, tmp_path: Path) -> None:
    lengths = [400, 404, 408, 412, 400, 404, 408, 412]  # 3% of the mean
    _, dw = _one(synth_work.token_steps(lengths, ns_per_token=100), fmt, tmp_path)
    assert dw.verdict == "independent" and dw.spread is not None and dw.spread < 0.05
    assert dw.r is not None and dw.r >= FOLLOW_R  # it is the spread that rules it out
    assert "vary by only 3%" in dw.sentence()


# ------------------------------------------------------------- review 1, items 11 to 15
@pytest.mark.parametrize("fmt", FORMATS)
def test_constant_leading_dim_with_varying_shapes_counts_elements(fmt: str, tmp_path: Path) -> None:
    """Item 11: float features [8, T, 80] (T varies, the leading dim does not) are no fixed
    shapes: the work is the element count; so are int32 ids [8, T] where nsys records no
    types (Kineto's types say ``int``: tokens)."""
    steps, dw = _one(synth_work.feature_steps(LENGTHS, feat=80), fmt, tmp_path)
    numel = [8 * n * 80 for n in LENGTHS]
    assert (dw.unit, dw.verdict, dw.per_step) == ("elements", "follows_work", numel)
    assert dw.slope_ns == pytest.approx(_fit(steps, numel, dw.used)[1])
    assert dw.slope_ns == pytest.approx(20, rel=0.05)  # the built 20 ns per element
    assert "follows elements per step" in dw.sentence()
    tr = synth_work.feature_steps(LENGTHS, dtype="int", ns_per_element=100)
    _, dw = _one(tr, fmt, tmp_path)
    unit = "tokens" if fmt == "kineto" else "elements"
    assert (dw.unit, dw.verdict, dw.per_step) == (unit, "follows_work", [8 * n for n in LENGTHS])


@pytest.mark.parametrize("fmt", FORMATS)
def test_same_count_other_shapes_are_not_fixed(fmt: str, tmp_path: Path) -> None:
    """Item 11: "shapes are fixed" only when the dims are the same in every step used; the
    same element count in other shapes ([8, 512] then [16, 256]) is not."""
    batch = [8, 16] * 4
    tr = synth_work.feature_steps([4096 // b for b in batch], batch=batch, feat=4)
    _, dw = _one(tr, fmt, tmp_path)
    assert dw.per_step == [8 * 512 * 4] * 8 and dw.verdict != "fixed_shapes"
    assert "shapes are fixed" not in dw.sentence() and "shapes vary" in dw.sentence()
    _, dw = _one(synth_work.feature_steps([512] * 8, feat=4), fmt, tmp_path)
    assert (dw.unit, dw.verdict, dw.shape) == ("samples", "fixed_shapes", "8 x 512 x 4")


@pytest.mark.parametrize("fmt", FORMATS)
def test_first_operator_source_skips_a_bias(fmt: str, tmp_path: Path) -> None:
    """Item 12: aten::addmm(bias [768], input [B*L, 768], weight): the batch is the input,
    not the bias; the synth MLP loop's first addmm reads 2048 rows, not its 4096 bias."""
    tr = synth_work.token_steps(LENGTHS, embedding=False, copies=False, bias=True)
    _, dw = _one(tr, fmt, tmp_path)
    assert (dw.unit, dw.verdict) == ("samples", "follows_work")
    assert dw.per_step == [8 * n for n in LENGTHS] and dw.shape == "512 x 768"
    steps, dw = _one(training_loop(steps=8), fmt, tmp_path)
    assert (dw.unit, dw.verdict, dw.shape) == ("samples", "fixed_shapes", "2048 x 1024")
    assert dw.per_step == [2048] * len(steps)
    assert dw.sentence().startswith("shapes are fixed (2048 x 1024, 2,048 samples")


MB = [64, 128, 96, 256, 32, 200, 160, 80, 512, 48, 384, 224]


@pytest.mark.parametrize("fmt", FORMATS)
def test_copy_time_is_not_blamed_on_the_data(fmt: str, tmp_path: Path) -> None:
    """Item 13: pageable copies of 32-512 MB at 10 GB/s, compute constant: step time follows
    the bytes only through the copies' own time, which is taken out of the fit; the
    sentence names the copies as the cost and no data remedy."""
    steps, dw = _one(synth_work.copy_steps(MB), fmt, tmp_path)
    copied = [mb * 1_000_000 for mb in MB]
    assert (dw.unit, dw.per_step) == ("h2d_bytes", copied)
    assert dw.copy_ns == [b // 10 for b in copied]  # the built copies' GPU time, all exposed
    assert dw.verdict == "independent" and dw.copies_cost
    r, _ = _fit(steps, copied, dw.used)  # with the copies: r = 1
    assert dw.r_with_copies == pytest.approx(r) and r > 0.99
    assert dw.copy_slope_ns == pytest.approx(0.1)  # 10 GB/s: 0.1 ns per byte
    text = dw.sentence()
    assert "copies are the cost" in text and "pin_memory" in text  # pageable copies
    assert "bucket by length" not in text and "comes from the data" not in text


@pytest.mark.parametrize("fmt", FORMATS)
def test_copy_time_hidden_by_compute_is_not_taken_out(fmt: str, tmp_path: Path) -> None:
    """Item 13: only the copy time no other GPU work overlaps is taken out (the first 1 ms
    of each copy runs beside a kernel on another stream); from pinned memory, no pin_memory
    advice."""
    _, dw = _one(synth_work.copy_steps(MB, pinned=True, hidden_ns=1_000_000), fmt, tmp_path)
    copied = [mb * 1_000_000 for mb in MB]
    assert dw.copy_ns == [b // 10 - 1_000_000 for b in copied]
    assert (dw.verdict, dw.copies_cost, dw.pageable_copies) == ("independent", True, False)
    assert dw.copy_slope_ns == pytest.approx(0.1)
    assert "copies are the cost" in dw.sentence() and "pin_memory" not in dw.sentence()


@pytest.mark.parametrize("fmt", FORMATS)
def test_prefetched_batch_is_fitted_one_step_later(fmt: str, tmp_path: Path) -> None:
    """Item 14: batch k+1 copied during step k (a prefetching loader): the fit with a
    one-step lag is kept, and the sentence says so."""
    tr = synth_work.token_steps(LENGTHS, embedding=False, prefetch=True, ns_per_token=100)
    steps, dw = _one(tr, fmt, tmp_path)
    tokens = [None] + [8 * n for n in LENGTHS[1:]]  # step k's batch, copied in step k-1
    assert (dw.unit, dw.verdict, dw.lag, dw.per_step) == ("tokens", "follows_work", 1, tokens)
    assert dw.used == [False] + [True] * (len(LENGTHS) - 1)
    r, slope = _fit(steps[1:], [8 * n for n in LENGTHS[1:]], dw.used[1:])
    assert dw.r == pytest.approx(r) and dw.slope_ns == pytest.approx(slope)
    assert dw.slope_ns == pytest.approx(100, rel=0.05)
    assert "copied in the step before" in dw.sentence()
    # the same with bytes only (no shapes); the unlagged copies give no lag
    tr = synth_work.token_steps(LENGTHS, embedding=False, shapes=False, prefetch=True)
    _, dw = _one(tr, fmt, tmp_path)
    assert (dw.unit, dw.verdict, dw.lag) == ("h2d_bytes", "follows_work", 1)
    _, dw = _one(synth_work.token_steps(LENGTHS, embedding=False), fmt, tmp_path)
    assert (dw.verdict, dw.lag) == ("follows_work", 0)


@pytest.mark.parametrize("fmt", FORMATS)
def test_steps_without_a_copy_have_no_byte_count(fmt: str, tmp_path: Path) -> None:
    """Item 15: a step without a host-to-device copy has an unknown work size in h2d_bytes
    (null, not used), not 0 bytes."""
    tr = synth_work.token_steps(LENGTHS, shapes=False, no_copy=(3, 7), ns_per_token=100)
    steps, dw = _one(tr, fmt, tmp_path)
    copied = [None if k in (3, 7) else 8 * 8 * n for k, n in enumerate(LENGTHS)]
    assert (dw.unit, dw.verdict, dw.per_step) == ("h2d_bytes", "follows_work", copied)
    assert dw.used == [v is not None for v in copied] and dw.steps_used == 10
    r, slope = _fit(steps, [v or 0 for v in copied], dw.used)
    assert dw.r == pytest.approx(r) and dw.slope_ns == pytest.approx(slope)


def test_total_on_small_and_odd_inputs(tmp_path: Path) -> None:
    path = synth_work.token_steps(LENGTHS[:3]).write_kineto(tmp_path / "t.json")
    ctx = prepare(load(path))
    steps = analyze_idle(ctx).steps
    assert step_work(ctx, []) == []
    (dw,) = step_work(ctx, steps)
    assert dw.verdict == "too_few_steps" and dw.per_step == [512, 1024, 768]
    assert f"{MIN_STEPS} needed" in dw.sentence()
    # steps with no ops (after the trace), one step, a device the trace does not have
    empty = [StepStats(0, 0, f"s{i}", 9 * 10**18 + i * 10, 5, 0, 5, {}, 0) for i in range(5)]
    (dw,) = step_work(ctx, empty)
    assert (dw.unit, dw.verdict, dw.per_step) == (None, "no_sizes", [None] * 5)
    (dw,) = step_work(ctx, steps[:1])
    assert dw.verdict == "too_few_steps"
    ghost = [StepStats(3, 7, f"s{i}", i, 1, 0, 1, {}, 0) for i in range(6)]
    assert [d.verdict for d in step_work(ctx, ghost)] == ["no_sizes"]


def test_total_without_args_or_host(tmp_path: Path) -> None:
    tr = SynthTrace()  # GPU work only: no host rows, no args, no steps
    tr.launch("k", 0, 1_000, 2_000, 5_000)
    ctx = prepare(load(tr.write_kineto(tmp_path / "t.json")))
    fake = [StepStats(0, 0, f"s{i}", ctx.t0_ns + i * 1_000, 1_000, 0, 0, {}, 0) for i in range(6)]
    (dw,) = step_work(ctx, fake)
    assert dw.verdict == "no_sizes"
    assert step_work(ctx, analyze_idle(ctx).steps) == []


def _shared(rel: str) -> tuple[AnalysisContext, list[StepStats], list[DeviceWork]]:
    ctx = prepare(load(shared_trace(rel)))
    steps = analyze_idle(ctx).steps
    return ctx, steps, step_work(ctx, steps)


@pytest.mark.parametrize("rel", kineto_trace_files() + nsys_trace_files() or ["(none)"])
def test_every_shared_trace_gives_a_verdict(rel: str) -> None:
    if not TRACES.exists():
        pytest.skip("../shared/traces not present (tests on real traces need ../shared)")
    _, steps, got = _shared(rel)
    assert sorted({(s.rank, s.device) for s in steps}) == sorted((d.rank, d.device) for d in got)
    for dw in got:
        assert dw.verdict in VERDICTS
        assert len(dw.per_step) == sum((s.rank, s.device) == (dw.rank, dw.device) for s in steps)
        json.dumps(dw.to_json())
        assert dw.sentence()


@pytest.mark.parametrize(
    "rel",
    [
        "kineto/resnet50_v100_workers0.pt.trace.json.gz",
        "kineto/resnet50_v100_workers4.pt.trace.json.gz",
    ],
)
def test_resnet_shapes_are_fixed(rel: str) -> None:
    ctx, steps, (dw,) = _shared(rel)
    # independent: the image batch's shape, read straight from the session's args table
    a = ctx.session.args.with_columns(pl.col("key").cast(str), pl.col("value").cast(str))
    batch = a.filter((pl.col("key") == "Input Dims") & pl.col("value").str.starts_with(IMAGES))
    assert batch.height >= len(steps)
    assert (dw.unit, dw.verdict, dw.shape) == ("samples", "fixed_shapes", "32 x 3 x 224 x 224")
    assert dw.per_step == [32] * len(steps) and dw.steps_used == len(steps)
    assert dw.sentence().startswith("shapes are fixed (32 x 3 x 224 x 224, 32 samples")


def test_flops_per_step_from_the_kernels_pass(tmp_path: Path) -> None:
    """``DeviceWork.flops``: each step's FLOPs by the FLOPs model (issue 47 item 2, "FLOPs where
    known"), equal to the kernels pass's per-step rows and to the GEMMs the loop was built
    with: 3 GEMMs (forward, two backward) of 2·B·in·out per layer and step."""
    from synth_scenarios import training_loop as scenario_loop

    dims, batch = (1024, 4096, 4096, 1024), 2048
    tr = scenario_loop(steps=4, dims=dims, batch=batch)
    a = analyze(load(tr.write_kineto(tmp_path / "t.json")))
    (w,) = a.work_size
    rows = {r.window_start_ns: r.flops for r in a.kernels.mfu_by_step}
    assert w.flops == [rows[s.start_ns] for s in a.idle.steps]
    gemm = 3 * sum(2 * batch * i * o for i, o in itertools.pairwise(dims))
    for f in w.flops:
        assert f is not None and gemm <= f < 1.01 * gemm  # (+ the elementwise ops' FLOPs)


def test_flops_per_step_on_resnet50() -> None:
    """ResNet-50 at batch 32, 224 x 224: about 4.1 G multiply-adds per image forward, so
    3 x 2 x 4.1e9 x 32 = 787 GFLOPs per training step (forward + backward); fixed shapes give
    the same figure every step."""
    a = analyze(load(shared_trace("kineto/resnet50_v100_workers0.pt.trace.json.gz")))
    (w,) = a.work_size
    assert len(set(w.flops)) == 1 and w.flops[0] is not None
    assert 0.9 * 787e9 < w.flops[0] < 1.1 * 787e9
