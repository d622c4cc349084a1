"""Two runs compared, and the ``--fail-on`` gate (issue 15, docs/diff.md).

Pure computation on ``traceforensics.analysis/1`` documents: ``figures`` (what a document
holds that can be compared), ``noise`` (is a change beyond step-to-step noise), ``deltas``
(before/after/delta per figure and device), ``changes`` (findings and kernels), ``verdict``
(the answer in one sentence), ``rules`` (the ``--fail-on`` grammar), ``diff`` (the ``Diff``
result and its JSON), ``frames`` (its DataFrames), ``words`` (how numbers are written). It
imports nothing of ours but ``model``; ``report`` renders a ``Diff`` and ``cli`` wires it.
"""

from __future__ import annotations

from traceforensics.compare.diff import SCHEMA_DIFF, Diff, analysis_figures, diff_documents
from traceforensics.compare.rules import Check, Rule, check_rules, parse_rules

__all__ = [
    "SCHEMA_DIFF",
    "Check",
    "Diff",
    "Rule",
    "analysis_figures",
    "check_rules",
    "diff_documents",
    "parse_rules",
]
