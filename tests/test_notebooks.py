"""The notebooks in ``notebooks/`` run headless, top to bottom, on data CI has (issue 13): any
cell error fails the suite. They are written by ``tools/make_notebooks.py``; a notebook that
differs from its generator is stale and fails too."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.conftest import ROOT

nbformat = pytest.importorskip("nbformat", reason="nbformat is in the dev extras")
nbclient = pytest.importorskip("nbclient", reason="nbclient is in the dev extras")

NOTEBOOKS = sorted((ROOT / "notebooks").glob("*.ipynb"))


def test_there_are_notebooks() -> None:
    assert [p.name for p in NOTEBOOKS] == [
        "01_gap_attribution.ipynb", "02_compare_runs.ipynb", "03_monitor_log.ipynb",
    ]  # fmt: skip


@pytest.mark.parametrize("path", NOTEBOOKS, ids=lambda p: p.name)
def test_notebook_runs(path: Path) -> None:
    nb = nbformat.read(path, as_version=4)
    client = nbclient.NotebookClient(
        nb, timeout=300, kernel_name="python3", resources={"metadata": {"path": str(path.parent)}}
    )
    client.execute()  # raises CellExecutionError on the first failing cell
    outputs = [o for c in nb.cells if c.cell_type == "code" for o in c.get("outputs", [])]
    assert outputs and not [o for o in outputs if o.get("output_type") == "error"]


def test_notebooks_match_their_generator() -> None:
    import sys

    sys.path.insert(0, str(ROOT / "tools"))
    import make_notebooks

    for name, cells in make_notebooks.NOTEBOOKS.items():
        stored = json.loads((ROOT / "notebooks" / name).read_text())
        text = ["".join(c["source"]) for c in stored["cells"]]  # stored as a list of lines
        assert text == [c.source for c in cells], name
