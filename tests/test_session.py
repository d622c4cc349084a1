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


def test_a_deferred_load_reads_its_tables_once_when_first_needed(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """``load(defer=True)``: the metadata now, the tables on the first read of ``events`` or
    ``args`` (once), the same tables as a plain load; ``only`` of a deferred session stays
    deferred; a pickle carries the tables; a table that does not read or validate gives the
    fallback's."""
    import pickle

    s = TraceSession.from_frames(_frame(), _meta())
    s.save(tmp_path / "sess")
    reads: list[str] = []
    real = pl.read_parquet

    def counted(path: Path, *a: object, **k: object) -> pl.DataFrame:
        reads.append(Path(path).name)
        return real(path, *a, **k)  # type: ignore[arg-type]

    with monkeypatch.context() as m:
        m.setattr(pl, "read_parquet", counted)
        back = TraceSession.load(tmp_path / "sess", defer=True)
        part = back.only(["event_id", "kind", "start_ns"], ["x"])
        assert back.is_deferred and part.is_deferred and reads == []
        assert back.meta.inputs == s.meta.inputs
        # some columns alone: read without the tables, still deferred; a column the part
        # does not keep is refused
        assert part.event_columns(["start_ns", "kind"]).equals(s.events.select("start_ns", "kind"))
        assert reads == ["events.parquet"] and back.is_deferred and part.is_deferred
        with pytest.raises(SchemaError):
            part.event_columns(["name"])
        reads.clear()
        assert part.events.columns == ["event_id", "kind", "start_ns"]
        assert not back.is_deferred and reads == ["events.parquet", "args.parquet"]
        assert back.events.equals(s.events) and back.args.equals(s.args)
        assert reads == ["events.parquet", "args.parquet"]  # read once
    again = pickle.loads(pickle.dumps(TraceSession.load(tmp_path / "sess", defer=True)))
    assert again.events.equals(s.events) and not again.is_deferred
    (tmp_path / "sess" / "events.parquet").write_bytes(b"damaged")
    other = TraceSession.from_frames(_frame(name=["a", "b", "c"]), _meta())
    damaged = TraceSession.load(
        tmp_path / "sess", defer=True, fallback=lambda: (other.events, other.args)
    )
    assert damaged.event_columns(["name"]).equals(other.events.select("name"))
    assert damaged.events.equals(other.events)
    # no fallback: the error of the read, here the file's check against its record
    with pytest.raises(CorruptTraceError, match=r"events\.parquet: its bytes do not match"):
        _ = TraceSession.load(tmp_path / "sess", defer=True).events
    # a session saved before the checks existed (no ``files``, no ``sha256``) gets polars' own
    sidecar = json.loads((tmp_path / "sess" / "meta.json").read_text())
    del sidecar["files"], sidecar["sha256"]
    (tmp_path / "sess" / "meta.json").write_text(json.dumps(sidecar))
    with pytest.raises(pl.exceptions.PolarsError):
        _ = TraceSession.load(tmp_path / "sess", defer=True).events


def test_a_deferred_session_reads_once_across_threads_and_lets_its_parent_go(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Threads reading a deferred session at once read its tables once; a part (``only``)
    that has read its tables no longer holds the session it was cut from; a polars panic on
    a damaged file (not an ``Exception``) still gives the fallback's tables; a column a
    session does not hold is a ``SchemaError`` whether its tables were read or not."""
    import gc
    import threading
    import time
    import weakref

    s = TraceSession.from_frames(_frame(), _meta())
    s.save(tmp_path / "sess")
    calls: list[int] = []

    def slow() -> tuple[pl.DataFrame, pl.DataFrame]:
        calls.append(1)
        time.sleep(0.05)
        return s.events, s.args

    shared = TraceSession.deferred(_meta(), slow)
    seen: list[int] = []
    threads = [threading.Thread(target=lambda: seen.append(shared.events.height)) for _ in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert calls == [1] and seen == [3] * 8

    back = TraceSession.load(tmp_path / "sess", defer=True)
    part = back.only(["event_id", "kind", "start_ns"], [])
    parent = weakref.ref(back)
    del back
    assert part.events.height == 3
    gc.collect()
    assert parent() is None, "the part still holds the whole session"
    for session in (part, TraceSession.load(tmp_path / "sess", defer=True).only(["kind"], [])):
        with pytest.raises(SchemaError):
            session.event_columns(["name"])

    def panics(*_: object, **__: object) -> None:
        raise pl.exceptions.PanicException("a corrupt page")

    other = TraceSession.from_frames(_frame(name=["a", "b", "c"]), _meta())
    with monkeypatch.context() as m:
        m.setattr(pl, "read_parquet", panics)
        damaged = TraceSession.load(
            tmp_path / "sess", defer=True, fallback=lambda: (other.events, other.args)
        )
        assert damaged.event_columns(["name"]).equals(other.events.select("name"))
