"""names.matching: the rows whose name matches, checked row by row against Python's ``re`` on
the bundled sample trace's frames (categorical names) and on a frame with null names."""

from __future__ import annotations

import re

import polars as pl
import pytest

from traceforensics.analysis.context import prepare
from traceforensics.analysis.names import matching
from traceforensics.ingest import load_path

SAMPLE = "examples/synthetic_training.pt.trace.json.gz"
# (pattern, literal): the kinds of patterns the analysis uses (simple enough that Python's
# ``re`` reads them as polars' regex engine does)
PATTERNS = [
    (r"^aten::", False),
    ("::", True),
    (r"(?i)memcpy", False),
    (r"^Optimizer\.|optimizer", False),
    (r"no such name at all", False),
]


def _plain(values: list[str | None], pattern: str, literal: bool) -> list[bool]:
    rx = re.compile(re.escape(pattern) if literal else pattern)
    return [v is not None and rx.search(v) is not None for v in values]


@pytest.mark.parametrize(("pattern", "literal"), PATTERNS)
def test_matching_rows_are_those_re_finds(pattern: str, literal: bool) -> None:
    ctx = prepare(load_path(SAMPLE))
    for frame in (ctx.tree, ctx.cpu_ops, ctx.session.events):
        texts = frame.get_column("name").cast(pl.String).to_list()
        got = frame.select(matching(frame, pattern, literal=literal)).to_series().to_list()
        assert got == _plain(texts, pattern, literal)


def test_null_names_never_match() -> None:
    frame = pl.DataFrame(
        {"name": ["aten::mm", None, "cudaMemcpyAsync", "aten::mm"]},
        schema={"name": pl.Categorical},
    )
    got = frame.select(matching(frame, "aten")).to_series().to_list()
    assert got == [True, False, False, True]
