"""A saved session's table files carry their size and CRC-32 in ``meta.json``
(``model.integrity``): a file changed since it was saved is never read as the saved one. The
Parquet pages polars writes carry no checksum it checks: bytes changed in the middle of a table
decoded into other values, and a cached re-run reported another analysis (exit 0)."""

from __future__ import annotations

import io
import json
import zlib
from collections.abc import Callable
from pathlib import Path
from typing import Any

import polars as pl
import pytest

from tests.conftest import ROOT
from traceforensics.model import TraceMeta, TraceSession
from traceforensics.model.errors import CorruptTraceError
from traceforensics.model.integrity import check_file, file_record, sealed

EXAMPLE = ROOT / "examples" / "synthetic_training.pt.trace.json.gz"


def _session(n: int = 2000) -> TraceSession:
    frame = pl.DataFrame(
        {
            "event_id": list(range(n)),
            "kind": ["kernel"] * n,
            "start_ns": [10 * i for i in range(n)],
            "dur_ns": [7] * n,
            "rank": [0] * n,
            "device": [0] * n,
            "name": [f"k{i % 13}" for i in range(n)],
        }
    )
    return TraceSession.from_frames(frame, TraceMeta(source_format="test"))


def _flip(path: Path, at: float = 0.5, count: int = 64) -> None:
    """``count`` bytes of ``path`` changed from the fraction ``at`` on; its size kept."""
    data = bytearray(path.read_bytes())
    start = int(len(data) * at)
    for i in range(start, min(start + count, len(data) - 8)):
        data[i] ^= 0x5A
    path.write_bytes(bytes(data))


def _flip_silently(path: Path) -> None:
    """Change bytes of the Parquet file ``path`` (its size kept) where polars still reads it,
    into another table: the damage a reader without a checksum serves as the saved table."""
    data = path.read_bytes()
    saved = pl.read_parquet(io.BytesIO(data))
    for k in range(1, 40):
        changed = bytearray(data)
        start = int(len(data) * k / 40)
        for i in range(start, start + 8):
            changed[i] ^= 0x5A
        try:
            read = pl.read_parquet(io.BytesIO(bytes(changed)))
        except BaseException:  # (polars' panic is no ``Exception``)
            continue
        if not read.equals(saved):
            path.write_bytes(bytes(changed))
            return
    raise AssertionError(f"{path}: no change polars reads silently: nothing would be tested")


def test_the_record_is_the_files_size_and_crc32(tmp_path: Path) -> None:
    out = _session().save(tmp_path / "s")
    files = json.loads((out / "meta.json").read_text())["files"]
    assert set(files) == {"events.parquet", "args.parquet"}
    for name, record in files.items():
        data = (out / name).read_bytes()  # computed here independently, in one piece
        assert record == {"bytes": len(data), "crc32": f"{zlib.crc32(data):08x}"}
        assert file_record(out / name) == record


def test_a_changed_table_is_refused_with_one_line(tmp_path: Path) -> None:
    out = _session().save(tmp_path / "s")
    assert TraceSession.load(out).events.height == 2000
    _flip(out / "events.parquet")
    with pytest.raises(CorruptTraceError) as err:
        TraceSession.load(out)
    message = str(err.value)
    assert "\n" not in message and str(out / "events.parquet") in message
    assert "load the trace again and save it" in message


@pytest.mark.parametrize("change", ["flip", "append", "cut"])
def test_check_file_sees_any_change(tmp_path: Path, change: str) -> None:
    path = tmp_path / "f.bin"
    path.write_bytes(bytes(range(256)) * 40_000)  # over two read blocks
    record = file_record(path)
    check_file(path, record)  # unchanged: passes
    check_file(path, None)  # no record: nothing to check
    if change == "flip":
        _flip(path, at=0.99, count=1)
    elif change == "append":
        path.write_bytes(path.read_bytes() + b"\0")
    else:
        path.write_bytes(path.read_bytes()[:-1])
    with pytest.raises(CorruptTraceError):
        check_file(path, record)


def test_a_session_saved_without_records_still_loads(tmp_path: Path) -> None:
    """Sessions saved before the checks existed (no ``files``, no ``sha256``) are read
    unchecked, except by a reader that requires them (the session cache)."""
    out = _session().save(tmp_path / "s")
    sidecar = json.loads((out / "meta.json").read_text())
    del sidecar["files"], sidecar["sha256"]
    (out / "meta.json").write_text(json.dumps(sidecar))
    assert TraceSession.load(out).events.equals(_session().events)
    with pytest.raises(CorruptTraceError, match="does not match the checksum"):
        TraceSession.load(out, require_checks=True)


def _edit_sidecar(directory: Path, edit: Callable[[dict[str, Any]], None]) -> None:
    path = directory / "meta.json"
    sidecar = json.loads(path.read_text())
    edit(sidecar)
    path.write_text(json.dumps(sidecar, indent=1))


@pytest.mark.parametrize(
    ("edit", "says"),
    [
        # the metadata the analysis reads (a clock base, here) is covered by the digest
        (lambda c: c["meta"].update(clock_base_ns=123), "does not match the checksum"),
        # a record changed, or its key: the checks are not turned off
        (lambda c: c["files"]["events.parquet"].update(crc32="00000000"), "does not match"),
        (lambda c: c.update(filez=c.pop("files")), "does not match the checksum"),
        # damaged consistently (the digest made anew): records that are no records
        (lambda c: c.update(sealed({**c, "files": 7})), "no records of the table files"),
        (lambda c: c.update(sealed({**c, "files": {}})), "no record of events.parquet"),
    ],
)
def test_a_changed_meta_json_is_refused(
    tmp_path: Path, edit: Callable[[dict[str, Any]], None], says: str
) -> None:
    out = _session().save(tmp_path / "s")
    _edit_sidecar(out, edit)
    with pytest.raises(CorruptTraceError, match=says):
        TraceSession.load(out)


def test_a_swapped_valid_table_is_refused(tmp_path: Path) -> None:
    """A table file swapped for another valid one (polars reads it without an error) is
    refused by its record."""
    out = _session().save(tmp_path / "s")
    moved = TraceSession.from_frames(
        _session().events.with_columns(pl.col("start_ns") + 1), TraceMeta(source_format="test")
    )
    moved.events.write_parquet(out / "events.parquet")
    with pytest.raises(CorruptTraceError):
        TraceSession.load(out)


@pytest.mark.parametrize("required", [False, True])
def test_a_meta_json_that_is_no_object_is_one_line(tmp_path: Path, required: bool) -> None:
    out = _session().save(tmp_path / "s")
    (out / "meta.json").write_text("[1, 2]")
    with pytest.raises(CorruptTraceError, match=r"meta\.json: not a JSON object"):
        TraceSession.load(out, require_checks=required)


def test_a_missing_table_file_is_one_line(tmp_path: Path) -> None:
    out = _session().save(tmp_path / "s")
    (out / "args.parquet").unlink()
    with pytest.raises(CorruptTraceError, match=r"args\.parquet: cannot be read"):
        TraceSession.load(out)
