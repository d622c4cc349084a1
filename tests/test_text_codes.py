"""The early-scan child's coded columns (``parts.TextCodes``, ``parts.joined_parts``) build the
very table the column lists build, meeting each distinct value in the same order."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import polars as pl
import pytest

from tests.conftest import ROOT, shared_trace
from traceforensics.ingest.kineto import early, events
from traceforensics.ingest.kineto.batches import ColumnBuilder
from traceforensics.ingest.kineto.columns import Columns
from traceforensics.ingest.kineto.parts import ROW_KINDS, KeptPart, TextCodes, joined_parts
from traceforensics.ingest.kineto.rows import row_rules

SAMPLE = ROOT / "examples" / "synthetic_training.pt.trace.json.gz"


def _table(columns: Columns, path: Path) -> pl.DataFrame:
    return events.extract(path, columns, 0, 0, None).events


def _listed(path: Path) -> Columns:
    """The scanned columns of ``path`` as lists (the stream's build), their rules run."""
    scan = early.scan_file(path)
    assert scan is not None
    builder = ColumnBuilder()
    early.build_columns(scan, builder)
    builder.c.rules = row_rules(builder.c)
    return builder.c


@pytest.mark.parametrize("which", ["sample", "resnet"])
def test_the_childs_codes_build_the_table_the_lists_build(which: str) -> None:
    path = (
        SAMPLE
        if which == "sample"
        else shared_trace("kineto/resnet50_v100_workers0.pt.trace.json.gz")
    )
    listed = _listed(path)
    want_kinds, want_names = list(listed.kind), list(listed.name)
    answer = early.with_columns(early.scan_file(path))  # type: ignore[arg-type]
    assert answer.built is not None
    coded = answer.built[0]
    # the lists were not kept: the codes stand for them, and they decode to the same rows
    assert coded.kind == [] and coded.name == [] and coded.cat == []
    codes = coded.coded
    assert codes is not None and codes.rows == len(want_kinds) == coded.rows
    assert [ROW_KINDS[k] for k in codes.kind[0].tolist()] == want_kinds
    assert [codes.names[i] for i in codes.name[0].tolist()] == want_names
    # each distinct name once, in the order its first row has it
    assert codes.names == list(dict.fromkeys(want_names))
    assert len(coded.arg_parts) == 1
    got, want = _table(coded, path), _table(listed, path)
    assert got.equals(want)


def test_codes_of_chunks_share_a_code_per_value_in_first_row_order() -> None:
    codes = TextCodes()
    # chunk 1: local codes into its table; "b" first appears before "a"
    t1 = np.array([None, "a", "b"], dtype=object)
    codes.add(
        np.array([0, 1, 1], np.int8),
        (np.array([2, 1, 2], np.int32), t1),
        (np.array([1, 1, 1], np.int32), t1),
    )
    # chunk 2: its own table, "c" new, "a" again under another local code
    t2 = np.array(["c", None, "a"], dtype=object)
    codes.add(np.array([1], np.int8), (np.array([2], np.int32), t2), (np.array([0], np.int32), t2))
    codes.add(
        np.array([2, 2], np.int8),
        (np.array([0, 2], np.int32), t2),
        (np.array([2, 0], np.int32), t2),
    )
    codes.settle()
    assert codes.rows == 6
    assert codes.names == ["b", "a", "c"]
    assert [codes.names[i] for i in codes.name[0].tolist()] == ["b", "a", "b", "a", "c", "a"]
    assert [codes.cats[i] for i in codes.cat[0].tolist()] == ["a", "a", "a", "c", "a", "c"]
    assert codes.kind[0].tolist() == [0, 1, 1, 1, 2, 2]


def test_a_parsed_batch_or_a_joined_batch_drops_the_codes() -> None:
    # codes come from scanned chunks only: once a row came otherwise the lists hold them all
    builder = ColumnBuilder(coded=True)
    event = {"ph": "X", "cat": "cpu_op", "name": "aten::mm", "pid": 1, "tid": 2, "ts": 5, "dur": 1}
    builder.add_dicts([event])
    assert builder.c.coded is None and builder.c.rows == 1 and builder.c.kind == ["cpu_op"]
    scanned = ColumnBuilder(coded=True)
    early.build_columns(early.scan_file(SAMPLE), scanned)  # type: ignore[arg-type]
    rows = scanned.c.rows
    assert scanned.c.coded is not None and scanned.c.coded.rows == rows == len(scanned.c.kind)
    scanned.c.extend(builder.c)
    assert scanned.c.coded is None and scanned.c.rows == rows + 1


def test_joined_kept_parts_build_the_same_args_table() -> None:
    rng = np.random.default_rng(7)
    parts = []
    base = 0
    for _ in range(5):  # texts repeat within and across parts
        texts = [f"[[{int(v)}]]" for v in rng.integers(0, 12, size=int(rng.integers(1, 8)))]
        n = int(rng.integers(0, 40))
        event = np.sort(rng.integers(base, base + 50, size=n)).astype(np.int64)
        base += 50
        parts.append(
            KeptPart(
                event,
                rng.integers(0, 3, size=n).astype(np.int32),
                rng.integers(0, len(texts), size=n).astype(np.int32),
                texts,
            )
        )
    one = joined_parts(parts)
    assert len(one.texts) == len(set(one.texts)) == len({t for p in parts for t in p.texts})
    got, want = events._args_frame([one], 100), events._args_frame(list(parts), 100)
    assert got.height == sum(len(p.event) for p in parts) > 0
    assert got.with_columns(pl.all().cast(pl.String)).equals(
        want.with_columns(pl.all().cast(pl.String))
    )
    assert joined_parts([]).event.size == 0
