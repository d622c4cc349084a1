"""Figures (issue 13): every plot function on the edge traces (CPU-only, one kernel, 84 ms,
40 s; synthetic ones from tests/edge_traces.py, real ones from ../shared when present) returns
a figure and saves a PNG; utilization bins start at the analysis window and match a
plain-Python interval union; one distinct colour per cause; legends outside every axes; the CLI
and the reports carry the figures."""

from __future__ import annotations

import itertools
from collections.abc import Callable
from pathlib import Path
from typing import Any

import matplotlib
import pytest

import traceforensics as tf
from tests.conftest import ROOT, TRACES, plain_union, run_cli
from tests.edge_traces import MS, REAL, SYNTH
from traceforensics.analysis.idle.causes import CAUSES
from traceforensics.analysis.pipeline import Analysis
from traceforensics.analysis.utilization.bins import utilization_bin_ns
from traceforensics.report.lanes import device_lanes
from traceforensics.report.palette import CAUSE_STYLE, cause_color, cause_hatch
from traceforensics.report.plotkit import fmt_bin
from traceforensics.report.plots import (
    FIGURES,
    figure_analysis,
    figure_pngs,
    figure_short_kernels,
    figure_steps,
    figure_tflops,
    figure_timeline,
    figure_utilization,
    write_figures,
)

matplotlib.use("Agg")

PLOTS: list[Callable[[Analysis], Any]] = [
    figure_analysis,
    figure_timeline,
    figure_utilization,
    figure_steps,
    figure_short_kernels,
    figure_tflops,
]


@pytest.fixture(scope="module")
def analyses(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Analysis]:
    out: dict[str, Analysis] = {}
    base = tmp_path_factory.mktemp("plots")
    for name, build in SYNTH.items():
        path = build().write_kineto(base / f"{name}.pt.trace.json")
        out[name] = tf.analyze(path)
    return out


def _analysis(name: str, analyses: dict[str, Analysis]) -> Analysis:
    if name in analyses:
        return analyses[name]
    rel, kw = REAL[name]
    if not (TRACES / rel).exists():
        pytest.skip(f"../shared/traces/{rel} not present")
    return tf.analyze(TRACES / rel, **kw)


def _overlap(a: Any, b: Any) -> float:
    w = min(a.x1, b.x1) - max(a.x0, b.x0)
    h = min(a.y1, b.y1) - max(a.y0, b.y0)
    return max(w, 0.0) * max(h, 0.0)


def _legends_outside(fig: Any) -> None:
    """After drawing, no legend's box overlaps any axes' box (display coordinates)."""
    fig.canvas.draw()
    renderer = fig.canvas.get_renderer()
    legends = list(fig.legends) + [ax.get_legend() for ax in fig.axes if ax.get_legend()]
    for leg in legends:
        box = leg.get_window_extent(renderer)
        for ax in fig.axes:
            if ax.get_visible() and ax.axison:
                assert _overlap(box, ax.get_window_extent(renderer)) < 1.0, ax.get_title()


@pytest.mark.parametrize("name", [*SYNTH, *REAL])
def test_every_plot_on_edge_traces(
    name: str, analyses: dict[str, Analysis], tmp_path: Path
) -> None:
    import matplotlib.pyplot as plt

    a = _analysis(name, analyses)
    assert bool(a.devices) == ("cpu_only" not in name)
    for make in PLOTS:
        fig = make(a)
        assert fig.axes, make.__name__
        _legends_outside(fig)
        if not a.devices:  # an explicit message, never an empty plot
            texts = " ".join(t.get_text() for ax in fig.axes for t in ax.texts)
            assert "no GPU activity" in texts, make.__name__
        out = tmp_path / f"{make.__name__}.png"
        fig.savefig(out, dpi=60)
        plt.close(fig)
        assert out.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n" and out.stat().st_size > 2_000


def test_utilization_bins_start_at_the_window_and_match_a_plain_union(
    analyses: dict[str, Analysis],
) -> None:
    a = analyses["84ms"]
    (dev,) = a.devices
    (lane,) = device_lanes(a)
    bins = lane.utilization()
    assert bins.start_ns == dev.window_start_ns  # not the trace's first (host) event
    assert a.session.events.get_column("start_ns").min() < dev.window_start_ns
    assert bins.bin_ns == 500_000  # an ~84 ms window -> 500 µs bins
    hi = dev.window_start_ns + dev.window_ns
    ev = a.session.events.filter(a.session.events.get_column("device").is_not_null())
    spans = [(s, s + d) for s, d in ev.select("start_ns", "dur_ns").iter_rows()]
    union = plain_union(spans)
    want = []
    for lo in range(bins.start_ns, hi, bins.bin_ns):
        top = min(lo + bins.bin_ns, hi)
        busy = sum(max(0, min(e, top) - max(s, lo)) for s, e in union)
        want.append(busy / (top - lo))
    assert len(want) == bins.values.size and 160 <= len(want) <= 400
    assert bins.values.tolist() == pytest.approx(want, abs=1e-12)
    assert sum(e - s for s, e in union) == dev.busy_ns


def test_utilization_title_states_the_bin_and_x_starts_at_the_window(
    analyses: dict[str, Analysis],
) -> None:
    import matplotlib.pyplot as plt

    for name, size in (("84ms", "500 µs"), ("40s", "100 ms")):
        fig = figure_utilization(analyses[name])
        ax = fig.axes[0]
        assert f"{size} bins" in ax.get_title(loc="left")
        assert ax.lines[0].get_xdata()[0] == 0.0
        plt.close(fig)


@pytest.mark.parametrize("exp", range(5, 12))  # 100 µs .. 100 s windows, 3 per decade
def test_bins_are_sized_to_the_trace(exp: int) -> None:
    # the analysis' rule (bins.utilization_bin_ns), which the plot draws: 1-2-5 steps giving
    # 100..250 bins on a short window, the 100 ms dashboard bin from 10 s on
    for m in (1, 3, 7):
        span = m * 10**exp
        size = utilization_bin_ns(span)
        assert str(size).lstrip("0")[0] in "125" and set(str(size)[1:]) <= {"0"}
        if span >= 10_000 * MS:
            assert size == 100 * MS
        else:
            assert 100 <= -(-span // size) <= 250, (span, size)
    assert fmt_bin(utilization_bin_ns(84 * MS)) == "500 µs"
    assert utilization_bin_ns(40_000 * MS) == 100 * MS


def test_every_cause_has_its_own_colour() -> None:
    from matplotlib.colors import to_rgb

    assert set(CAUSES) <= set(CAUSE_STYLE)
    colors = [cause_color(c) for c in CAUSES]
    assert len(set(colors)) == len(CAUSES)
    for a, b in itertools.combinations(CAUSES, 2):
        ra, rb = to_rgb(cause_color(a)), to_rgb(cause_color(b))
        dist = sum((x - y) ** 2 for x, y in zip(ra, rb, strict=True)) ** 0.5
        assert dist > 0.15 or cause_hatch(a) != cause_hatch(b), (a, b)
    ra, rb = to_rgb(cause_color("cpu_compute")), to_rgb(cause_color("untraced"))
    assert sum(abs(x - y) for x, y in zip(ra, rb, strict=True)) > 1.0


def test_figures_use_the_palette(analyses: dict[str, Analysis]) -> None:
    import matplotlib.pyplot as plt
    from matplotlib.colors import to_hex

    a = analyses["40s"]
    fig = figure_analysis(a)
    bar_ax = fig.axes[1]
    faces = {to_hex(p.get_facecolor(), keep_alpha=False).upper() for p in bar_ax.patches}
    used = {c for c, v in a.devices[0].idle_by_cause.items() if v}
    assert used and faces == {cause_color(c).upper() for c in used}
    plt.close(fig)


def test_html_report_embeds_every_figure_with_cause_swatches(
    analyses: dict[str, Analysis],
) -> None:
    from traceforensics.report.html import render_html

    a = analyses["84ms"]
    text = render_html(a)
    pngs = figure_pngs(a)
    assert [n for n, _, _ in pngs] == ["main", "timeline", "steps"]  # no short kernel, no FLOPs
    assert text.count("src='data:image/png;base64,") == len(pngs)
    top = max(a.devices[0].idle_by_cause, key=lambda c: a.devices[0].idle_by_cause[c])
    assert f"background:{cause_color(top)}" in text
    assert "no GPU activity" in render_html(analyses["cpu_only"]).replace("No GPU", "no GPU")


def test_cli_plot_writes_the_figures_beside_it_and_markdown_links_them(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    trace = ROOT / "examples" / "synthetic_training.pt.trace.json.gz"
    png, md = tmp_path / "out.png", tmp_path / "notes" / "r.md"
    md.parent.mkdir()
    code, _, err = run_cli(
        ["analyze", "--no-cache", str(trace), "--plot", str(png), "--markdown", str(md)], capsys
    )
    assert code == 0, err
    names = sorted(p.name for p in tmp_path.glob("*.png"))
    assert names == sorted(["out.png", *(f"out.{n}.png" for n in FIGURES)])
    text = md.read_text()
    assert "## Figures" in text and "](../out.timeline.png)" in text
    report = tmp_path / "rep.md"
    code, _, err = run_cli(["analyze", "--no-cache", str(trace), "--report", str(report)], capsys)
    assert code == 0, err
    body = report.read_text()
    for name in ("rep.png", "rep.timeline.png", "rep.steps.png", "rep.kernels.png"):
        assert (tmp_path / name).stat().st_size > 2_000 and f"]({name})" in body


def test_write_figures_keeps_the_suffix(analyses: dict[str, Analysis], tmp_path: Path) -> None:
    paths = write_figures(analyses["single_kernel"], tmp_path / "f.svg")
    assert sorted(p.name for p in paths.values()) == sorted(
        ["f.svg", *(f"f.{n}.svg" for n in FIGURES)]
    )
    assert all(p.read_text().lstrip().startswith("<?xml") for p in paths.values())
