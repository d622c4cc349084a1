"""Write the notebooks in ``notebooks/`` from their cells (outputs are made when they run):
``python tools/make_notebooks.py``. Each uses the public API only (``import traceforensics as
tf``, the figures of ``traceforensics.report.plots``, ``traceforensics.compare`` for two runs)
and reads data CI has: the shared real traces when present, else the bundled example.

A cell that draws ends with the figure as its last expression (Jupyter shows it as an
``image/png`` output: the figures have ``_repr_png_``) and carries the cell tag ``figure``
(``figure_cell``); ``tests/test_notebooks.py`` executes every notebook headless, fails on any
cell error, and checks that every ``figure`` cell produced an image.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import nbformat
from nbformat import v4

# nbformat has no type hints: its constructors are typed here once (mypy strict)
new_code_cell: Callable[[str], Any] = v4.new_code_cell
new_markdown_cell: Callable[[str], Any] = v4.new_markdown_cell
new_notebook: Callable[..., Any] = v4.new_notebook
write_notebook: Callable[[Any, Path], None] = nbformat.write

ROOT = Path(__file__).resolve().parents[1]
#: The cell tag (Jupyter's ``metadata.tags``) of a cell that must show at least one figure.
FIGURE_TAG = "figure"

FIND_DATA = """\
from pathlib import Path

import traceforensics as tf

here = Path.cwd()
root = next(p for p in (here, *here.parents) if (p / "pyproject.toml").exists())
shared = root.parent / "shared" / "traces"
example = root / "examples" / "synthetic_training.pt.trace.json.gz"
"""


def figure_cell(source: str) -> Any:
    """A code cell whose last expression is a figure, tagged so the test checks its image."""
    cell = new_code_cell(source)
    cell.metadata["tags"] = [FIGURE_TAG]
    return cell


NB_GAPS = [
    new_markdown_cell(
        "# Where did the GPU's time go?\n\nA real ResNet-50 training run on a V100, recorded "
        "with the PyTorch profiler and `DataLoader(num_workers=0)` (without `../shared`, the "
        "bundled synthetic example). Load the trace, look at the unified event table, then "
        "the verdict, the ranked findings, idle time by cause, the figures and the evidence "
        "of the largest gap."
    ),
    new_code_cell(
        FIND_DATA + 'trace = shared / "kineto" / "resnet50_v100_workers0.pt.trace.json.gz"\n'
        "trace = trace if trace.exists() else example\n"
        "session = tf.load(trace)\nsession.events.head()"
    ),
    new_markdown_cell(
        "The analysis: the verdict in one line, then the findings, largest first (each a "
        "change that gives time back)."
    ),
    new_code_cell("result = tf.analyze(session)\nresult"),
    new_code_cell(
        'findings = result.frames()["findings"]\n'
        'findings.select("category", "recoverable_ns", "share_of_window", "confidence")'
    ),
    new_markdown_cell(
        "Every nanosecond of idle is given to exactly one cause: the causes sum to the idle "
        "time. On the ResNet-50 run the GPU waits mostly for the data loader "
        "(`data_loading`): the main thread reads and decodes the next batch while the GPU "
        "has nothing queued."
    ),
    new_code_cell(
        "device = result.devices[0]\n"
        "assert sum(device.idle_by_cause.values()) == device.idle_ns\n"
        "{c: ns for c, ns in device.idle_by_cause.items() if ns}"
    ),
    new_markdown_cell(
        "The gap attribution: left, the GPU's busy % per time bin with the largest idle gaps "
        "shaded by their top cause (the regular deep troughs, one per training step, are the "
        "data loader); right, idle time by cause in ms and % of idle."
    ),
    figure_cell(
        "from traceforensics.report.plots import figure_analysis, figure_timeline\n\n"
        "figure_analysis(result)"
    ),
    new_markdown_cell(
        "The timeline: busy lanes by kind (kernels, copies), each of the largest idle gaps "
        "split over its causes (the same colour per cause in every figure and in the HTML "
        "report), step boundaries dotted."
    ),
    figure_cell("figure_timeline(result)"),
    new_markdown_cell(
        "The largest gap and its evidence: the host events that ran while the GPU waited, "
        "the ones that explain it."
    ),
    new_code_cell(
        "gap = result.idle.gaps[0]\n"
        "print(f'{gap.dur_ns / 1e6:.1f} ms idle:', gap.causes)\n"
        "for e in gap.evidence:\n    print(f'[{e.cause}] {e.kind} {e.name}: {e.detail}')"
    ),
]

NB_COMPARE = [
    new_markdown_cell(
        "# Did the change do what it should?\n\nThe same ResNet-50 training on a V100 with "
        "`DataLoader(num_workers=0)` and `num_workers=4`: data loading should vanish from "
        "the findings, the step get shorter, and the first change to make become something "
        "else. (Without `../shared`, the bundled example twice: nothing changes.)"
    ),
    new_code_cell(
        FIND_DATA + 'before = shared / "kineto" / "resnet50_v100_workers0.pt.trace.json.gz"\n'
        'after = shared / "kineto" / "resnet50_v100_workers4.pt.trace.json.gz"\n'
        "if not (before.exists() and after.exists()):\n"
        "    before = after = example  # without ../shared: the same run twice\n"
        "runs = {name: tf.analyze(path) for name, path in "
        '[("before", before), ("after", after)]}\n'
        "runs"
    ),
    new_code_cell(
        "import polars as pl\n\n"
        "table = pl.concat(\n"
        '    [r.frames()["devices"].with_columns(pl.lit(name).alias("run")) '
        "for name, r in runs.items()]\n"
        ')\ntable.select("run", "window_ns", "busy_ns", "idle_ns", "idle_data_loading_ns")'
    ),
    new_code_cell(
        "for name, r in runs.items():\n"
        "    first = r.findings[0]\n"
        "    print(f'{name}: first change {first.category}, "
        "~{first.recoverable_ns / 1e6:.1f} ms back')"
    ),
    new_markdown_cell(
        "Before: busy % falls to zero once per step while the data loader runs, and "
        "`data_loading` dominates the idle bar."
    ),
    figure_cell(
        "from traceforensics.report.plots import figure_analysis, figure_steps\n\n"
        'figure_analysis(runs["before"])'
    ),
    new_markdown_cell(
        "After: the step-long troughs are gone; the idle that is left is short dips, mostly "
        "launch overhead and CPU work between launches, and the data-loading bar is down to a "
        "few ms. The first change is now a compute one (`fp32_matmul` on the shared traces)."
    ),
    figure_cell('figure_analysis(runs["after"])'),
    new_markdown_cell(
        "Per step, before then after: each step's busy time and idle time by cause (ms). The "
        "steps of the second run are shorter by about the data loader's share."
    ),
    figure_cell('figure_steps(runs["before"])'),
    figure_cell('figure_steps(runs["after"])'),
    new_markdown_cell(
        "The comparison `tf diff before after` prints, from Python "
        "(`traceforensics.compare.diff_documents`, docs/diff.md): the verdict, judged "
        "against step-to-step noise, and each figure's change."
    ),
    new_code_cell(
        "from traceforensics.compare import diff_documents\n\n"
        'diff = diff_documents(runs["before"].to_json(), runs["after"].to_json(), '
        '"workers0", "workers4")\n'
        "print(diff.verdict.text)\n"
        'figures = diff.frames()["figures"]\n'
        'figures.filter(pl.col("scope") == "job").select(\n'
        '    "figure", "before", "after", "delta_pct", "within_noise"\n'
        ").head(8)"
    ),
]

NB_MONITOR = [
    new_markdown_cell(
        "# A monitoring log next to a trace\n\n`nvidia-smi` tells you *that* the GPU idles, "
        "a trace tells you *why*. Here a 100 ms `nvidia-smi --query-gpu ... -lms 100` log "
        "of GPU 0 covers the ResNet-50 `num_workers=0` trace (without `../shared`, the "
        "bundled example). No monitoring log was recorded with that trace, so the log is "
        "made by the project's own generator (`tools/make_monitor_logs.py`), with its "
        "timestamps placed around the trace's wall-clock window: utilization that swings "
        "between ~95 % and ~3 % (a sawtooth, as a data-starved GPU shows), the SM clock "
        "dropping whenever the GPU idles. (The bundled example's trace spans a few ms: too "
        "few samples around it to classify, and the notebook says so.)"
    ),
    new_code_cell(
        FIND_DATA + "import sys\n"
        "import tempfile\n\n"
        "import numpy as np\n\n"
        'sys.path.insert(0, str(root / "tools"))\n'
        "import make_monitor_logs as gen  # the project's monitoring-log generator\n\n"
        'trace = shared / "kineto" / "resnet50_v100_workers0.pt.trace.json.gz"\n'
        "trace = trace if trace.exists() else example\n"
        "session = tf.load(trace)\n"
        "events = session.events  # this trace's clock is wall-clock epoch ns\n"
        'start_s = events["start_ns"].min() / 1e9\n'
        'span_s = (events["start_ns"] + events["dur_ns"]).max() / 1e9 - start_s\n\n'
        "interval_s = 0.1\n"
        "n = int(span_s / interval_s) + 20  # 1 s of samples on either side of the trace\n"
        "gen.START_EPOCH_S = start_s - 1.0  # the generator writes times from this epoch\n"
        'gpu0 = gen.simulate("high_frequency_sawtooth", n, interval_s, '
        "np.random.default_rng(0))\n"
        'path = Path(tempfile.mkdtemp()) / "nvidia-smi.csv"\n'
        "gen.write_smi_csv(path, [gpu0], interval_s, units=True)\n"
        "print(path.read_text().splitlines()[1])\n"
        "log = tf.load_monitor_log(path)  # the generator writes UTC\n"
        'log.frame.select("gpu", "time_ns", "util_pct", "sm_clock_mhz", "power_w").head()'
    ),
    new_markdown_cell(
        "The analysis with the log aligned by wall clock (the trace's window plus 5 samples "
        "on each side): `result.monitor` classifies the utilization curve and tells clock "
        "throttling under load apart from idle down-clocking."
    ),
    new_code_cell(
        "result = tf.analyze(session, monitor=log)\n"
        "gpu = result.monitor.gpus[0]\n"
        "print(f'pattern {gpu.pattern.pattern}, {gpu.samples} samples, '\n"
        "      f'mean utilization {gpu.util_mean:.0f} %')\n"
        "print('throttle episodes under load:', len(gpu.throttle_episodes))\n"
        "print('samples down-clocked while idle:', gpu.idle_downclock_samples)\n"
        "for line in gpu.findings:\n    print('-', line)\n"
        "result.warnings"
    ),
    new_markdown_cell(
        "The log's figure: utilization, SM clock, temperature and power on one time axis. "
        "The clock falls only where utilization falls (idle down-clocking, not shaded: no "
        "throttling under load), so the hardware is not what slows this run."
    ),
    figure_cell(
        "from traceforensics.report.monitor_plot import figure_monitor\n\n"
        "figure_monitor(log, result.monitor)"
    ),
    new_markdown_cell(
        'The log alone stops at "the GPU swings between busy and idle". The trace beside '
        "it names the cause: the first finding, and the idle time by cause."
    ),
    new_code_cell(
        "first = result.findings[0]\n"
        "print(f'first change: {first.category}, ~{first.recoverable_ns / 1e6:.0f} ms back')\n"
        "result"
    ),
    figure_cell(
        "from traceforensics.report.plots import figure_analysis\n\nfigure_analysis(result)"
    ),
]

NOTEBOOKS = {
    "01_gap_attribution.ipynb": NB_GAPS,
    "02_compare_runs.ipynb": NB_COMPARE,
    "03_monitor_log.ipynb": NB_MONITOR,
}


def main() -> None:
    out = ROOT / "notebooks"
    out.mkdir(exist_ok=True)
    for name, cells in NOTEBOOKS.items():
        nb = new_notebook(cells=cells)
        nb.metadata["kernelspec"] = {"name": "python3", "display_name": "Python 3"}
        write_notebook(nb, out / name)


if __name__ == "__main__":
    main()
