"""Synthetic multi-rank data-parallel training jobs with a known straggler and known collective
waits, as per-rank Kineto traces or per-rank Nsight Systems SQLite exports, plus ``truth.json``.

    python tools/synth_ranks.py OUT --ranks 4 --format kineto --cause data_loading
    python tools/synth_ranks.py OUT --collectives all_reduce,all_to_all   # a DLRM-style job

``generate_job(out_dir, ranks=, steps=, fmt=, straggler_rank=, cause=, seed=0,
clock_offsets_ns=None, spec=None) -> Truth`` writes ``rank{r}.pt.trace.json.gz`` (Kineto, with
``distributedInfo``) or ``rank{r}.sqlite`` (nsys) for every rank and ``truth.json``.

Model (``synth_ranks_sim``): every step on every rank runs dataloader ``__next__`` (GPU idle),
with ``JobSpec(collectives=(..., "all_to_all"))`` an embedding all-to-all (``SendRecv`` kernel
under ``c10d::alltoall_base_`` > ``nccl:all_to_all``) the forward waits for, forward and
backward kernels on stream 7 launched by ``cudaLaunchKernel``, one NCCL all-reduce per gradient
bucket on stream 40 (the default ``collectives=("all_reduce",)``), the optimizer (waits on
the NCCL stream) and a ``cudaDeviceSynchronize``. A collective's kernel starts on rank r at
``start_r`` = max(r's own arrival, NCCL stream free) and ends on every rank at
max_r(start_r) + transfer, so
``wait_r = max(start) - start_r`` and ``transfer`` is the same on all ranks. The straggler's
cause adds ``extra_ns`` per step (``synth_ranks_sim`` says how); healthy ranks get seeded
jitter (+-2 % on kernels, +-10 % on host times).

Clocks: truth times are integer ns after ``clock_base_ns`` in the reference clock (rank 0's when
its offset is 0). Rank r's clock reads ``clock_offsets_ns[r]`` ahead of it, and its profiler /
nsys session started ``session_start_ns`` (reference) into the job, so a time ``x`` written in
rank r's file (``baseTimeNanoseconds`` + ts, or ``utcEpochNs`` + start) is
``clock_base_ns + clock_offsets_ns[r] + t`` for reference time ``t``.

truth.json: ``world_size``, ``straggler`` {``rank``, ``cause``, ``extra_ns_per_step`` (mean of
``extra_ns_by_step``: the straggler's last collective arrival minus the same step replayed
alone without its cause)}; ``ranks[r]``: ``file``, ``device``, ``pid``, ``clock_offset_ns``,
``comm_ns`` (sum of its NCCL kernel durations) = ``comm_wait_ns`` + ``comm_transfer_ns``,
``busy_ns`` (union of its kernels), ``step_ns``/``step_start_ns`` (ProfilerStep ranges);
``steps[k]``: ``slowest_rank`` (last to arrive at the step's first collective), ``wait_ns`` per
rank, ``collectives`` [{``seq``, ``kind``, ``name``, ``start_ns`` and ``wait_ns`` per rank,
``end_ns``, ``transfer_ns``, ``last_rank``, ``nelems``}]; ``spec`` (the model's knobs).
"""

from __future__ import annotations

import argparse
import gzip
import json
import random
import sqlite3
from collections.abc import Generator, Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from synth import SynthTrace, json_compact
from synth_kineto import kineto_text
from synth_nsys import _DDL, NVTX_PUSHPOP, _fill, global_tid
from synth_ranks_sim import (
    CAUSES,
    COLLECTIVES,
    COMM_STREAM,
    COMPUTE_STREAM,
    NCCL_KERNEL,
    JobSpec,
    Pending,
    RankSim,
    StepDraws,
    ranks_text,
)

FORMATS = ("kineto", "nsys")
CLOCK_BASE_NS = 1_700_000_000_000_000_000
FIRST_STEP = 4  # ProfilerStep#4 is the first recorded step (after wait/warmup, as real traces)
GPUS_PER_NODE = 8
NCCL_VERSION = "2.21.5"
SCHEMA = "traceforensics.synth_ranks/1"
NVTX_DOMAIN_CREATE = 75


@dataclass
class Truth:
    """What ``generate_job`` built (the content of ``truth.json``, plus where it lies)."""

    out_dir: Path
    fmt: str
    world_size: int
    step_count: int
    seed: int
    straggler: dict[str, Any]
    clock_base_ns: int
    clock_offsets_ns: list[int]
    ranks: list[dict[str, Any]]
    steps: list[dict[str, Any]]
    spec: dict[str, Any] = field(default_factory=dict)

    def path(self, rank: int) -> Path:
        return self.out_dir / str(self.ranks[rank]["file"])

    def to_dict(self) -> dict[str, Any]:
        out = {"schema": SCHEMA, **asdict(self)}
        out.pop("out_dir")
        out["format"] = out.pop("fmt")
        out["time_base"] = (
            "ns after clock_base_ns in the reference clock; a rank-r file time x (absolute ns) "
            "is reference time x - clock_base_ns - clock_offsets_ns[r]"
        )
        return out


# ===================================================================== the job
def generate_job(
    out_dir: str | Path,
    *,
    ranks: int,
    steps: int,
    fmt: str,
    straggler_rank: int,
    cause: str | None,
    seed: int = 0,
    clock_offsets_ns: Sequence[int] | None = None,
    spec: JobSpec | None = None,
) -> Truth:
    """Write one trace per rank and ``truth.json`` into ``out_dir``; return the truth."""
    offsets = _check(ranks, steps, fmt, straggler_rank, cause, clock_offsets_ns)
    spec = spec or JobSpec()
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    rngs = [random.Random(seed * 1_000_003 + r) for r in range(ranks)]
    sims = [_rank_sim(r, ranks, spec, cause if r == straggler_rank else None) for r in range(ranks)]
    for sim, rng in zip(sims, rngs, strict=True):
        sim.t = 1_000_000 + rng.randrange(50_000)
    seq = 1
    step_truth: list[dict[str, Any]] = []
    extra: list[int] = []
    plan = spec.plan(ranks)
    transfers = [t for _, _, t in plan]
    for k in range(steps):
        draws = [StepDraws.draw(rng, spec) for rng in rngs]
        if cause is not None:
            extra.append(_extra_ns(sims[straggler_rank], draws[straggler_rank], seq, transfers))
        name = f"ProfilerStep#{FIRST_STEP + k}"
        gens = [sim.step(name, d, seq) for sim, d in zip(sims, draws, strict=True)]
        colls = _meet(gens, transfers, max(s.comm_free for s in sims))
        step_truth.append(_step_truth(k, name, colls, seq, plan))
        seq += len(colls)
    files = [_file_name(fmt, r) for r in range(ranks)]
    rank_truth = [_rank_truth(s, files[s.rank], offsets[s.rank], step_truth) for s in sims]
    _write_all(out, fmt, sims, offsets)
    truth = Truth(
        out_dir=out,
        fmt=fmt,
        world_size=ranks,
        step_count=steps,
        seed=seed,
        straggler={
            "rank": straggler_rank if cause is not None else None,
            "cause": cause,
            "extra_ns_per_step": sum(extra) // len(extra) if extra else 0,
            "extra_ns_by_step": extra,
        },
        clock_base_ns=CLOCK_BASE_NS,
        clock_offsets_ns=offsets,
        ranks=rank_truth,
        steps=step_truth,
        spec={
            **asdict(spec),
            "compute_stream": COMPUTE_STREAM,
            "comm_stream": COMM_STREAM,
            "nccl_kernel": NCCL_KERNEL,
            "transfer_ns": transfers,
        },
    )
    (out / "truth.json").write_text(json.dumps(truth.to_dict(), indent=1) + "\n")
    return truth


def _check(
    ranks: int,
    steps: int,
    fmt: str,
    straggler_rank: int,
    cause: str | None,
    clock_offsets_ns: Sequence[int] | None,
) -> list[int]:
    if ranks < 2 or steps < 1:
        raise ValueError("a job needs ranks >= 2 and steps >= 1")
    if fmt not in FORMATS:
        raise ValueError(f"fmt must be one of {FORMATS}, not {fmt!r}")
    if cause is not None and cause not in CAUSES:
        raise ValueError(f"cause must be one of {CAUSES} or None, not {cause!r}")
    if not 0 <= straggler_rank < ranks:
        raise ValueError(f"straggler_rank {straggler_rank} is not a rank of {ranks}")
    offsets = [0] * ranks if clock_offsets_ns is None else [int(o) for o in clock_offsets_ns]
    if len(offsets) != ranks:
        raise ValueError(f"clock_offsets_ns has {len(offsets)} values for {ranks} ranks")
    return offsets


def _rank_sim(rank: int, world: int, spec: JobSpec, cause: str | None) -> RankSim:
    pid = 3_000 + 101 * rank
    tr = SynthTrace(rank=rank, pid=pid, world_size=world, base_ns=CLOCK_BASE_NS)
    return RankSim(tr, rank, world, spec, cause, tid=pid, device=rank % GPUS_PER_NODE)


def _extra_ns(sim: RankSim, draws: StepDraws, seq: int, transfers: list[int]) -> int:
    """The straggler's delay this step: its last collective arrival with its cause minus the
    same step replayed from the same state and jitter without it (each replay alone: its
    collectives start at its own arrival)."""
    base = _alone(_scratch(sim, None).step("probe", draws, seq), transfers, sim.comm_free)
    slow = _alone(_scratch(sim, sim.cause).step("probe", draws, seq), transfers, sim.comm_free)
    return slow - base


def _alone(gen: Generator[Pending, tuple[int, int], int], transfers: list[int], free: int) -> int:
    """Run one rank's step with no other rank; the arrival of its last collective."""
    arrival = 0
    p = next(gen)
    for transfer in transfers:
        arrival = p.arrival_ns
        start = max(arrival, free)
        free = start + transfer
        try:
            p = gen.send((start, free))
        except StopIteration:
            break
    return arrival


def _scratch(sim: RankSim, cause: str | None) -> RankSim:
    """A copy of ``sim``'s state writing into a throwaway trace."""
    tr = SynthTrace(rank=sim.rank, pid=sim.tr.pid, world_size=sim.world)
    return RankSim(
        tr,
        sim.rank,
        sim.world,
        sim.spec,
        cause,
        tid=sim.tid,
        device=sim.device,
        t=sim.t,
        s7=sim.s7,
        comm_free=sim.comm_free,
    )


def _meet(
    gens: list[Generator[Pending, tuple[int, int], int]], transfers: list[int], comm_free: int
) -> list[dict[str, Any]]:
    """Run every rank's step, meeting in each collective: kernel start per rank, common end,
    waits, last rank."""
    out: list[dict[str, Any]] = []
    free = comm_free
    pending = [next(g) for g in gens]
    for c, transfer in enumerate(transfers):
        starts = [max(p.arrival_ns, free) for p in pending]
        last = max(starts)
        end = last + transfer
        out.append(
            {
                "start_ns": starts,
                "end_ns": end,
                "transfer_ns": transfer,
                "wait_ns": [last - s for s in starts],
                "last_rank": starts.index(last),
                "arrival_ns": [p.arrival_ns for p in pending],
                "kind": pending[0].kind,
            }
        )
        free = end
        nxt = []
        for g, s in zip(gens, starts, strict=True):
            try:
                nxt.append(g.send((s, end)))
            except StopIteration:
                if c != len(transfers) - 1:  # pragma: no cover - the plan and the step disagree
                    raise
        pending = nxt
    return out


def _step_truth(
    k: int, name: str, colls: list[dict[str, Any]], seq: int, plan: list[tuple[str, int, int]]
) -> dict[str, Any]:
    for c, coll in enumerate(colls):
        kind, nelems, _ = plan[c]
        coll.update(seq=seq + c, name=kind.replace("_", ""), nelems=nelems)
    return {
        "index": k,
        "name": name,
        "slowest_rank": colls[0]["last_rank"],
        "wait_ns": [sum(c["wait_ns"][r] for c in colls) for r in range(len(colls[0]["start_ns"]))],
        "collectives": colls,
    }


def _rank_truth(
    sim: RankSim, file: str, offset: int, steps: list[dict[str, Any]]
) -> dict[str, Any]:
    colls = [c for s in steps for c in s["collectives"]]
    r = sim.rank
    comm = sum(c["end_ns"] - c["start_ns"][r] for c in colls)
    wait = sum(c["wait_ns"][r] for c in colls)
    spans = sim.tr.busy_union(sim.device)
    step_evs = [e for e in sim.tr.events if e.name.startswith("ProfilerStep#")]
    return {
        "rank": r,
        "file": file,
        "device": sim.device,
        "pid": sim.tr.pid,
        "clock_offset_ns": offset,
        "session_start_ns": _session_start(r),
        "comm_count": len(colls),
        "comm_ns": comm,
        "comm_wait_ns": wait,
        "comm_transfer_ns": comm - wait,
        "busy_ns": sum(e - s for s, e in spans),
        "first_gpu_ns": spans[0][0],
        "last_gpu_ns": spans[-1][1],
        "step_start_ns": [e.start_ns for e in step_evs],
        "step_ns": [e.dur_ns for e in step_evs],
    }


# ===================================================================== writing
def _session_start(rank: int) -> int:
    """When rank's profiler / nsys session began (reference ns): a little apart per rank."""
    return 400_000 + 10_007 * rank


def _file_name(fmt: str, rank: int) -> str:
    return f"rank{rank}.pt.trace.json.gz" if fmt == "kineto" else f"rank{rank}.sqlite"


def _write_all(out: Path, fmt: str, sims: list[RankSim], offsets: list[int]) -> None:
    for sim in sims:
        shift = _session_start(sim.rank)
        for ev in sim.tr.events:  # times in the file are relative to the session start
            ev.start_ns -= shift
        sim.tr.base_ns = CLOCK_BASE_NS + offsets[sim.rank] + shift
        path = out / _file_name(fmt, sim.rank)
        if fmt == "kineto":
            _write_kineto(sim, path)
        else:
            _write_nsys(sim, path, shift)


def distributed_info(rank: int, world: int) -> dict[str, Any]:
    """``distributedInfo`` as current kineto writes it (``ranks`` is a quoted string)."""
    pg = {
        "pg_name": "0",
        "pg_desc": "default_pg",
        "backend_config": "cuda:nccl",
        "pg_size": world,
        "ranks": ranks_text(world),
    }
    return {
        "backend": "nccl",
        "rank": rank,
        "world_size": world,
        "pg_count": 1,
        "pg_config": [pg],
        "nccl_version": NCCL_VERSION,
    }


def _write_kineto(sim: RankSim, path: Path) -> None:
    """``synth_kineto``'s text with the full ``distributedInfo`` of a DDP job, gzipped."""
    tr = sim.tr
    text = kineto_text(tr)
    plain = json_compact({"backend": "nccl", "rank": tr.rank, "world_size": tr.world_size})
    full = json_compact(distributed_info(tr.rank, tr.world_size))
    needle = f'"distributedInfo":{plain}'
    if needle not in text:  # pragma: no cover - the writer changed its layout
        raise RuntimeError("synth_kineto no longer writes distributedInfo as expected")
    text = text.replace(needle, f'"distributedInfo":{full}', 1)
    with path.open("wb") as raw, gzip.GzipFile(filename="", mode="wb", fileobj=raw, mtime=0) as gz:
        gz.write(text.encode())


def _write_nsys(sim: RankSim, path: Path, shift: int) -> None:
    """``synth_nsys``'s export (its DDL and rows; unsynced writes, the file is scratch data)
    plus NCCL's own NVTX ranges: domain ``NCCL``, ``ncclAllReduce`` around each all-reduce
    launch, ``ncclGroupStart`` / ``ncclSend`` / ``ncclRecv`` / ``ncclGroupEnd`` around an
    all-to-all's."""
    if path.exists():
        path.unlink()
    gt = global_tid(sim.tr.pid, sim.tid)
    rows = [(s - shift, e - shift, NVTX_PUSHPOP, text, gt, 1) for s, e, text in sim.nccl_api_spans]
    con = sqlite3.connect(path)
    try:
        con.execute("PRAGMA synchronous = OFF")
        con.execute("PRAGMA journal_mode = MEMORY")
        con.execute("BEGIN")
        for statement in _DDL.split(";"):
            if statement.strip():
                con.execute(statement)
        _fill(con, sim.tr)
        con.execute(
            "INSERT INTO NVTX_EVENTS (start, end, eventType, text, globalTid, domainId)"
            " VALUES (0, NULL, ?, 'NCCL', ?, 1)",
            (NVTX_DOMAIN_CREATE, gt),
        )
        con.executemany(
            "INSERT INTO NVTX_EVENTS (start, end, eventType, text, globalTid, domainId)"
            " VALUES (?, ?, ?, ?, ?, ?)",
            rows,
        )
        con.commit()
    finally:
        con.close()


# ===================================================================== CLI
def main(argv: Sequence[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("out", type=Path, help="folder for rank files and truth.json")
    ap.add_argument("--ranks", type=int, default=4)
    ap.add_argument("--steps", type=int, default=10)
    ap.add_argument("--format", dest="fmt", choices=FORMATS, default="kineto")
    ap.add_argument("--straggler", type=int, default=None, help="default: the last rank")
    ap.add_argument("--cause", choices=[*CAUSES, "none"], default="data_loading")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument(
        "--collectives",
        default="all_reduce",
        help=f"comma-separated collective kinds each step runs, of {','.join(COLLECTIVES)}",
    )
    ap.add_argument(
        "--clock-offsets-ns",
        default=None,
        help="comma-separated clock offset of each rank (ns), e.g. 0,5000,-3000,0",
    )
    a = ap.parse_args(argv)
    offsets = None
    if a.clock_offsets_ns:
        offsets = [int(x) for x in a.clock_offsets_ns.split(",")]
    straggler = a.ranks - 1 if a.straggler is None else a.straggler
    truth = generate_job(
        a.out,
        ranks=a.ranks,
        steps=a.steps,
        fmt=a.fmt,
        straggler_rank=straggler,
        cause=None if a.cause == "none" else a.cause,
        seed=a.seed,
        clock_offsets_ns=offsets,
        spec=JobSpec(collectives=tuple(a.collectives.split(","))),
    )
    s = truth.straggler
    print(
        f"wrote {truth.world_size} {truth.fmt} rank files and truth.json to {truth.out_dir}; "
        f"straggler rank {s['rank']} ({s['cause']}), +{s['extra_ns_per_step'] / 1e6:.3f} ms/step"
    )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
