"""Issue 45: a cause's metadata lives in one row of ``analysis.cause_table``.

Every consumer (glossary, remedies, estimates, palette, category list, CLI) reads the row; one
priority order serves both the overlap rule and the classifier (``in_priority``); a row added to
a copy of the table reaches every consumer without touching another file.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from dataclasses import replace
from pathlib import Path

import pytest

from traceforensics.analysis import cause_table as ct
from traceforensics.analysis.findings.estimates import IDLE_CONFIDENCE
from traceforensics.analysis.findings.glossary import GLOSSARY
from traceforensics.analysis.findings.remedies import GENERIC, REMEDIES
from traceforensics.analysis.findings.results import CATEGORIES
from traceforensics.analysis.idle import causes
from traceforensics.analysis.program import FRAMEWORKS
from traceforensics.report.palette import CAUSE_STYLE

ROOT = Path(__file__).resolve().parents[1]


def test_every_consumer_reads_the_row() -> None:
    for c in ct.CAUSE_TABLE:
        assert GLOSSARY[c.id] == (c.meaning, c.detection), c.id
        assert GENERIC[c.id] == c.remedy, c.id
        assert IDLE_CONFIDENCE[c.id] == c.confidence, c.id
        assert CAUSE_STYLE[c.id] == (c.color, c.hatch), c.id
        for framework, text in c.remedies.items():
            assert framework in FRAMEWORKS and REMEDIES[(c.id, framework)] == text, c.id
    ids = tuple(c.id for c in ct.CAUSE_TABLE)
    assert ids == ct.CAUSES == causes.CAUSES == CATEGORIES[: len(ids)]
    # no cause keyed outside its row: the per-framework table holds no other cause entry
    assert {k for k, _ in REMEDIES if k in ids} == {c.id for c in ct.CAUSE_TABLE if c.remedies}
    assert causes.PRIORITY is ct.PRIORITY and causes.CAUSE_INDEX is ct.CAUSE_INDEX


def test_one_priority_order() -> None:
    ranks = [ct.CAUSE_BY_ID[c].priority or 0 for c in ct.PRIORITY]
    assert ranks == sorted(ranks) and len(set(ranks)) == len(ranks)
    assert set(ct.PRIORITY) == {c.id for c in ct.CAUSE_TABLE if c.priority is not None}
    # the classifier's first-match order is the same order (a dict's own order does not count)
    rules = {ct.IO: "io", ct.DATA_LOADING: "data", ct.HOST_SYNC: "sync", ct.CPU_COMPUTE: "cpu"}
    assert [r for _, r in ct.in_priority(rules)] == ["sync", "data", "io", "cpu"]
    assert next(i for i, _ in ct.in_priority(rules)) == ct.CAUSE_INDEX[ct.HOST_SYNC]
    with pytest.raises(ValueError, match="not host classes"):
        ct.in_priority({ct.UNTRACED: "gpu-side causes have no priority"})


@pytest.mark.parametrize(
    "change",
    [
        {"confidence": "sure"},
        {"meaning": ""},
        {"remedy": ""},
        {"id": ct.HOST_SYNC},  # repeated id
        {"priority": 10},  # host_sync's priority
    ],
)
def test_a_wrong_row_fails_at_import(change: dict[str, object]) -> None:
    row = replace(ct.CAUSE_TABLE[0], **change)  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="cause table"):
        ct._check((*ct.CAUSE_TABLE[1:], row))


_ROW = """    Cause(
        "probe_cause",
        priority=PRIORITY,
        color="#117733",
        hatch="++",
        confidence="high",
        meaning="the host waited for an example",
        detection="example ranges on the launching thread",
        remedy="wait for fewer examples",
        remedies={"pytorch": "torch: wait for fewer examples"},
    ),
"""

_CHECK = """
from traceforensics.analysis.cause_table import CAUSES, PRIORITY
from traceforensics.analysis.findings.estimates import IDLE_CONFIDENCE
from traceforensics.analysis.findings.glossary import GLOSSARY
from traceforensics.analysis.findings.remedies import remedy
from traceforensics.analysis.findings.results import CATEGORIES
from traceforensics.analysis.program import Program
from traceforensics.cli.main import main
from traceforensics.history.figures import check_figure
from traceforensics.report.palette import cause_color, cause_hatch

new = "probe_cause"
assert CAUSES[-1] == new and CATEGORIES[len(CAUSES) - 1] == new
assert PRIORITY.index(new) == PRIORITY.index("data_loading") + 1  # just after it
assert GLOSSARY[new].meaning == "the host waited for an example"
assert remedy(new, Program("cuda", "nvidia", "")) == "wait for fewer examples"
assert remedy(new, Program("pytorch", "nvidia", "")).startswith("torch:")
assert IDLE_CONFIDENCE[new] == "high"
assert (cause_color(new), cause_hatch(new)) == ("#117733", "++")
assert check_figure("idle.probe_cause", CAUSES) == "idle.probe_cause"
main(["explain", new])
"""


def test_a_new_row_reaches_every_consumer(tmp_path: Path) -> None:
    """Add a row to a copy of the table only: every consumer of cause metadata has it."""
    src = tmp_path / "src"
    shutil.copytree(
        ROOT / "src" / "traceforensics",
        src / "traceforensics",
        ignore=shutil.ignore_patterns("__pycache__"),
    )
    table = src / "traceforensics" / "analysis" / "cause_table.py"
    text = table.read_text(encoding="utf-8")
    end = "\n)\n\n#: Every cause id"
    assert text.count(end) == 1
    # a host class just after data_loading (a priority no other row holds)
    row = _ROW.replace("PRIORITY", str((ct.CAUSE_BY_ID[ct.DATA_LOADING].priority or 0) + 1))
    table.write_text(text.replace(end, "\n" + row.rstrip("\n") + end), encoding="utf-8")
    env = {**os.environ, "PYTHONPATH": str(src)}
    out = subprocess.run(
        [sys.executable, "-c", _CHECK],
        check=False,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert out.returncode == 0, out.stderr[-3000:]
    assert out.stdout.startswith("probe_cause: the host waited for an example"), out.stdout
    assert "torch: wait for fewer examples" in out.stdout
