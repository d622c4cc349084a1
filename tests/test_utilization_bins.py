"""The one utilization binning rule (issue 13): bins start exactly at each device's analysis
window and end at its end, are sized to the window when it is short, and a fully busy window
reads 100 % — in the pattern's p10/p50/p90, the JSON timeline, the terminal and the plot."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

import traceforensics as tf
from synth import SynthTrace
from tests.conftest import plain_union, run_cli
from tests.edge_traces import MS, SYNTH
from traceforensics.analysis.pipeline import Analysis
from traceforensics.analysis.utilization.bins import (
    MIN_BIN_NS,
    MIN_PATTERN_BINS,
    bin_count,
    classified_bins,
    nice_floor_ns,
    utilization_bin_ns,
)
from traceforensics.report.lanes import device_lanes

S = 1_000 * MS


def _analyze(tr: SynthTrace, tmp_path: Path, **kw: object) -> Analysis:
    return tf.analyze(tr.write_kineto(tmp_path / "t.pt.trace.json"), **kw)


def _fully_busy(span_ns: int, kernel_ns: int, lead_ns: int) -> SynthTrace:
    """Back-to-back kernels covering ``[lead_ns, lead_ns + span_ns)`` exactly, after a host
    range starting at 0 (so the trace starts ``lead_ns`` before the GPU window)."""
    tr = SynthTrace()
    tr.cpu_range("setup", 0, lead_ns // 2, kind="annotation")
    t = lead_ns
    while t < lead_ns + span_ns:
        d = min(kernel_ns, lead_ns + span_ns - t)
        tr.launch("gemm_kernel", t - 2_000, 1_000, t, d)
        t += d
    return tr


def _plain_bins(union: list[tuple[int, int]], lo: int, hi: int, size: int) -> list[float]:
    """Independent: per bin from ``lo``, busy ns of the merged intervals over the bin's length
    (the last bin cut at ``hi``)."""
    out = []
    for b in range(lo, hi, size):
        top = min(b + size, hi)
        out.append(sum(max(0, min(e, top) - max(s, b)) for s, e in union) / (top - b))
    return out


def test_single_kernel_window_is_100_percent_busy(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = SYNTH["single_kernel"]().write_kineto(tmp_path / "one.pt.trace.json")
    a = tf.analyze(path)
    (dev,) = a.devices
    assert dev.pattern is not None
    pat, tl = dev.pattern.pattern, dev.pattern.timeline
    assert (pat.p10_pct, pat.p50_pct, pat.p90_pct, pat.mean_pct) == (100.0, 100.0, 100.0, 100.0)
    assert tl.start_ns == dev.window_start_ns and tl.bin_ns == MIN_BIN_NS  # 7 µs window
    assert tl.values.tolist() == [1.0] * 7
    code, out, _ = run_cli(["analyze", "--no-cache", str(path)], capsys)
    assert code == 0 and "p10/p50/p90 100.0/100.0/100.0%" in out and "41.2" not in out


@pytest.mark.parametrize(
    ("span_ns", "kernel_ns"),
    [(1_234_567_891, 7_000_000), (23_456_789, 300_000), (12_345 * MS, 40 * MS)],
)
def test_fully_busy_window_reads_100_percent_with_a_partial_last_bin(
    tmp_path: Path, span_ns: int, kernel_ns: int
) -> None:
    a = _analyze(_fully_busy(span_ns, kernel_ns, lead_ns=300 * MS), tmp_path)
    (dev,) = a.devices
    assert dev.pattern is not None and dev.window_ns == span_ns
    pat, tl = dev.pattern.pattern, dev.pattern.timeline
    assert span_ns % tl.bin_ns  # the window is not a whole number of bins
    assert (pat.p10_pct, pat.p50_pct, pat.p90_pct, pat.mean_pct) == (100.0, 100.0, 100.0, 100.0)
    assert pat.pattern == "steady_high" and pat.samples == span_ns // tl.bin_ns
    assert np.all(tl.values == 1.0) and tl.values.size == span_ns // tl.bin_ns + 1
    assert a.to_json()["devices"][0]["pattern"]["p10_pct"] == 100.0


@pytest.mark.parametrize("window", ["device", "trace"])
def test_bins_start_exactly_at_the_window_start(tmp_path: Path, window: str) -> None:
    tr = SynthTrace()
    tr.cpu_range("setup", 0, 40 * MS, kind="annotation")  # 250 ms of host time before any GPU
    for i in range(30):
        tr.launch(
            "gemm_kernel", 250 * MS + i * 9 * MS - 5_000, 2_000, 250 * MS + i * 9 * MS, 4 * MS
        )
    tr.cpu_range("teardown", 530 * MS, 20 * MS, kind="annotation")
    a = _analyze(tr, tmp_path, window=window)
    (dev,) = a.devices
    (p,) = a.patterns
    lo, hi = dev.window_start_ns, dev.window_start_ns + dev.window_ns
    first = int(a.session.events.get_column("start_ns").min())
    assert (lo == first) == (window == "trace")  # the device window starts at its first kernel
    assert p.timeline.start_ns == lo and p.timeline.end_ns == hi
    assert p.timeline.values.size == bin_count(hi - lo, p.timeline.bin_ns)
    js = a.to_json()["devices"][0]["utilization"]
    assert (js["start_ns"], js["end_ns"]) == (lo, hi) and js["bin_ms"] == p.timeline.bin_ns / MS
    (lane,) = device_lanes(a)  # the plot: same start, same width, same values
    bins = lane.utilization()
    assert (bins.start_ns, bins.bin_ns) == (p.timeline.start_ns, p.timeline.bin_ns)
    assert bins.values.tolist() == p.timeline.values.tolist()


def test_bins_match_a_plain_python_interval_union(tmp_path: Path) -> None:
    rng = np.random.default_rng(13)
    tr = SynthTrace()
    tr.cpu_range("setup", 0, 5 * MS, kind="annotation")
    t = 20 * MS
    spans: list[tuple[int, int]] = []
    for _ in range(120):
        t += int(rng.integers(0, 3 * MS))  # gaps of 0..3 ms, some zero (back-to-back)
        d = int(rng.integers(10_000, 2 * MS))
        stream = int(rng.choice([7, 9]))
        tr.launch("k", t - 8_000, 3_000, t, d, stream=stream)
        spans.append((t, t + d))
        if rng.random() < 0.3:  # an overlapping copy on another stream: counted once
            tr.launch(
                "",
                t - 4_000,
                3_000,
                t + d // 3,
                d,
                kind="memcpy",
                stream=11,
                copy_kind="h2d",
                src_mem="pinned",
                dst_mem="device",
                bytes=1 << 16,
            )
            spans.append((t + d // 3, t + d // 3 + d))
        t += d
    a = _analyze(tr, tmp_path)
    (dev,) = a.devices
    (p,) = a.patterns
    tl = p.timeline
    union = [(s + tr.base_ns, e + tr.base_ns) for s, e in plain_union(spans)]
    lo, hi = union[0][0], max(e for _, e in union)
    assert (tl.start_ns, tl.end_ns) == (lo, hi) == (dev.window_start_ns, hi)
    assert tl.bin_ns == utilization_bin_ns(hi - lo)
    want = _plain_bins(union, lo, hi, tl.bin_ns)
    assert 0 < hi - lo - (len(want) - 1) * tl.bin_ns < tl.bin_ns  # a partial last bin
    assert tl.values.tolist() == pytest.approx(want, abs=1e-12)
    whole = np.array(want[:-1]) * 100.0  # the pattern drops the partial last bin
    pat = p.pattern
    assert pat.samples == whole.size >= MIN_PATTERN_BINS
    assert [pat.p10_pct, pat.p50_pct, pat.p90_pct] == pytest.approx(
        np.percentile(whole, [10, 50, 90]).tolist(), abs=1e-9
    )
    assert pat.mean_pct == pytest.approx(float(whole.mean()), abs=1e-9)


def test_84ms_trace_gets_a_curve(tmp_path: Path) -> None:
    a = tf.analyze(SYNTH["84ms"]().write_kineto(tmp_path / "t.pt.trace.json"))
    (p,) = a.patterns
    assert p.timeline.bin_ns == 500_000 and p.timeline.values.size >= 20
    assert p.pattern.samples >= MIN_PATTERN_BINS and p.pattern.pattern != "insufficient_data"
    assert p.pattern.interval_s == 0.0005
    assert p.pattern.pattern == "high_frequency_sawtooth"
    assert p.pattern.period_s == pytest.approx(84 * MS / 28 / 1e9, rel=0.05)  # one step


def test_40s_trace_classifies_as_before(tmp_path: Path) -> None:
    a = tf.analyze(SYNTH["40s"]().write_kineto(tmp_path / "t.pt.trace.json"))
    (p,) = a.patterns
    assert p.timeline.bin_ns == 100 * MS  # the dashboard bin on a long window
    assert p.pattern.pattern == "high_frequency_sawtooth"
    assert p.pattern.period_s == pytest.approx(0.8)  # 40 s / 50 steps, as with the old bins
    assert p.pattern.interval_s == 0.1


def test_bin_width_rule() -> None:
    assert utilization_bin_ns(84 * MS) == 500_000  # 168 bins
    assert utilization_bin_ns(40 * S) == 100 * MS
    assert utilization_bin_ns(10 * S) == 100 * MS  # exactly 100 bins of the dashboard bin
    assert utilization_bin_ns(10 * S - 1) == 50 * MS
    assert utilization_bin_ns(3600 * S) == 100 * MS  # long windows keep the physical bin
    assert utilization_bin_ns(3600 * S, bin_ms=1000) == S
    assert utilization_bin_ns(7_000) == MIN_BIN_NS  # never under 1 µs by itself ...
    assert utilization_bin_ns(7_000, bin_ms=1e-4) == 100  # ... unless asked
    assert utilization_bin_ns(0) == MIN_BIN_NS
    for span in (150_000, 3 * MS, 84 * MS, 1_234 * MS, 9_999 * MS):
        size = utilization_bin_ns(span)
        assert str(size)[0] in "125" and set(str(size)[1:]) <= {"0"}
        assert MIN_PATTERN_BINS <= span // size <= 2.5 * MIN_PATTERN_BINS, span
    assert [nice_floor_ns(x) for x in (0.5, 1, 7, 10, 19.9, 49, 999, 1000)] == [
        1, 1, 5, 10, 10, 20, 500, 1000,
    ]  # fmt: skip


def test_partial_last_bin_counts() -> None:
    assert (bin_count(0, 10), classified_bins(0, 10)) == (0, 0)
    assert (bin_count(7, 10), classified_bins(7, 10)) == (1, 1)  # the only bin is kept
    assert (bin_count(25, 10), classified_bins(25, 10)) == (3, 2)  # the sliver is dropped
    assert (bin_count(30, 10), classified_bins(30, 10)) == (3, 3)
