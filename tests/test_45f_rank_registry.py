"""Issue 45, item 3: rank directories and the fan-out read the reader registry.

A made-up format added as one ``Reader`` row (its sniff, load, ``rank_of`` and
``clock_start``) is read as the ranks of one job from a directory, joint and fanned out to
worker processes, with no other module edited.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import polars as pl
import pytest

import traceforensics as tf
from traceforensics.ingest import readers
from traceforensics.ingest.ranksets import assign_ranks, directory_set
from traceforensics.ingest.readers import READERS, Reader, rank_sets, set_reader
from traceforensics.model import TraceMeta, TraceSession
from traceforensics.model.session import InputInfo
from traceforensics.report.json_out import dumps

MAGIC = b"TOYRANKS"


def _header(path: Path) -> list[int]:
    """``TOYRANKS <rank> <session start, wall ns>`` on the first line."""
    with path.open("rb") as fh:
        return [int(x) for x in fh.readline().split()[1:3]]


def _sniff(_: Path, head: bytes) -> bool:
    return head.startswith(MAGIC)


def _rank_of(path: Path) -> int | None:
    return _header(path)[0]


def _clock_start(path: Path) -> int | None:
    return _header(path)[1]


def _load(path: Path) -> TraceSession:
    """One kernel per line after the header, ``start_ns dur_ns`` since the session start."""
    lines = path.read_text().split("\n")
    rows = [tuple(map(int, line.split())) for line in lines[1:] if line]
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
    meta = TraceMeta(
        source_format="toy",
        inputs=[InputInfo(str(path), "toy", 0)],
        clock_base_ns=_header(path)[1],
    )
    return TraceSession.from_frames(frame, meta)


# the one line a new format adds (module-level functions: rows are pickled to workers)
TOY = Reader("toy", _sniff, _load, "toy", rank_of=_rank_of, clock_start=_clock_start)  # type: ignore[arg-type]


@pytest.fixture
def toy_job(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """Two toy ranks whose names say nothing (``a`` is rank 1, 4 us later on the wall clock),
    and a note the set leaves out."""
    monkeypatch.setattr(readers, "READERS", [*READERS, TOY])
    job = tmp_path / "job"
    job.mkdir()
    (job / "a.toy").write_text("TOYRANKS 1 1000004000\n0 1000\n3000 1000\n")
    (job / "b.toy").write_text("TOYRANKS 0 1000000000\n0 2000\n5000 1000\n")
    (job / "notes.txt").write_text("not a trace\n")
    return job


def _doc(path: Path, **options: Any) -> dict[str, Any]:
    return json.loads(dumps(tf.analyze(path, **options).to_json()))  # type: ignore[no-any-return]


def test_the_built_in_sets_come_from_the_registry() -> None:
    assert [r.rank_set for r in rank_sets()] == ["nsys", "kineto"]
    assert set_reader("nsys").clock_start is not None and set_reader("nsys").load_set is None
    assert set_reader("kineto").load_set is not None


def test_a_new_format_with_rank_of_makes_a_rank_set(toy_job: Path) -> None:
    name, files, notes = directory_set(toy_job)
    assert name == "toy" and [p.name for p in files] == ["a.toy", "b.toy"]
    assert len(notes) == 1 and "notes.txt" in notes[0]
    # the file's own rank wins over name order
    assert assign_ranks(files, TOY.rank_of) == ([1, 0], "file metadata", "")
    session = tf.load(toy_job)
    dist = session.meta.distributed
    assert dist["world_size"] == 2 and dist["rank_source"] == "file metadata"
    assert dist["clock_shift_ns"] == {"0": 0, "1": 4000}  # onto rank 0's earlier start
    rank1 = session.events.filter(pl.col("rank") == 1)["start_ns"].to_list()
    assert sorted(rank1) == [4000, 7000]


def test_a_new_format_is_analysed_apart_as_joint(toy_job: Path) -> None:
    joint = _doc(toy_job)
    assert {d["rank"] for d in joint["devices"]} == {0, 1}
    assert _doc(toy_job, jobs=1) == joint
    assert _doc(toy_job, jobs=2) == joint  # worker processes: the task carries the row


def test_colliding_ranks_of_a_new_format_fall_back_to_file_order(toy_job: Path) -> None:
    (toy_job / "a.toy").write_text("TOYRANKS 0 1000004000\n0 1000\n")
    ranks, source, warning = assign_ranks(sorted(toy_job.glob("*.toy")), TOY.rank_of)
    assert (ranks, source) == ([0, 1], "file order")
    assert "rank numbers [0, 0] of the files collide" in warning


def test_files_outside_the_set_are_named_in_one_note(tmp_path: Path) -> None:
    """A rank directory's stray files are named in the warning each set writes the same way
    (``detect.left_out_note``): the nsys set's wording and the generic one."""
    from traceforensics.ingest.detect import left_out_note
    from traceforensics.ingest.nsys.ranks import rank_files

    for name in ("rank0.sqlite", "rank1.sqlite"):
        (tmp_path / name).write_bytes(b"SQLite format 3\x00")
    (tmp_path / "notes.json.gz").write_bytes(b"x")
    files = sorted(tmp_path.iterdir())
    chosen, notes = rank_files(tmp_path, files)
    assert [p.name for p in chosen] == ["rank0.sqlite", "rank1.sqlite"]
    assert notes == [
        f"{tmp_path}: 1 file(s) that are not Nsight Systems exports were left out (notes.json.gz)"
    ]
    many = [tmp_path / f"f{i}" for i in range(7)]
    (note,) = left_out_note(tmp_path, many, "toy traces")
    assert note.endswith("not toy traces were left out (f0, f1, f2, f3, f4 ...)")
    assert left_out_note(tmp_path, [], "toy traces") == []
