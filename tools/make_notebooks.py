"""Write the notebooks in ``notebooks/`` from their cells (outputs are made when they run):
``python tools/make_notebooks.py``. Each uses the public API only (``import traceforensics as
tf``) and reads data CI has: the shared real traces when present, else the bundled example.
``tests/test_notebooks.py`` executes every notebook headless and fails on any cell error.
"""

from __future__ import annotations

from pathlib import Path

import nbformat
from nbformat.v4 import new_code_cell, new_markdown_cell, new_notebook

ROOT = Path(__file__).resolve().parents[1]

FIND_DATA = """\
from pathlib import Path

import traceforensics as tf

here = Path.cwd()
root = next(p for p in (here, *here.parents) if (p / "pyproject.toml").exists())
shared = root.parent / "shared" / "traces"
example = root / "examples" / "synthetic_training.pt.trace.json.gz"
"""

NOTEBOOKS = {
    "01_gap_attribution.ipynb": [
        new_markdown_cell(
            "# Where did the GPU's time go?\n\nLoad a trace, look at the unified event table, "
            "then the ranked findings, idle time by cause, the figures and the evidence "
            "of the largest gap."
        ),
        new_code_cell(
            FIND_DATA + 'trace = shared / "kineto" / "resnet50_v100_workers0.pt.trace.json.gz"\n'
            "trace = trace if trace.exists() else example\n"
            "session = tf.load(trace)\nsession.events.head()"
        ),
        new_code_cell("result = tf.analyze(session)\nresult"),
        new_markdown_cell("The first change is the top finding; every finding is a table row."),
        new_code_cell(
            'findings = result.frames()["findings"]\n'
            'findings.select("category", "recoverable_ns", "share_of_window", "confidence")'
        ),
        new_code_cell(
            "device = result.devices[0]\n"
            "assert sum(device.idle_by_cause.values()) == device.idle_ns\n"
            "{c: ns for c, ns in device.idle_by_cause.items() if ns}"
        ),
        new_code_cell(
            "from traceforensics.report.plots import figure_analysis\n\n"
            "fig = figure_analysis(result)"
        ),
        new_markdown_cell(
            "The gap-attribution timeline: busy lanes by kind, each of the largest idle gaps "
            "split over its causes (the same colour per cause in every figure and in the HTML "
            "report), step boundaries dotted."
        ),
        new_code_cell(
            "from traceforensics.report.plots import figure_timeline\n\n"
            "fig = figure_timeline(result)"
        ),
        new_code_cell(
            "gap = result.idle.gaps[0]\n"
            "print(gap.dur_ns, gap.causes)\n"
            "for e in gap.evidence:\n    print(f'[{e.cause}] {e.kind} {e.name}: {e.detail}')"
        ),
    ],
    "02_compare_runs.ipynb": [
        new_markdown_cell(
            "# Did the change do what it should?\n\nThe same ResNet-50 training with "
            "`num_workers=0` and `num_workers=4`: data loading should vanish from the "
            "findings."
        ),
        new_code_cell(
            FIND_DATA + 'before = shared / "kineto" / "resnet50_v100_workers0.pt.trace.json.gz"\n'
            'after = shared / "kineto" / "resnet50_v100_workers4.pt.trace.json.gz"\n'
            "if not (before.exists() and after.exists()):\n"
            "    before = after = example  # without ../shared: the same run twice\n"
            "runs = {name: tf.analyze(path) for name, path in "
            '[("before", before), ("after", after)]}'
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
    ],
    "03_monitor_log.ipynb": [
        new_markdown_cell(
            "# A monitoring log next to a trace\n\nClassify an nvidia-smi style log alone, "
            "then read it beside a trace."
        ),
        new_code_cell(
            FIND_DATA + 'log = tf.load_monitor_log(root / "tests" / "fixtures" / "monitor" / '
            '"runbook_zh_1hz.txt")\nlog'
        ),
        new_code_cell(
            "from traceforensics.analysis.monitoring.monitor import analyze_monitor\n\n"
            "report = analyze_monitor(log)\n"
            "[(g.gpu, g.pattern.pattern) for g in report.gpus]"
        ),
        new_code_cell(
            "result = tf.analyze(example, monitor=log)\nresult.warnings, result.monitor is not None"
        ),
    ],
}


def main() -> None:
    out = ROOT / "notebooks"
    out.mkdir(exist_ok=True)
    for name, cells in NOTEBOOKS.items():
        nb = new_notebook(cells=cells)
        nb.metadata["kernelspec"] = {"name": "python3", "display_name": "Python 3"}
        nbformat.write(nb, out / name)


if __name__ == "__main__":
    main()
