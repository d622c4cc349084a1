"""Issue 45, item 3: the reader registry (``ingest.readers.READERS``): detection and loads read
one list, and a new format is its loader and one line."""

from __future__ import annotations

import json
from pathlib import Path

import polars as pl
import pytest

from tests.conftest import ROOT, run_cli
from traceforensics.ingest import load_path, readers
from traceforensics.ingest.readers import READERS, Reader, reader_of, sniff_file
from traceforensics.model import TraceMeta, TraceSession
from traceforensics.model.session import InputInfo

EXAMPLE = ROOT / "examples" / "synthetic_training.pt.trace.json.gz"
FIXTURES = ROOT / "tests" / "fixtures"


def test_the_registry_names_every_format_once() -> None:
    names = [r.name for r in READERS]
    assert names == ["nsys-sqlite", "kineto", "rocprof", "nsys-rep"]
    assert {r.rank_set for r in READERS} == {"nsys", "kineto", None}


def test_detection_is_the_registrys_first_yes(tmp_path: Path) -> None:
    assert sniff_file(EXAMPLE) == "kineto"
    sqlite = next(FIXTURES.rglob("*.sqlite"), None)
    if sqlite is not None:
        assert reader_of(sqlite).name == "nsys-sqlite"
    rep = tmp_path / "r.nsys-rep"
    rep.write_bytes(b"\x00binary report")
    assert sniff_file(rep) == "nsys-rep"
    text_rep = tmp_path / "t.nsys-rep"  # JSON text under a report's name: the name wins
    text_rep.write_text("{}")
    assert sniff_file(text_rep) == "nsys-rep"


def _toy_load(path: Path) -> TraceSession:
    """A made-up format: one kernel per line ``start_ns dur_ns``."""
    rows = [tuple(map(int, line.split())) for line in path.read_text().split("\n")[1:] if line]
    frame = pl.DataFrame(
        {
            "event_id": list(range(len(rows))),
            "kind": ["kernel"] * len(rows),
            "start_ns": [r[0] for r in rows],
            "dur_ns": [r[1] for r in rows],
            "rank": [0] * len(rows),
            "device": [0] * len(rows),
            "name": ["toy_kernel"] * len(rows),
        }
    )
    meta = TraceMeta(source_format="toy", inputs=[InputInfo(str(path), "toy", 0)])
    return TraceSession.from_frames(frame, meta)


def test_a_new_format_is_one_line(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """A reader added to the list is detected and analysed end to end, nothing else touched."""
    toy = Reader("toy", lambda _, head: head.startswith(b"TOY!"), _toy_load, None)  # type: ignore[arg-type]
    monkeypatch.setattr(readers, "READERS", [toy, *READERS])
    path = tmp_path / "run.toy"
    path.write_text("TOY!\n0 1000\n3000 1000\n")
    assert load_path(path).events.height == 2
    code, out, err = run_cli(["analyze", "--json", "--no-cache", str(path)], capsys)
    assert code == 0, err
    assert json.loads(out)["devices"][0]["busy_ns"] == 2000
