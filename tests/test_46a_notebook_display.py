"""What a notebook shows (issue 46, item 1): an ``Analysis`` as HTML (verdict and findings),
each figure as a PNG, in a real Jupyter kernel, with the user's backend left as it was."""

from __future__ import annotations

import pytest

from tests.conftest import ROOT

nbformat = pytest.importorskip("nbformat", reason="nbformat is in the dev extras")
nbclient = pytest.importorskip("nbclient", reason="nbclient is in the dev extras")

SAMPLE = ROOT / "examples" / "synthetic_training.pt.trace.json.gz"
CELLS = [
    "import matplotlib\nbackend = matplotlib.get_backend()\nimport traceforensics as tf\n"
    f"result = tf.analyze({str(SAMPLE)!r})",
    "result",
    "from traceforensics.report.plots import figure_analysis, figure_timeline\n"
    "figure_analysis(result)",
    "fig = figure_timeline(result)\nfig",
    "print(matplotlib.get_backend() == backend)",
]


def test_a_notebook_shows_the_verdict_and_every_figure() -> None:
    nb = nbformat.v4.new_notebook(cells=[nbformat.v4.new_code_cell(c) for c in CELLS])
    nbclient.NotebookClient(nb, timeout=300, kernel_name="python3").execute()
    outputs = [c.get("outputs", []) for c in nb.cells]
    html = [o["data"]["text/html"] for o in outputs[1] if "text/html" in o.get("data", {})]
    assert html and "Verdict" in html[0] and "Findings" in html[0]
    for cell in (2, 3):
        pngs = [o for o in outputs[cell] if "image/png" in o.get("data", {})]
        assert len(pngs) == 1, CELLS[cell]  # (once: not also as a text repr beside it)
    assert [o.get("text", "").strip() for o in outputs[4]] == ["True"]
