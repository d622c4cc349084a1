"""``traceforensics.compare`` on small constructed analysis documents, where every answer is
known: per-step normalisation, the noise rule both ways, devices on one side only, zero before
values, sides without steps, findings and kernels that appear or disappear, bad documents."""

from __future__ import annotations

import json
import math
import statistics
from pathlib import Path
from typing import Any

import pytest

from tests.conftest import run_cli
from traceforensics.analysis.idle.causes import CAUSES
from traceforensics.compare import diff_documents
from traceforensics.compare.noise import compare_steps
from traceforensics.model.errors import InputError

MS = 1_000_000


def device(rank: int = 0, dev: int = 0, **kw: Any) -> dict[str, Any]:
    """A ``devices[]`` entry; ``kw`` overrides (``idle_by_cause`` is filled to every cause)."""
    causes = dict.fromkeys(CAUSES, 0) | kw.pop("idle_by_cause", {})
    idle = sum(causes.values())
    window = kw.pop("window_ns", 1000 * MS)
    d = {
        "rank": rank, "device": dev, "name": "GPU", "window_kind": "device",
        "window_start_ns": 0, "window_ns": window, "busy_ns": window - idle, "idle_ns": idle,
        "busy_by_kind": {"kernel": window - idle, "communication": 0, "memcpy": 0, "memset": 0},
        "idle_by_cause": causes, "comm_ns": 0, "exposed_comm_ns": 0, "copy_ns": 0,
        "exposed_copy_ns": 0, "mfu": None, "top_kernels": [],
    }  # fmt: skip
    return d | kw


def steps(rank: int, dev: int, durs: list[int], data: list[int]) -> list[dict[str, Any]]:
    """``steps[]`` rows: durations and data-loading idle per step (ns)."""
    out, t = [], 0
    for i, (dur, dl) in enumerate(zip(durs, data, strict=True)):
        causes = dict.fromkeys(CAUSES, 0) | {"data_loading": dl}
        out.append({
            "rank": rank, "device": dev, "name": f"ProfilerStep#{i}", "start_ns": t,
            "dur_ns": dur, "busy_ns": dur - dl, "idle_ns": dl, "idle_by_cause": causes,
            "exposed_comm_ns": 0, "comm_ns": 0,
        })  # fmt: skip
        t += dur
    return out


def doc(
    devices: list[dict[str, Any]], step_rows: list[dict[str, Any]], **kw: Any
) -> dict[str, Any]:
    base = {
        "schema": "traceforensics.analysis/1", "tool_version": "test", "inputs": [],
        "source_format": "kineto", "range": {"steps": None, "start_ns": None, "end_ns": None},
        "findings": [], "devices": devices, "steps": step_rows, "mfu": {"devices": [], "steps": []},
    }  # fmt: skip
    return base | kw


def one_device(durs: list[int], data: list[int], **kw: Any) -> dict[str, Any]:
    total = sum(data)
    dev = device(idle_by_cause={"data_loading": total}, window_ns=sum(durs), **kw)
    return doc([dev], steps(0, 0, durs, data))


def test_per_step_figures_are_the_mean_of_the_steps() -> None:
    """6 steps against 3: totals differ 2x, per-step figures are compared."""
    before = one_device([100 * MS] * 6, [40 * MS] * 6)
    after = one_device([70 * MS] * 3, [10 * MS] * 3)
    d = diff_documents(before, after)
    dl = d.job.figures["idle.data_loading"]
    assert (dl.before, dl.after, dl.unit, dl.basis) == (40 * MS, 10 * MS, "ns/step", "per_step")
    assert dl.delta_pct == pytest.approx(-75.0)
    assert d.job.figures["step_time"].after == 70 * MS
    assert d.verdict.outcome == "worked" and d.verdict.targeted == "data_loading"
    assert "the change worked" in d.verdict.text


def test_noise_marks_a_change_smaller_than_the_spread() -> None:
    """Same distribution shifted by 1 ms while steps vary by ±10 ms: within noise; shifted by
    30 ms: beyond. Checked against the rule computed here by hand."""
    base = [100, 110, 90, 105, 95, 100]
    small = [v + 1 for v in base]
    big = [v + 30 for v in base]
    for after, within in ((small, True), (big, False)):
        b = one_device([v * MS for v in base], [0] * 6)
        a = one_device([v * MS for v in after], [0] * 6)
        f = diff_documents(b, a).job.figures["step_time"]
        mad = statistics.median(abs(v - statistics.median(base)) for v in base) * MS
        se = 1.2533 * 1.4826 * mad / math.sqrt(6)
        band = 2 * math.hypot(se, se)  # both sides have the same spread
        shift = (statistics.median(after) - statistics.median(base)) * MS
        assert (abs(shift) <= band) is within
        assert f.within_noise is within
        assert f.noise is not None and f.noise.band == pytest.approx(band)


def test_a_warm_up_step_does_not_hide_a_real_change() -> None:
    """One short first step in BEFORE (a warm-up) overlaps AFTER; the median rule still sees
    the 25 % faster step."""
    noise = compare_steps([60, 100, 101, 99, 102, 100], [75, 76, 74, 75, 77, 75], 0.0)
    assert noise is not None and noise.within is False


def test_too_few_steps_make_the_noise_unknown() -> None:
    b = one_device([100 * MS, 101 * MS], [0, 0])
    a = one_device([90 * MS, 91 * MS], [0, 0])
    f = diff_documents(b, a).job.figures["step_time"]
    assert f.within_noise is None and f.noise is not None and f.noise.within is None


def test_zero_before_gives_null_delta_pct() -> None:
    b = one_device([100 * MS] * 4, [0] * 4)
    a = one_device([100 * MS] * 4, [5 * MS] * 4)
    out = diff_documents(b, a).to_json()
    dl = out["job"]["figures"]["idle.data_loading"]
    assert dl["before"] == 0 and dl["after"] == 5 * MS and dl["delta"] == 5 * MS
    assert dl["delta_pct"] is None
    assert out["job"]["figures"]["idle.io"]["delta_pct"] is None  # 0 -> 0
    json.dumps(out)  # plain JSON: no NaN or infinity


def test_device_only_on_one_side_is_named_and_counted_in_the_job() -> None:
    b = one_device([100 * MS] * 4, [10 * MS] * 4)
    a_dev = [device(0, 0, window_ns=400 * MS), device(1, 0, window_ns=400 * MS)]
    a = doc(a_dev, steps(0, 0, [100 * MS] * 4, [0] * 4) + steps(1, 0, [120 * MS] * 4, [0] * 4))
    d = diff_documents(b, a)
    assert d.unmatched == [{"rank": 1, "device": 0, "side": "after"}]
    assert [(x.rank, x.device) for x in d.devices] == [(0, 0)]
    assert any("rank 1 GPU 0 is only in AFTER" in w for w in d.warnings)
    # the job's step is its slowest device's step
    assert d.job.figures["step_time"].after == 120 * MS


def test_no_steps_on_a_side_compares_totals() -> None:
    b = doc([device(idle_by_cause={"host_sync": 300 * MS})], [])
    a = one_device([100 * MS] * 4, [10 * MS] * 4)
    d = diff_documents(b, a)
    f = d.job.figures["idle.host_sync"]
    assert d.job.basis == "total" and f.basis == "total" and f.unit == "ns"
    assert f.before == 300 * MS and f.within_noise is None
    assert d.job.figures["step_time"].before is None
    assert any("no steps" in w for w in d.warnings)
    # idle share 30% -> 10%: the share decides without steps
    assert d.verdict.outcome == "worked"


def test_findings_and_kernels_that_appear_and_disappear() -> None:
    k = {"count": 10, "mean_ns": 1, "share_of_busy": 0.1}
    b = one_device([100 * MS] * 4, [10 * MS] * 4)
    a = one_device([90 * MS] * 4, [0] * 4)
    b["devices"][0]["top_kernels"] = [{"name": "gemm", "total_ns": 80 * MS, **k},
                                      {"name": "old", "total_ns": 40 * MS, **k}]  # fmt: skip
    a["devices"][0]["top_kernels"] = [{"name": "gemm", "total_ns": 60 * MS, **k},
                                      {"name": "new", "total_ns": 50 * MS, **k}]  # fmt: skip
    f = {"rank": 0, "device": 0, "title": "t", "minor": False}
    b["findings"] = [{"category": "data_loading", "recoverable_ns": 40 * MS, **f}]
    a["findings"] = [{"category": "launch_overhead", "recoverable_ns": 8 * MS, **f}]
    d = diff_documents(b, a)
    changes = {c.category: c for c in d.findings}
    assert changes["data_loading"].change == "disappeared"
    assert changes["data_loading"].recoverable.before == 10 * MS  # 40 ms over 4 steps
    assert changes["launch_overhead"].change == "appeared"
    kernels = {c.name: c for c in d.kernels}
    assert kernels["gemm"].total.delta == -5 * MS  # per step: 20 -> 15 ms
    assert kernels["new"].total.before is None and kernels["old"].total.after is None
    assert d.verdict.largest_loss is not None
    assert d.verdict.largest_loss["category"] == "launch_overhead"
    frames = d.frames()
    assert frames["kernels"].height == 3 and frames["findings"].height == 2
    assert set(frames["figures"]["scope"]) == {"job", "device"}


def test_no_change_is_no_effect() -> None:
    b = one_device([100 * MS, 104 * MS, 98 * MS, 101 * MS], [10 * MS] * 4)
    d = diff_documents(b, b)
    assert d.verdict.outcome == "no_effect"
    assert "no measurable effect" in d.verdict.text


@pytest.mark.parametrize("bad", [{"schema": "traceforensics.monitor/1"}, [], {"schema": 1}])
def test_not_an_analysis_document(bad: Any) -> None:
    with pytest.raises(InputError, match=r"not a traceforensics\.analysis/1 document"):
        diff_documents(bad, one_device([MS], [0]), "old.json")


def test_saved_documents_diff_on_the_command_line(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    b, a = tmp_path / "b.json", tmp_path / "a.json"
    b.write_text(json.dumps(one_device([100 * MS] * 6, [40 * MS] * 6)))
    a.write_text(json.dumps(one_device([70 * MS] * 6, [10 * MS] * 6)))
    code, out, err = run_cli(["diff", str(b), str(a), "--json"], capsys)
    assert code == 0, err
    obj = json.loads(out)
    assert obj["schema"] == "traceforensics.diff/1"
    assert obj["verdict"]["outcome"] == "worked"
    # a diff document is not an analysis: one line, exit 2
    diff_doc = tmp_path / "diff.json"
    diff_doc.write_text(out)
    code, out, err = run_cli(["diff", str(diff_doc), str(a)], capsys)
    assert code == 2 and out == "" and len(err.strip().splitlines()) == 1
    assert "not traceforensics.analysis/1" in err
