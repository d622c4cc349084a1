"""Rank sets (``ingest.ranksets``): a directory of per-rank Nsight Systems exports loads as one
session with a rank column, on one clock; a directory of Kineto rank files leaves notes that are
not traces out. Checked against the generator's truth (``tools/synth_ranks.py``) and against an
independent reading of the files with ``sqlite3``.
"""

from __future__ import annotations

import json
import shutil
import sqlite3
from pathlib import Path

import polars as pl
import pytest

import synth_ranks
from tests.conftest import plain_union, run_cli
from traceforensics.ingest import load_path
from traceforensics.ingest.ranksets import assign_ranks, directory_set
from traceforensics.model.errors import InputError


def _job(tmp: Path, ranks: int, fmt: str = "nsys", cause: str = "data_loading") -> Path:
    out = tmp / f"{fmt}{ranks}"
    synth_ranks.generate_job(
        out, ranks=ranks, steps=3, fmt=fmt, straggler_rank=ranks - 1, cause=cause
    )
    return out


def _session_starts(folder: Path) -> dict[int, int]:
    """Each rank file's session start (wall ns), read with sqlite3 alone."""
    out = {}
    for rank in range(len(list(folder.glob("rank*.sqlite")))):
        with sqlite3.connect(folder / f"rank{rank}.sqlite") as conn:
            ((start,),) = conn.execute("SELECT utcEpochNs FROM TARGET_INFO_SESSION_START_TIME")
        out[rank] = int(start)
    return out


@pytest.mark.parametrize("ranks", [2, 4, 16])
def test_nsys_directory_is_one_session_on_one_clock(tmp_path: Path, ranks: int) -> None:
    folder = _job(tmp_path, ranks)
    truth = json.loads((folder / "truth.json").read_text())
    session = load_path(folder)
    assert session.ranks == list(range(ranks))
    assert [i.rank for i in session.meta.inputs] == list(range(ranks))
    assert [Path(i.path).name for i in session.meta.inputs] == [
        f"rank{r}.sqlite" for r in range(ranks)
    ]
    assert session.meta.distributed["rank_source"] == "file name"
    assert any("truth.json" in w for w in session.meta.warnings)
    # the shift of each rank is its session start minus the earliest, read independently
    starts = _session_starts(folder)
    shifts = {int(r): s for r, s in session.meta.distributed["clock_shift_ns"].items()}
    assert shifts == {r: starts[r] - min(starts.values()) for r in starts}
    assert len(set(shifts.values())) > 1  # the files' clocks differ: the check can fail
    kernels = session.events.filter(pl.col("kind") == "kernel")
    for r in range(ranks):
        mine = kernels.filter(pl.col("rank") == r)
        spans = list(zip(mine["start_ns"], (mine["start_ns"] + mine["dur_ns"]), strict=True))
        assert sum(e - s for s, e in plain_union(spans)) == truth["ranks"][r]["busy_ns"]
    # one clock: every rank's all-reduce kernel k ends at the same instant (the generator's
    # rule: all end at the last start + transfer)
    comm = kernels.filter(pl.col("is_comm")).sort("rank", "start_ns")
    ends = comm.with_columns(
        (pl.col("start_ns") + pl.col("dur_ns")).alias("end"),
        pl.int_range(pl.len()).over("rank").alias("k"),
    )
    spread = ends.group_by("k").agg((pl.col("end").max() - pl.col("end").min()).alias("d"))
    assert spread.height == truth["ranks"][0]["comm_count"]
    assert spread["d"].max() == 0


def test_nsys_directory_cli_json_has_every_rank(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    folder = _job(tmp_path, 4)
    truth = json.loads((folder / "truth.json").read_text())
    code, out, err = run_cli(["analyze", str(folder), "--json"], capsys)
    assert code == 0, err
    doc = json.loads(out)
    by_rank = {d["rank"]: d for d in doc["devices"]}
    assert sorted(by_rank) == [0, 1, 2, 3]
    for r, d in by_rank.items():
        assert d["busy_ns"] == truth["ranks"][r]["busy_ns"]


def test_report_beside_its_export_is_read_once(tmp_path: Path) -> None:
    folder = _job(tmp_path, 2)
    (folder / "truth.json").unlink()
    # an .nsys-rep beside its export is the same capture: not a third rank, not a warning
    (folder / "rank0.nsys-rep").write_bytes(b"not read")
    kind, files, notes = directory_set(folder)
    assert kind == "nsys"
    assert [p.name for p in files] == ["rank0.sqlite", "rank1.sqlite"]
    assert notes == []
    # a report without an export is one of the set (exported when read)
    shutil.copy(folder / "rank1.sqlite", folder / "rank2.sqlite")
    (folder / "rank3.nsys-rep").write_bytes(b"x")
    _, files, _ = directory_set(folder)
    assert [p.name for p in files] == [
        "rank0.sqlite",
        "rank1.sqlite",
        "rank2.sqlite",
        "rank3.nsys-rep",
    ]


def test_rank_numbers_from_names_or_order() -> None:
    names = [Path("node_7.sqlite"), Path("node_3.sqlite")]
    assert assign_ranks(names)[:2] == ([7, 3], "file name")
    clash = [Path("rank1_a.sqlite"), Path("rank1_b.sqlite")]
    ranks, source, warning = assign_ranks(clash)
    assert (ranks, source) == ([0, 1], "file order") and "collide" in warning
    assert assign_ranks([Path("report1.sqlite"), Path("x.sqlite")])[:2] == ([0, 1], "file order")
    # a lone file: only the explicit ``rank`` spelling counts
    assert assign_ranks([Path("host_12345.sqlite")])[0] == [0]
    assert assign_ranks([Path("rank5.sqlite")])[0] == [5]


def test_export_without_session_start_is_flagged(tmp_path: Path) -> None:
    folder = _job(tmp_path, 2)
    with sqlite3.connect(folder / "rank1.sqlite") as conn:
        conn.execute("DROP TABLE TARGET_INFO_SESSION_START_TIME")
    session = load_path(folder)
    assert session.meta.distributed["clock_shift_ns"]["1"] == 0
    assert any("no session start time" in w and "rank1.sqlite" in w for w in session.meta.warnings)


def test_kineto_directory_leaves_notes_out(tmp_path: Path) -> None:
    folder = _job(tmp_path, 2, fmt="kineto")
    session = load_path(folder)
    assert session.ranks == [0, 1]
    assert any("truth.json" in w and "not traces" in w for w in session.meta.warnings)
    # a damaged trace is still refused, not left out
    (folder / "rank1.pt.trace.json.gz").write_bytes(b"\x1f\x8b broken")
    with pytest.raises(InputError, match="rank1"):
        load_path(folder)


def test_directory_without_traces(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    (tmp_path / "notes.txt").write_text("hello")
    with pytest.raises(InputError, match="no trace files"):
        load_path(tmp_path)
    code, _, err = run_cli(["analyze", str(tmp_path)], capsys)
    assert code == 2 and len(err.strip().splitlines()) == 1
