"""The notebooks in ``notebooks/`` run headless, top to bottom, on data CI has (issue 13): any
cell error fails the suite. They are written by ``tools/make_notebooks.py``; a notebook that
differs from its generator is stale and fails too.

Issue 46: a notebook must show its figures. Every cell the generator tags ``figure`` has at
least one ``image/png`` output after headless execution (a cell that only assigns
``fig = figure_analysis(result)`` shows nothing), and the notebooks import only the documented
public modules of ``traceforensics`` (``PUBLIC_MODULES``)."""

from __future__ import annotations

import ast
import json
import sys
from functools import cache
from pathlib import Path
from typing import Any

import pytest

from tests.conftest import ROOT

nbformat = pytest.importorskip("nbformat", reason="nbformat is in the dev extras")
nbclient = pytest.importorskip("nbclient", reason="nbclient is in the dev extras")

NOTEBOOKS = sorted((ROOT / "notebooks").glob("*.ipynb"))
FIGURE_TAG = "figure"  # tools/make_notebooks.FIGURE_TAG
#: What a notebook may import from the package: README's library use (``traceforensics``,
#: ``traceforensics.report.plots``), docs/diff.md (``traceforensics.compare``), and the monitor
#: figure (``traceforensics.report.monitor_plot.figure_monitor``).
PUBLIC_MODULES = frozenset(
    {
        "traceforensics",
        "traceforensics.compare",
        "traceforensics.report.plots",
        "traceforensics.report.monitor_plot",
    }
)


@cache
def executed(path: Path) -> Any:
    """The notebook after a headless run (once per session: both tests below read it)."""
    nb = nbformat.read(path, as_version=4)
    client = nbclient.NotebookClient(
        nb, timeout=300, kernel_name="python3", resources={"metadata": {"path": str(path.parent)}}
    )
    client.execute()  # raises CellExecutionError on the first failing cell
    return nb


def figure_cells_without_image(nb: Any) -> list[int]:
    """Indices of the cells tagged ``figure`` that have no ``image/png`` output."""
    return [
        i
        for i, c in enumerate(nb.cells)
        if FIGURE_TAG in c.get("metadata", {}).get("tags", [])
        and not any("image/png" in o.get("data", {}) for o in c.get("outputs", []))
    ]


def private_imports(source: str) -> list[str]:
    """The ``traceforensics`` modules a cell imports that are not in ``PUBLIC_MODULES``
    (IPython magics and shell lines are dropped before parsing)."""
    code = "\n".join(ln for ln in source.splitlines() if not ln.lstrip().startswith(("%", "!")))
    names: list[str] = []
    for node in ast.walk(ast.parse(code)):
        if isinstance(node, ast.Import):
            names += [a.name for a in node.names]
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            names.append(node.module)
    return [n for n in names if n.split(".")[0] == "traceforensics" and n not in PUBLIC_MODULES]


def test_there_are_notebooks() -> None:
    assert [p.name for p in NOTEBOOKS] == [
        "01_gap_attribution.ipynb", "02_compare_runs.ipynb", "03_monitor_log.ipynb",
    ]  # fmt: skip


@pytest.mark.parametrize("path", NOTEBOOKS, ids=lambda p: p.name)
def test_notebook_runs(path: Path) -> None:
    nb = executed(path)
    outputs = [o for c in nb.cells if c.cell_type == "code" for o in c.get("outputs", [])]
    assert outputs and not [o for o in outputs if o.get("output_type") == "error"]


@pytest.mark.parametrize("path", NOTEBOOKS, ids=lambda p: p.name)
def test_figure_cells_show_an_image(path: Path) -> None:
    """Every notebook draws, and every cell tagged ``figure`` shows a PNG when run headless
    (as in a user's Jupyter)."""
    nb = executed(path)
    tagged = [c for c in nb.cells if FIGURE_TAG in c.get("metadata", {}).get("tags", [])]
    assert tagged, f"{path.name}: no cell tagged {FIGURE_TAG!r}"
    assert figure_cells_without_image(nb) == [], path.name


def test_the_image_check_catches_a_figure_that_is_not_shown() -> None:
    """The check itself: a tagged cell whose only output is text (an assigned figure, or a
    figure's repr without a PNG) is reported; one with a PNG is not."""
    text = nbformat.v4.new_output("execute_result", data={"text/plain": "<Figure>"})
    png = nbformat.v4.new_output("display_data", data={"image/png": "iVBOR", "text/plain": ""})
    cells = [nbformat.v4.new_code_cell("fig = f()"), nbformat.v4.new_code_cell("f()")]
    cells += [nbformat.v4.new_code_cell("f()"), nbformat.v4.new_code_cell("x")]
    for cell, outs in zip(cells, ([], [text], [png], []), strict=True):
        cell.outputs = outs
    for cell in cells[:3]:
        cell.metadata["tags"] = [FIGURE_TAG]
    assert figure_cells_without_image(nbformat.v4.new_notebook(cells=cells)) == [0, 1]


@pytest.mark.parametrize("path", NOTEBOOKS, ids=lambda p: p.name)
def test_notebooks_import_public_modules_only(path: Path) -> None:
    nb = nbformat.read(path, as_version=4)
    found = [n for c in nb.cells if c.cell_type == "code" for n in private_imports(c.source)]
    assert found == [], f"{path.name} imports internal modules"


def test_the_import_check_catches_an_internal_module() -> None:
    source = (
        "import traceforensics as tf\nfrom traceforensics.report.plots import figure_analysis\n"
        "from traceforensics.analysis.monitoring.monitor import analyze_monitor\n"
        "import traceforensics.ingest\n%matplotlib inline"
    )
    assert private_imports(source) == [
        "traceforensics.analysis.monitoring.monitor", "traceforensics.ingest",
    ]  # fmt: skip


def test_notebooks_match_their_generator() -> None:
    sys.path.insert(0, str(ROOT / "tools"))
    import make_notebooks  # type: ignore[import-not-found]

    assert make_notebooks.FIGURE_TAG == FIGURE_TAG
    for name, cells in make_notebooks.NOTEBOOKS.items():
        stored = json.loads((ROOT / "notebooks" / name).read_text())
        text = ["".join(c["source"]) for c in stored["cells"]]  # stored as a list of lines
        assert text == [c.source for c in cells], name
        tags = [c["metadata"].get("tags", []) for c in stored["cells"]]
        assert tags == [c.metadata.get("tags", []) for c in cells], name
