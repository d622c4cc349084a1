"""The notebook façade: ``traceforensics.analyze``, ``Analysis.to_json``/``frames``/``repr`` and
``traceforensics.load_monitor_log`` (issue 9)."""

from __future__ import annotations

import json
from pathlib import Path

import polars as pl
import pytest

import traceforensics
from tests.conftest import FIXTURES, nonempty, plain_union, run_cli, shared_trace
from traceforensics.analysis import AnalysisOptions
from traceforensics.analysis.idle.causes import CAUSES
from traceforensics.model.errors import InputError, OptionError

EXAMPLE = Path(__file__).resolve().parents[1] / "examples/synthetic_training.pt.trace.json.gz"


def test_analyze_path_or_session_with_flat_options() -> None:
    by_path = traceforensics.analyze(EXAMPLE, window="trace", top_gaps=3)
    session = traceforensics.load(EXAMPLE)
    by_session = traceforensics.analyze(session, window="trace", top_gaps=3)
    assert by_path.to_json()["devices"] == by_session.to_json()["devices"]
    assert by_path.options == AnalysisOptions.of(window="trace", top_gaps=3)
    assert len(by_path.idle.gaps) == 3
    assert by_path.devices[0].window_kind == "trace"


def test_to_json_equals_the_cli_json(capsys: pytest.CaptureFixture[str]) -> None:
    result = traceforensics.analyze(EXAMPLE, step_window="annotation")
    code, out, err = run_cli(
        ["analyze", str(EXAMPLE), "--json", "--no-cache", "--step-window", "annotation"], capsys
    )
    assert code == 0, err
    cli = json.loads(out)
    lib = json.loads(json.dumps(result.to_json()))  # plain JSON types only
    cli["inputs"][0].pop("path")
    lib["inputs"][0].pop("path")
    assert lib == cli


def test_frames_are_polars_tables_that_agree_with_the_records() -> None:
    result = traceforensics.analyze(EXAMPLE)
    frames = result.frames()
    assert set(frames) == {
        "findings", "transfers", "devices", "gaps", "gap_causes", "steps", "short_kernels", "ops",
        "ranks",
    }  # fmt: skip
    fnd = frames["findings"]
    assert fnd.height == len(result.findings) > 0
    assert fnd["recoverable_ns"].to_list() == [f.recoverable_ns for f in result.findings]
    moved = frames["transfers"]
    assert moved["bytes"].sum() == sum(t.bytes for d in result.devices for t in d.transfers)
    for name, frame in frames.items():
        assert isinstance(frame, pl.DataFrame), name
        assert frame.to_pandas().shape == frame.shape, name
    dev = frames["devices"].row(0, named=True)
    rec = result.devices[0]
    assert (dev["window_ns"], dev["busy_ns"], dev["idle_ns"]) == (
        rec.window_ns,
        rec.busy_ns,
        rec.idle_ns,
    )
    # the cause columns sum to idle, like the record
    assert sum(dev[f"idle_{c}_ns"] for c in CAUSES) == rec.idle_ns
    gaps, parts = frames["gaps"], frames["gap_causes"]
    assert gaps.height == len(result.idle.gaps) > 0
    per_gap = parts.group_by("gap").agg(pl.col("ns").sum()).sort("gap")
    assert per_gap.get_column("ns").to_list() == gaps.sort("gap").get_column("dur_ns").to_list()
    assert frames["steps"].height == len(result.idle.steps) > 0
    assert frames["short_kernels"].height == len(result.kernels.short_kernels)
    assert frames["ops"].height == len(result.kernels.ops)
    # one row per device; wait + transfer = collective time on each
    assert result.ranks is not None
    ranks = frames["ranks"]
    assert ranks.height == len(result.devices)
    assert (ranks["comm_wait_ns"] + ranks["comm_transfer_ns"] == ranks["comm_ns"]).all()


def test_busy_by_kind_is_each_kinds_own_union() -> None:
    result = traceforensics.analyze(EXAMPLE)
    ev = result.session.events
    rec = result.devices[0]
    for kind in ("kernel", "memcpy", "memset"):
        spans = [
            (s, s + d)
            for s, d, comm in ev.filter(pl.col("kind") == kind)
            .select("start_ns", "dur_ns", "is_comm")
            .iter_rows()
            if not comm
        ]
        want = sum(e - s for s, e in plain_union(spans))
        assert rec.busy_by_kind[kind] == want, kind
    assert rec.busy_by_kind["communication"] == 0
    assert max(rec.busy_by_kind.values()) <= rec.busy_ns <= sum(rec.busy_by_kind.values())


def test_empty_frames_keep_their_columns() -> None:
    """No gap kept: the gap tables are empty but keep their schema."""
    frames = traceforensics.analyze(EXAMPLE, top_gaps=0).frames()
    assert frames["gaps"].height == 0
    assert "dur_ns" in frames["gaps"].columns and "cause" in frames["gap_causes"].columns


def test_repr_is_short_and_says_the_answer() -> None:
    result = traceforensics.analyze(EXAMPLE)
    text = repr(result)
    assert len(text) < 300 and "\n" not in text
    assert "data_loading" in text and "1 device" in text
    assert "AnalysisContext(" in repr(traceforensics.analysis.prepare(result.session))


def test_load_monitor_log_with_utc_offset() -> None:
    path = FIXTURES / "monitor" / "runbook_zh_1hz.txt"
    utc = traceforensics.load_monitor_log(path)
    shanghai = traceforensics.load_monitor_log(path, utc_offset="+08:00")
    first_utc = utc.frame.get_column("time_ns")[0]
    assert first_utc - shanghai.frame.get_column("time_ns")[0] == 8 * 3600 * 10**9


def test_library_errors_name_options_not_flags() -> None:
    for kwargs in ({"bin_ms": 0}, {"top_gaps": -1}, {"window": "all"}, {"step_pattern": "("}):
        with pytest.raises(OptionError) as err:
            traceforensics.analyze(EXAMPLE, **kwargs)
        assert "--" not in str(err.value) and err.value.option in str(err.value)
    with pytest.raises(OptionError) as err:
        traceforensics.analyze(EXAMPLE, bin_ms=1e-9)  # too many bins: found while analysing
    assert "--" not in str(err.value) and err.value.option == "bin_ms"
    with pytest.raises(OptionError) as err:
        traceforensics.load_monitor_log(FIXTURES / "monitor" / "runbook_zh_1hz.txt", utc_offset="x")
    assert "--" not in str(err.value) and err.value.option == "utc_offset"
    with pytest.raises(InputError, match="unknown analysis option"):
        traceforensics.analyze(EXAMPLE, windw="trace")


def test_options_a_user_would_get_wrong() -> None:
    """One word for data_patterns is one pattern (not its letters); regexes polars cannot run,
    and booleans for counts, are refused up front; a context only serves its own options."""
    one = traceforensics.analyze(EXAMPLE, data_patterns="loader")
    assert one.options.idle.data_patterns == ("loader",)
    assert (
        one.to_json()["devices"]
        == traceforensics.analyze(EXAMPLE, data_patterns=["loader"]).to_json()["devices"]
    )
    for kwargs in ({"step_pattern": "(?<=a)b"}, {"step_pattern": r"(\w)\1"}, {"top": True}):
        with pytest.raises(OptionError) as err:
            traceforensics.analyze(EXAMPLE, **kwargs)
        assert "--" not in str(err.value)
    ctx = traceforensics.analysis.prepare(traceforensics.load(EXAMPLE))
    assert traceforensics.analysis.analyze_idle(ctx, AnalysisOptions()).devices
    with pytest.raises(OptionError, match="other options"):
        traceforensics.analysis.analyze_idle(ctx, AnalysisOptions.of(window="trace"))


def test_communication_busy_is_the_union_of_collectives() -> None:
    path = shared_trace("hta/ddp_nccl_a100_rank0.json.gz")
    result = traceforensics.analyze(path)
    ev = result.session.events
    for rec in nonempty(result.devices):
        spans = [
            (s, s + d)
            for s, d in ev.filter(
                pl.col("is_comm")
                & pl.col("kind").is_in(["kernel", "memcpy", "memset"])
                & (pl.col("device") == rec.device)
            )
            .select("start_ns", "dur_ns")
            .iter_rows()
        ]
        want = sum(e - s for s, e in plain_union(spans))
        assert want > 0 and rec.busy_by_kind["communication"] == want
        assert rec.comm_ns <= want  # comm_ns is the same union clipped to the window
