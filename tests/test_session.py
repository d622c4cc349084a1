"""TraceSession: schema conformance, validate() rules, save/load round trip, pandas view."""

from __future__ import annotations

import json
from pathlib import Path

import polars as pl
import pytest

from traceforensics.model import SchemaError, TraceMeta, TraceSession
from traceforensics.model.errors import CorruptTraceError
from traceforensics.model.schema import EVENT_SCHEMA
from traceforensics.model.session import DeviceInfo, InputInfo


def _frame(**over: list[object]) -> pl.DataFrame:
    data: dict[str, list[object]] = {
        "event_id": [0, 1, 2],
        "kind": ["cpu_op", "cuda_api", "kernel"],
        "start_ns": [
            1_700_000_000_000_000_000,
            1_700_000_000_000_000_010,
            1_700_000_000_000_000_500,
        ],
        "dur_ns": [1000, 20, 300],
        "rank": [0, 0, 0],
        "device": [None, None, 0],
        "stream": [None, None, 7],
        "pid": [10, 10, 0],
        "tid": [11, 11, None],
        "name": ["aten::mm", "cudaLaunchKernel", "gemm"],
        "correlation": [None, 5, 5],
    }
    data.update(over)
    return pl.DataFrame(data)


def _meta() -> TraceMeta:
    return TraceMeta(
        source_format="test",
        inputs=[InputInfo(path="x.json", format="kineto", rank=0)],
        devices=[DeviceInfo(rank=0, device=0, name="NVIDIA H100 80GB HBM3", sm_count=132)],
        clock_base_ns=0,
    )


def test_from_frames_conforms_to_schema() -> None:
    s = TraceSession.from_frames(_frame(), _meta())
    assert dict(s.events.schema) == EVENT_SCHEMA
    assert s.events.get_column("is_comm").to_list() == [False, False, False]


def test_validate_rejects_negative_duration() -> None:
    with pytest.raises(SchemaError, match="dur_ns < 0"):
        TraceSession.from_frames(_frame(dur_ns=[1, -1, 3]), _meta())


def test_validate_rejects_gpu_rows_without_device() -> None:
    with pytest.raises(SchemaError, match="no device"):
        TraceSession.from_frames(_frame(device=[None, None, None]), _meta())


@pytest.mark.parametrize(
    "ids", [[0, 0, 1], [2, 1, 2], [5, 3, 4], [0, 1, 2], [7, -1, 3], [-3, -2, -1], [1, 1, 1]]
)
def test_validate_takes_distinct_ids_in_any_order(ids: list[int]) -> None:
    # strictly increasing ids pass without a hash set; any other order is counted
    if len(set(ids)) == len(ids):
        TraceSession.from_frames(_frame(event_id=ids), _meta())
    else:
        with pytest.raises(SchemaError, match="not unique"):
            TraceSession.from_frames(_frame(event_id=ids), _meta())


def test_validate_rejects_duplicate_ids_and_null_keys() -> None:
    with pytest.raises(SchemaError, match="not unique"):
        TraceSession.from_frames(_frame(event_id=[0, 0, 1]), _meta())
    with pytest.raises(SchemaError, match="null"):
        TraceSession.from_frames(_frame(name=["a", None, "c"]), _meta())


def test_validate_checks_frames_it_passed_once_and_replaced_frames_again(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # the loaders validate and ``load_path`` again: the same frames are checked once; a
    # table set afterwards (even one with a bad row) is checked anew
    s = TraceSession.from_frames(_frame(), _meta())
    selects: list[int] = []
    real = pl.DataFrame.select

    def counted(self: pl.DataFrame, *a: object, **k: object) -> pl.DataFrame:
        selects.append(self.height)
        return real(self, *a, **k)  # type: ignore[arg-type]

    monkeypatch.setattr(pl.DataFrame, "select", counted)
    s.validate()
    assert selects == []
    s.events = s.events.with_columns(pl.Series("dur_ns", [1, -1, 3]))
    with pytest.raises(SchemaError, match="dur_ns < 0"):
        s.validate()
    assert selects == [3]


def test_save_load_round_trip_is_exact(tmp_path: Path) -> None:
    args = pl.DataFrame({"event_id": [0], "key": ["Input Dims"], "value": ["[[2, 3]]"]})
    s = TraceSession.from_frames(_frame(), _meta(), args)
    s.save(tmp_path / "sess")
    back = TraceSession.load(tmp_path / "sess")
    assert back.events.equals(s.events)
    assert back.args.equals(s.args)
    assert back.meta == s.meta


def test_to_pandas_has_end_ns() -> None:
    df = TraceSession.from_frames(_frame(), _meta()).to_pandas()
    assert list(df["end_ns"]) == [
        1_700_000_000_000_001_000,
        1_700_000_000_000_000_030,
        1_700_000_000_000_000_800,
    ]


def test_a_saved_session_loads_back_and_its_part_holds_only_what_it_keeps(
    tmp_path: Path,
) -> None:
    """``load``: the same tables as saved; a damaged table is refused by its record, or by
    polars for a session saved before the checks existed; ``only`` keeps its columns (another
    is a ``SchemaError``); a pickle carries the tables."""
    import pickle

    s = TraceSession.from_frames(_frame(), _meta())
    s.save(tmp_path / "sess")
    back = TraceSession.load(tmp_path / "sess")
    assert back.events.equals(s.events) and back.args.equals(s.args)
    assert back.meta.inputs == s.meta.inputs
    part = back.only(["event_id", "kind", "start_ns"], ["x"])
    assert part.events.columns == ["event_id", "kind", "start_ns"]
    assert part.event_columns(["start_ns", "kind"]).equals(s.events.select("start_ns", "kind"))
    with pytest.raises(SchemaError):
        part.event_columns(["name"])
    again = pickle.loads(pickle.dumps(back))
    assert again.events.equals(s.events) and again.args.equals(s.args)
    (tmp_path / "sess" / "events.parquet").write_bytes(b"damaged")
    with pytest.raises(CorruptTraceError, match=r"events\.parquet: its bytes do not match"):
        TraceSession.load(tmp_path / "sess")
    sidecar = json.loads((tmp_path / "sess" / "meta.json").read_text())
    del sidecar["files"], sidecar["sha256"]
    (tmp_path / "sess" / "meta.json").write_text(json.dumps(sidecar))
    with pytest.raises(pl.exceptions.PolarsError):
        TraceSession.load(tmp_path / "sess")
