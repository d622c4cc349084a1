"""Multi-rank analysis (``analysis.ranks``) on generated jobs with a known straggler and known
collective waits (``tools/synth_ranks.py``): both formats, 2/4/16 ranks, three causes. The
straggler and its cause are named, every rank's collective wait is within 10% of the truth, and
the waiting ranks' first finding points at the straggler."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

import synth_ranks
from tests.conftest import ROOT, run_cli
from traceforensics.analysis.pipeline import analyze
from traceforensics.analysis.ranks import analyze_ranks
from traceforensics.ingest import load_path

CAUSES = {"data_loading": "data_loading", "host_sync": "host_sync", "slow_gpu": "slow_gpu"}
CASES = [(f, n, c) for f in ("kineto", "nsys") for n in (2, 4, 16) for c in CAUSES]
STRAGGLER = {2: 1, 4: 2, 16: 11}


def _job(root: Path, fmt: str, ranks: int, cause: str | None, **kw: object) -> tuple[Path, dict]:
    out = root / f"{fmt}-{ranks}-{cause}"
    synth_ranks.generate_job(
        out,
        ranks=ranks,
        steps=3,
        fmt=fmt,
        straggler_rank=STRAGGLER[ranks],
        cause=cause,
        **kw,  # type: ignore[arg-type]
    )
    return out, json.loads((out / "truth.json").read_text())


def _close(got: int, want: int) -> bool:
    return abs(got - want) <= 0.1 * want if want else got == 0


@pytest.mark.parametrize(
    ("fmt", "ranks", "cause"), CASES, ids=[f"{f}-{n}-{c}" for f, n, c in CASES]
)
def test_straggler_cause_and_waits(tmp_path: Path, fmt: str, ranks: int, cause: str) -> None:
    folder, truth = _job(tmp_path, fmt, ranks, cause)
    result = analyze(load_path(folder))
    got = result.ranks
    assert got is not None
    assert got.matched_collectives == truth["ranks"][0]["comm_count"]
    assert got.straggler is not None
    assert (got.straggler.rank, got.straggler.cause) == (STRAGGLER[ranks], CAUSES[cause])
    rows = {r.rank: r for r in got.per_rank}
    assert sorted(rows) == list(range(ranks))
    for r, t in enumerate(truth["ranks"]):
        assert _close(rows[r].comm_wait_ns, t["comm_wait_ns"]), (r, rows[r], t)
        assert _close(rows[r].comm_transfer_ns, t["comm_transfer_ns"]), (r, rows[r], t)
        assert rows[r].comm_ns == t["comm_ns"]
        assert not rows[r].comm_estimated
        expected = None if r == STRAGGLER[ranks] else STRAGGLER[ranks]
        assert rows[r].waiting_for == expected
    # the slowest rank of each step is the truth's
    slowest = {s.step: s.slowest_rank for s in got.steps}
    assert sorted(slowest.values()) == sorted(s["slowest_rank"] for s in truth["steps"])
    # every waiting rank's first finding points at the straggler, not at its own small idle
    for r in range(ranks):
        if r == STRAGGLER[ranks]:
            continue
        first = result.findings_of(r, rows[r].device)[0]
        assert first.category == "straggler_wait"
        assert f"rank {STRAGGLER[ranks]}" in first.title and CAUSES[cause] in first.title


def test_no_straggler_when_ranks_arrive_together(tmp_path: Path) -> None:
    folder, truth = _job(tmp_path, "nsys", 4, None)
    got = analyze_ranks(load_path(folder))
    assert got.straggler is None
    assert all(r.waiting_for is None for r in got.per_rank)
    for r, t in enumerate(truth["ranks"]):
        assert abs(got.per_rank[r].comm_wait_ns - t["comm_wait_ns"]) <= max(
            0.1 * t["comm_wait_ns"], 50_000
        )


def test_clock_offsets_across_hosts_are_estimated(tmp_path: Path) -> None:
    """Kineto ranks on different hosts (clocks 3 ms and -5 ms apart): matched on collective
    ends, the offsets are found and the waits stay right."""
    offsets = [0, 3_000_000, -5_000_000, 1_000_000]
    folder, truth = _job(tmp_path, "kineto", 4, "data_loading", clock_offsets_ns=offsets)
    got = analyze_ranks(load_path(folder))
    found = [r.clock_offset_ns - got.per_rank[0].clock_offset_ns for r in got.per_rank]
    assert all(abs(f - o) < 50_000 for f, o in zip(found, offsets, strict=True)), found
    assert got.straggler is not None and got.straggler.rank == STRAGGLER[4]
    for r, t in enumerate(truth["ranks"]):
        assert _close(got.per_rank[r].comm_wait_ns, t["comm_wait_ns"])


def test_one_rank_split_is_an_estimate() -> None:
    trace = Path(__file__).parents[2] / "shared/traces/hta/ddp_nccl_a100_rank0.json.gz"
    if not trace.exists():
        pytest.skip("../shared/traces is not beside the checkout")
    got = analyze_ranks(load_path(trace))
    (row,) = got.per_rank
    assert row.comm_estimated and row.comm_ns > 0
    assert row.comm_wait_ns + row.comm_transfer_ns == row.comm_ns
    assert got.straggler is None and any("estimated" in n for n in got.notes)


def test_job128_pair_has_ranks_everywhere(capsys: pytest.CaptureFixture[str]) -> None:
    folder = Path(__file__).parents[2] / "shared/traces/hta/job128_sampled"
    if not folder.exists():
        pytest.skip("../shared/traces is not beside the checkout")
    code, out, err = run_cli(["analyze", str(folder), "--json"], capsys)
    assert code == 0, err
    doc = json.loads(out)
    ranks = doc["ranks"]
    assert ranks["world_size"] == 128 and [r["rank"] for r in ranks["per_rank"]] == [0, 1]
    for table in ("devices", "steps", "gaps", "findings", "short_kernels", "ops"):
        assert all("rank" in row for row in doc[table]), table
    code, text, _ = run_cli(["analyze", str(folder), "--sections", "ranks,steps"], capsys)
    assert code == 0
    assert "== Ranks ==" in text and "world size 128" in text
    steps = text.split("== Steps ==")[1].splitlines()
    assert steps[1].split()[:2] == ["rank", "GPU"]


def test_reports_carry_the_rank_table(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    folder, _ = _job(tmp_path, "nsys", 4, "data_loading")
    md, html = tmp_path / "r.md", tmp_path / "r.html"
    code, text, err = run_cli(["analyze", str(folder), "--markdown", str(md)], capsys)
    assert code == 0, err
    assert "== Ranks ==" in text and "Straggler: rank 2" in text
    doc = md.read_text()
    table = doc.split("## Ranks")[1].split("## Devices")[0]
    rows = [line for line in table.splitlines() if line[:3] in ("| 0", "| 1", "| 2", "| 3")]
    assert [r.split("|")[1].strip() for r in rows] == [f"{r}:{r}" for r in range(4)]
    assert "waits for rank 2" in rows[0] and "straggler" in rows[2]
    code, _, err = run_cli(["analyze", str(folder), "--report", str(html)], capsys)
    assert code == 0, err
    page = html.read_text()
    assert "<h2>Ranks</h2>" in page and "waits for rank 2" in page


def test_monitoring_log_says_whether_the_slow_gpu_throttled(tmp_path: Path) -> None:
    """The generated monitoring log's throttle scenario has GPU 0 thermally throttled and GPU 1
    not: a slow_gpu straggler on GPU 0 gets the episode as evidence, one on GPU 1 is told its
    GPU ran at full clocks."""
    import make_monitor_logs
    from traceforensics.analysis.monitoring.monitor import analyze_monitor
    from traceforensics.analysis.ranks.throttle import with_monitor
    from traceforensics.ingest.monitor import load_monitor_log

    manifest = make_monitor_logs.generate(tmp_path / "logs", seed=0, n=300)
    entry = next(e for e in manifest if e["scenario"] == "throttle" and e["format"] == "smi_csv")
    report = analyze_monitor(load_monitor_log(str(tmp_path / "logs" / entry["file"])))
    for straggler, expected in ((0, "throttled (thermal)"), (1, "was not throttled")):
        out = tmp_path / f"job{straggler}"
        synth_ranks.generate_job(
            out, ranks=2, steps=3, fmt="nsys", straggler_rank=straggler, cause="slow_gpu"
        )
        got = with_monitor(analyze_ranks(load_path(out)), report)
        assert got.straggler is not None and got.straggler.device == straggler
        assert expected in got.straggler.evidence[-1], got.straggler.evidence
    # no log, or a log without the GPU: evidence unchanged
    plain = analyze_ranks(load_path(tmp_path / "job0"))
    assert with_monitor(plain, None) is plain


def test_no_collective_kernels_take_the_general_split() -> None:
    # the shortcut for a trace without collectives gives what the general path gives: the
    # same rows (none), columns and dtypes, no match, the one-rank note
    import polars as pl

    from traceforensics.analysis.context import prepare
    from traceforensics.analysis.ranks import collectives as coll

    ctx = prepare(load_path(ROOT / "examples" / "synthetic_training.pt.trace.json.gz"))
    kern = coll.collective_kernels(ctx.work, ctx.session.args, ctx.device_table)
    assert kern.height == 0 and kern.schema["pg"] == pl.String
    # no query ran for it: its columns are those the query gives when it runs (one kernel
    # marked as a collective)
    first = ctx.work.get_column("kind").cast(pl.String).to_list().index("kernel")
    marked = ctx.work.with_columns(
        pl.Series("is_comm", [i == first for i in range(ctx.work.height)])
    )
    ran = coll.collective_kernels(marked, ctx.session.args, ctx.device_table)
    assert ran.height == 1 and ran.schema == kern.schema
    fast = coll.match_collectives(kern)
    # the general path, on the same frame with one row (of nulls) in it
    one = pl.concat([kern, kern.clear(1)]).with_columns(pl.lit("g").alias("group"))
    general = coll.match_collectives(one)
    assert fast.rows.schema == general.rows.schema
    assert fast.rows.height == 0 and fast.matched == 0 and fast.offsets_ns == {}
    assert fast.method == general.method == "estimate"
    assert fast.notes == [coll.ONE_RANK_NOTE] == general.notes
