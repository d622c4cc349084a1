"""The multi-rank job generator (tools/synth_ranks.py): every rank file loads, and an independent
re-reading of the written files (json/gzip and sqlite3 only, none of the project's or the
generator's code) recomputes each rank's collective waits, transfers, busy time and step times
and the slowest rank of each step exactly as ``truth.json`` states them.
"""

from __future__ import annotations

import gzip
import json
import sqlite3
import statistics
from dataclasses import dataclass, field
from decimal import Decimal
from pathlib import Path
from typing import Any

import pytest

import synth_ranks
from tests.conftest import nonempty, plain_union, run_cli
from traceforensics.ingest import load_path

FORMATS = ("kineto", "nsys")
CAUSES = ("data_loading", "host_sync", "slow_gpu")
RANK_COUNTS = (2, 4, 16)
STEPS = 3
STRAGGLER = {2: 1, 4: 2, 16: 11}
DATALOADER = "enumerate(DataLoader)#_SingleProcessDataLoaderIter.__next__"
CASES = [(f, n, c) for f in FORMATS for n in RANK_COUNTS for c in CAUSES]
CASE_IDS = [f"{f}-{n}-{c}" for f, n, c in CASES]


# ======================================================================= independent reading
@dataclass
class RankFile:
    """What one rank file says, in absolute ns of that rank's own clock."""

    rank: int
    nccl: list[tuple[int, int]]  # (start, end) of each NCCL kernel, in collective order
    seqs: list[int]  # collective sequence numbers (Kineto: record_param_comms Seq)
    kernels: list[tuple[int, int]]  # every kernel
    steps: list[tuple[int, int]]  # ProfilerStep ranges (start, end)
    loader_ns: list[int] = field(default_factory=list)  # dataloader range durations
    syncs: int = 0  # cudaStreamSynchronize calls
    compute_ns: int = 0  # sum of non-NCCL kernel durations


def _ns(value: Decimal | int) -> int:
    exact = Decimal(value) * 1000
    assert exact == exact.to_integral_value(), f"{value} us is not a whole ns"
    return int(exact)


def read_kineto(path: Path) -> RankFile:
    with gzip.open(path, "rt") as fh:
        doc = json.load(fh, parse_float=Decimal)
    base = doc["baseTimeNanoseconds"]
    xs = [e for e in doc["traceEvents"] if e.get("ph") == "X"]

    def span(e: dict[str, Any]) -> tuple[int, int]:
        start = base + _ns(e["ts"])
        return start, start + _ns(e["dur"])

    seq_of = {
        e["args"]["External id"]: e["args"]["Seq"] for e in xs if e["name"] == "record_param_comms"
    }
    kernels = [e for e in xs if e.get("cat") == "kernel"]
    nccl = sorted(
        (seq_of[e["args"]["External id"]], span(e)) for e in kernels if e["name"].startswith("nccl")
    )
    return RankFile(
        rank=doc["distributedInfo"]["rank"],
        nccl=[s for _, s in nccl],
        seqs=[q for q, _ in nccl],
        kernels=[span(e) for e in kernels],
        steps=[span(e) for e in xs if e["name"].startswith("ProfilerStep#")],
        loader_ns=[_ns(e["dur"]) for e in xs if e["name"] == DATALOADER],
        syncs=sum(e["name"] == "cudaStreamSynchronize" for e in xs),
        compute_ns=sum(_ns(e["dur"]) for e in kernels if not e["name"].startswith("nccl")),
    )


def read_nsys(path: Path) -> RankFile:
    con = sqlite3.connect(f"file:{path}?mode=ro", uri=True)
    try:
        (utc,) = con.execute("SELECT utcEpochNs FROM TARGET_INFO_SESSION_START_TIME").fetchone()
        kernels = con.execute(
            "SELECT k.start, k.end, s.value FROM CUPTI_ACTIVITY_KIND_KERNEL k"
            " JOIN StringIds s ON s.id = k.demangledName ORDER BY k.start"
        ).fetchall()
        ranges = con.execute("SELECT start, end, text FROM NVTX_EVENTS WHERE end IS NOT NULL")
        ranges = ranges.fetchall()
        syncs = con.execute(
            "SELECT COUNT(*) FROM CUPTI_ACTIVITY_KIND_RUNTIME r JOIN StringIds s ON s.id = r.nameId"
            " WHERE s.value LIKE 'cudaStreamSynchronize%'"
        ).fetchone()[0]
    finally:
        con.close()
    nccl = [(utc + s, utc + e) for s, e, n in kernels if n.startswith("nccl")]
    return RankFile(
        rank=int(path.name.removeprefix("rank").split(".")[0]),  # nsys records no rank
        nccl=nccl,
        seqs=list(range(1, len(nccl) + 1)),
        kernels=[(utc + s, utc + e) for s, e, _ in kernels],
        steps=[(utc + s, utc + e) for s, e, t in ranges if t.startswith("ProfilerStep#")],
        loader_ns=[e - s for s, e, t in ranges if t == DATALOADER],
        syncs=syncs,
        compute_ns=sum(e - s for s, e, n in kernels if not n.startswith("nccl")),
    )


def read_job(out: Path, fmt: str, ranks: int) -> list[RankFile]:
    if fmt == "kineto":
        files = [read_kineto(out / f"rank{r}.pt.trace.json.gz") for r in range(ranks)]
    else:
        files = [read_nsys(out / f"rank{r}.sqlite") for r in range(ranks)]
    assert [f.rank for f in files] == list(range(ranks))
    return files


def recompute(files: list[RankFile], base_ns: int, offsets: list[int]) -> dict[str, Any]:
    """Waits, transfers, busy and steps from the raw files, on the reference clock."""
    n_coll = len(files[0].nccl)
    assert n_coll > 0 and all(len(f.nccl) == n_coll for f in files)
    assert all(f.seqs == files[0].seqs for f in files), "collectives do not match across ranks"
    ref = [base_ns + o for o in offsets]
    starts = [[s - ref[r] for s, _ in f.nccl] for r, f in enumerate(files)]
    ends = [[e - ref[r] for _, e in f.nccl] for r, f in enumerate(files)]
    colls = []
    for c in range(n_coll):
        col_start = [starts[r][c] for r in range(len(files))]
        col_end = {ends[r][c] for r in range(len(files))}
        assert len(col_end) == 1, f"collective {c} ends at different times: {sorted(col_end)}"
        last = max(col_start)
        colls.append(
            {
                "start": col_start,
                "wait": [last - s for s in col_start],
                "transfer": col_end.pop() - last,
                "last_rank": col_start.index(last),
            }
        )
    per_rank = []
    for r, f in enumerate(files):
        busy = sum(e - s for s, e in plain_union(f.kernels))
        comm = sum(e - s for s, e in f.nccl)
        wait = sum(c["wait"][r] for c in colls)
        per_rank.append(
            {
                "comm_ns": comm,
                "comm_wait_ns": wait,
                "comm_transfer_ns": comm - wait,
                "busy_ns": busy,
                "step_ns": [e - s for s, e in f.steps],
                "step_start_ns": [s - ref[r] for s, _ in f.steps],
            }
        )
    return {"collectives": colls, "ranks": per_rank}


# ======================================================================= jobs
_JOBS: dict[tuple[Any, ...], tuple[Path, Any]] = {}


@pytest.fixture(scope="module")
def jobs(tmp_path_factory: pytest.TempPathFactory) -> Any:
    """``make(fmt, ranks, cause, seed=0, offsets=None)`` -> (folder, truth), built once."""

    def make(
        fmt: str, ranks: int, cause: str | None, seed: int = 0, offsets: tuple[int, ...] = ()
    ) -> tuple[Path, Any]:
        key = (fmt, ranks, cause, seed, offsets)
        if key not in _JOBS:
            out = tmp_path_factory.mktemp(f"{fmt}{ranks}{cause}")
            truth = synth_ranks.generate_job(
                out, ranks=ranks, steps=STEPS, fmt=fmt, straggler_rank=STRAGGLER[ranks],
                cause=cause, seed=seed, clock_offsets_ns=list(offsets) or None,
            )  # fmt: skip
            _JOBS[key] = (out, truth)
        return _JOBS[key]

    return make


def _check_against_truth(out: Path, fmt: str, ranks: int, offsets: list[int]) -> dict[str, Any]:
    truth = json.loads((out / "truth.json").read_text())
    assert truth["world_size"] == ranks and truth["clock_offsets_ns"] == offsets
    got = recompute(read_job(out, fmt, ranks), truth["clock_base_ns"], offsets)
    want_colls = [c for s in truth["steps"] for c in s["collectives"]]
    assert len(got["collectives"]) == len(want_colls) == STEPS * truth["spec"]["buckets"]
    for g, w in zip(got["collectives"], want_colls, strict=True):
        assert g["start"] == w["start_ns"]
        assert g["wait"] == w["wait_ns"]
        assert g["transfer"] == w["transfer_ns"]
        assert g["last_rank"] == w["last_rank"]
    for g, w in zip(got["ranks"], truth["ranks"], strict=True):
        for key in ("comm_ns", "comm_wait_ns", "comm_transfer_ns", "busy_ns"):
            assert g[key] == w[key], (w["rank"], key)
        assert g["step_ns"] == w["step_ns"] and g["step_start_ns"] == w["step_start_ns"]
        assert len(w["step_ns"]) == STEPS
    per_step = len(want_colls) // STEPS
    slowest = [got["collectives"][k * per_step]["last_rank"] for k in range(STEPS)]
    assert slowest == [s["slowest_rank"] for s in truth["steps"]]
    return truth


# ======================================================================= tests
@pytest.mark.parametrize(("fmt", "ranks", "cause"), CASES, ids=CASE_IDS)
def test_truth_matches_independent_reading(jobs: Any, fmt: str, ranks: int, cause: str) -> None:
    out, _ = jobs(fmt, ranks, cause)
    truth = _check_against_truth(out, fmt, ranks, [0] * ranks)
    straggler = STRAGGLER[ranks]
    assert truth["straggler"]["rank"] == straggler and truth["straggler"]["cause"] == cause
    extra = truth["straggler"]["extra_ns_per_step"]
    assert extra > 1_000_000  # well above the healthy ranks' jitter
    for step in truth["steps"]:
        assert step["slowest_rank"] == straggler
        first = step["collectives"][0]
        assert first["wait_ns"][straggler] == 0
        # every healthy rank waited for the straggler's delay, give or take their jitter
        assert min(w for r, w in enumerate(first["wait_ns"]) if r != straggler) > extra // 2


@pytest.mark.parametrize(("fmt", "ranks", "cause"), CASES, ids=CASE_IDS)
def test_straggler_shows_its_cause(jobs: Any, fmt: str, ranks: int, cause: str) -> None:
    """The cause is in the straggler's own file, and only there."""
    out, truth = jobs(fmt, ranks, cause)
    files = read_job(out, fmt, ranks)
    s = STRAGGLER[ranks]
    healthy = [f for f in files if f.rank != s]
    loader = statistics.median(x for f in healthy for x in f.loader_ns)
    compute = statistics.median(f.compute_ns for f in healthy)
    if cause == "data_loading":
        assert min(files[s].loader_ns) > loader + 25_000_000
        assert truth.straggler["extra_ns_by_step"] == [30_000_000] * STEPS
    else:
        assert max(files[s].loader_ns) < loader * 1.2
    if cause == "host_sync":
        assert files[s].syncs >= 10 * STEPS
    assert files[s].syncs == 0 or cause == "host_sync"
    assert all(f.syncs == 0 for f in healthy)
    ratio = files[s].compute_ns / compute
    assert ratio == pytest.approx(1.3 if cause == "slow_gpu" else 1.0, abs=0.05)


@pytest.mark.parametrize(("fmt", "ranks", "cause"), CASES, ids=CASE_IDS)
def test_project_loader_and_cli_read_the_files(
    jobs: Any, fmt: str, ranks: int, cause: str, capsys: pytest.CaptureFixture[str]
) -> None:
    _, truth = jobs(fmt, ranks, cause)
    s = STRAGGLER[ranks]
    picked = sorted({0, s, ranks - 1} if ranks > 4 else set(range(ranks)))
    for r in picked:
        session = load_path(truth.path(r))
        assert session.events.height > 0
        if fmt == "kineto":
            assert set(session.events["rank"].unique().to_list()) == {r}
    code, stdout, _ = run_cli(["analyze", str(truth.path(s)), "--json"], capsys)
    assert code == 0
    (dev,) = json.loads(stdout)["devices"]
    want = truth.ranks[s]
    assert dev["device"] == want["device"]
    assert dev["busy_ns"] == want["busy_ns"]
    assert dev["comm_ns"] == want["comm_ns"]


@pytest.mark.parametrize("fmt", FORMATS)
def test_clock_offsets_shift_each_rank(jobs: Any, fmt: str) -> None:
    offsets = (0, 7_654_321, -3_210_987, 123)
    out, truth = jobs(fmt, 4, "slow_gpu", offsets=offsets)
    plain_out, plain = jobs(fmt, 4, "slow_gpu")
    assert truth.to_dict()["steps"] == plain.to_dict()["steps"]  # truth: reference clock
    _check_against_truth(out, fmt, 4, list(offsets))
    shifted, unshifted = read_job(out, fmt, 4), read_job(plain_out, fmt, 4)
    for r, off in enumerate(offsets):
        moved = {a[0] - b[0] for a, b in zip(shifted[r].kernels, unshifted[r].kernels, strict=True)}
        assert moved == {off}
    # read without the offsets, the collectives no longer end together
    with pytest.raises(AssertionError, match="ends at different times"):
        recompute(shifted, truth.clock_base_ns, [0] * 4)


@pytest.mark.parametrize("fmt", FORMATS)
def test_no_cause_means_no_straggler(jobs: Any, fmt: str) -> None:
    out, truth = jobs(fmt, 4, None)
    _check_against_truth(out, fmt, 4, [0] * 4)
    assert truth.straggler == {
        "rank": None, "cause": None, "extra_ns_per_step": 0, "extra_ns_by_step": []
    }  # fmt: skip
    waits = [w for step in truth.steps for c in step["collectives"] for w in c["wait_ns"]]
    assert 0 < max(waits) < 1_000_000  # jitter only
    assert len({f.compute_ns for f in read_job(out, fmt, 4)}) == 4  # ranks are not identical


def test_kineto_records_like_a_ddp_trace(jobs: Any) -> None:
    out, _ = jobs("kineto", 4, "host_sync")
    with gzip.open(out / "rank2.pt.trace.json.gz", "rt") as fh:
        doc = json.load(fh)
    info = doc["distributedInfo"]
    assert (info["backend"], info["rank"], info["world_size"]) == ("nccl", 2, 4)
    assert info["pg_config"][0]["ranks"] == "[0, 1, 2, 3]"
    xs = [e for e in doc["traceEvents"] if e.get("ph") == "X"]
    rpc = nonempty(e for e in xs if e["name"] == "record_param_comms")
    assert [e["args"]["Seq"] for e in rpc] == list(range(1, 2 * STEPS + 1))
    assert rpc[0]["args"]["Collective name"] == "allreduce"
    assert rpc[0]["args"]["Process Group Name"] == "0"
    by_corr = {e["args"]["correlation"]: e for e in xs if e.get("cat") == "cuda_runtime"}
    for k in nonempty(e for e in xs if e.get("cat") == "kernel" and "nccl" in e["name"]):
        assert k["args"]["stream"] == 40 and k["args"]["In msg nelems"] > 0
        assert by_corr[k["args"]["correlation"]]["name"] == "cudaLaunchKernelExC"
        assert k["args"]["External id"] in {e["args"]["External id"] for e in rpc}
    names = {e["name"] for e in xs}
    assert {"c10d::allreduce_", "nccl:all_reduce", "cudaStreamWaitEvent", DATALOADER} <= names


def test_nsys_records_nccl_kernels_and_nvtx(jobs: Any) -> None:
    out, _ = jobs("nsys", 2, "data_loading")
    pids = set()
    for r in range(2):
        con = sqlite3.connect(f"file:{out / f'rank{r}.sqlite'}?mode=ro", uri=True)
        try:
            (domain,) = con.execute(
                "SELECT domainId FROM NVTX_EVENTS WHERE eventType = 75"
            ).fetchone()
            nccl_ranges = con.execute(
                "SELECT COUNT(*) FROM NVTX_EVENTS WHERE domainId = ? AND text = 'ncclAllReduce'",
                (domain,),
            ).fetchone()[0]
            launches = con.execute(
                "SELECT s.value FROM CUPTI_ACTIVITY_KIND_KERNEL k JOIN StringIds n ON"
                " n.id = k.demangledName JOIN CUPTI_ACTIVITY_KIND_RUNTIME r ON"
                " r.correlationId = k.correlationId JOIN StringIds s ON s.id = r.nameId"
                " WHERE n.value LIKE 'nccl%'"
            ).fetchall()
            pids |= {p for (p,) in con.execute("SELECT DISTINCT globalPid FROM PROCESSES")}
        finally:
            con.close()
        assert nccl_ranges == 2 * STEPS
        assert [s for (s,) in launches] == ["cudaLaunchKernelExC_v3020"] * (2 * STEPS)
    assert len(pids) == 2  # one process per rank


def test_same_seed_same_files(jobs: Any, tmp_path: Path) -> None:
    out, _ = jobs("kineto", 2, "slow_gpu")
    again = synth_ranks.generate_job(
        tmp_path, ranks=2, steps=STEPS, fmt="kineto", straggler_rank=1, cause="slow_gpu"
    )
    for r in range(2):
        assert again.path(r).read_bytes() == (out / f"rank{r}.pt.trace.json.gz").read_bytes()
    assert (tmp_path / "truth.json").read_text() == (out / "truth.json").read_text()
    _, other = jobs("kineto", 2, "slow_gpu", seed=1)
    assert other.to_dict()["ranks"] != again.to_dict()["ranks"]


def test_command_line(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    argv = [str(tmp_path), "--ranks", "2", "--steps", "2", "--format", "nsys"]
    assert synth_ranks.main([*argv, "--cause", "host_sync", "--clock-offsets-ns", "0,500"]) == 0
    assert "straggler rank 1 (host_sync)" in capsys.readouterr().out
    truth = json.loads((tmp_path / "truth.json").read_text())
    assert truth["format"] == "nsys" and truth["clock_offsets_ns"] == [0, 500]
    assert sorted(p.name for p in tmp_path.iterdir()) == [
        "rank0.sqlite",
        "rank1.sqlite",
        "truth.json",
    ]


@pytest.mark.parametrize(
    "bad",
    [
        {"ranks": 1},
        {"fmt": "chrome"},
        {"cause": "cosmic_rays"},
        {"straggler_rank": 4},
        {"clock_offsets_ns": [0, 1]},
    ],
)
def test_bad_arguments(tmp_path: Path, bad: dict[str, Any]) -> None:
    kwargs: dict[str, Any] = {"ranks": 4, "steps": 1, "fmt": "kineto", "straggler_rank": 0}
    kwargs["cause"] = "slow_gpu"
    with pytest.raises(ValueError):
        synth_ranks.generate_job(tmp_path, **{**kwargs, **bad})
