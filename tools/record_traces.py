"""Record small real PyTorch Profiler traces, each with one CPU-side stall injected on purpose.

Run on a CUDA machine:  ``python3 tools/record_traces.py --out DIR``
Dry run without a GPU:  ``python3 tools/record_traces.py --out DIR --dry-run`` (CPU profiling
only, tiny sizes; checks the script, the traces are not meant to be kept).

Model: a 5-layer bf16 MLP (256 -> 4096 -> 4096 -> 4096 -> 4096 -> 256, ReLU, batch 8192, SGD)
whose GEMMs keep the GPU ahead of the host, so a clean step has almost no device idle and each
injected stall shows up as idle the GPU spends waiting for the host.

Scenarios (file ``<name>.pt.trace.json.gz``; the intended cause id in brackets):
- ``baseline``   [none]          inputs already on the GPU, nothing injected;
- ``dataloader`` [data_loading]  ``DataLoader(num_workers=0)`` whose ``__getitem__`` sleeps
                                 (``--sleep-ms`` per sample, 8 samples per batch);
- ``item_sync``  [host_sync]     ``loss.item()`` after every optimizer step;
- ``pageable``   [memcpy]        ``--copy-mib`` of pageable (not pinned) host tensors in
                                 ``--copy-chunks`` pieces copied with ``.to(device)`` every step;
- ``checkpoint`` [io]            ``torch.save(model.state_dict())`` + fsync to a local file every
                                 other step, inside ``record_function("checkpoint")``.

Profiler: activities CPU+CUDA, ``record_shapes=True``, ``schedule(wait=1, warmup=1, active=4)``,
``on_trace_ready`` exporting a gzipped Chrome trace. ``summary.json`` in ``--out`` records the
torch/CUDA versions, GPU name, per-trace kernel counts, sizes and step times.
"""

from __future__ import annotations

import argparse
import gzip
import json
import os
import platform
import shutil
import sys
import tempfile
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import torch
from torch.profiler import ProfilerActivity, profile, record_function, schedule
from torch.utils.data import DataLoader, Dataset

SCENARIOS = ("baseline", "dataloader", "item_sync", "pageable", "checkpoint")
CAUSE = {
    "baseline": "none",
    "dataloader": "data_loading",
    "item_sync": "host_sync",
    "pageable": "memcpy",
    "checkpoint": "io",
}
WAIT, WARMUP, ACTIVE = 1, 1, 4
MAX_GZ_BYTES = 2 * 1024 * 1024


class SlowDataset(Dataset[torch.Tensor]):
    """Each item is a block of rows; ``__getitem__`` sleeps to imitate slow decoding."""

    def __init__(self, n: int, rows: int, features: int, sleep_s: float) -> None:
        self.n, self.rows, self.features, self.sleep_s = n, rows, features, sleep_s
        self.data = torch.randn(rows, features)

    def __len__(self) -> int:
        return self.n

    def __getitem__(self, i: int) -> torch.Tensor:
        time.sleep(self.sleep_s)
        return self.data + i


def make_model(features: int, hidden: int, depth: int, dev: torch.device) -> torch.nn.Module:
    layers: list[torch.nn.Module] = [torch.nn.Linear(features, hidden), torch.nn.ReLU()]
    for _ in range(depth - 2):
        layers += [torch.nn.Linear(hidden, hidden), torch.nn.ReLU()]
    layers.append(torch.nn.Linear(hidden, features))
    dtype = torch.bfloat16 if dev.type == "cuda" else torch.float32
    return torch.nn.Sequential(*layers).to(device=dev, dtype=dtype)


def batches(args: argparse.Namespace, scenario: str, dev: torch.device) -> Iterator[torch.Tensor]:
    """Input batches for a scenario; the slow or copying part happens in the loop body."""
    dtype = torch.bfloat16 if dev.type == "cuda" else torch.float32
    if scenario == "dataloader":
        per = args.batch // 8
        ds = SlowDataset(10_000, per, args.features, args.sleep_ms / 1000)
        loader = DataLoader(ds, batch_size=8, num_workers=0, pin_memory=False)
        for b in loader:  # the profiler records enumerate(DataLoader)#..._next__ here
            yield b.reshape(-1, args.features).to(dev, dtype)
    elif scenario == "pageable":
        # pageable (not pinned) fp32 host tensors, copied one by one with .to(device): each
        # copy syncs the stream, stages through the driver's bounce buffer, then DMAs.
        per = args.copy_mib * 1024 * 1024 // 4 // args.copy_chunks
        host = [torch.randn(per) for _ in range(args.copy_chunks)]
        n = args.batch * args.features
        x = torch.randn(n)
        while True:
            parts = [t.to(dev) for t in host]
            yield (x.to(dev) + parts[0].sum()).view(args.batch, args.features).to(dtype)
    else:
        x = torch.randn(args.batch, args.features, device=dev, dtype=dtype)
        while True:
            yield x


def train_steps(
    args: argparse.Namespace, scenario: str, dev: torch.device, n: int, step_cb: Callable[[], Any]
) -> list[float]:
    """Run ``n`` steps, calling ``step_cb`` (profiler.step) after each. Returns step wall ms."""
    torch.manual_seed(0)
    model = make_model(args.features, args.hidden, args.depth, dev)
    opt = torch.optim.SGD(model.parameters(), lr=1e-3)
    data = batches(args, scenario, dev)
    ckpt_dir = Path(tempfile.mkdtemp(prefix="tf_ckpt_"))
    times: list[float] = []
    try:
        for i in range(n):
            t0 = time.perf_counter()
            x = next(data)
            opt.zero_grad(set_to_none=True)
            loss = torch.nn.functional.mse_loss(model(x), x)
            loss.backward()
            opt.step()
            if scenario == "item_sync":
                _ = loss.item()  # host sync every step
            if scenario == "checkpoint" and i % 2 == 1:
                with record_function("checkpoint"):
                    path = ckpt_dir / "model.pt"
                    with path.open("wb") as fh:
                        torch.save(model.state_dict(), fh)
                        fh.flush()
                        os.fsync(fh.fileno())
            step_cb()
            times.append((time.perf_counter() - t0) * 1000)
    finally:
        shutil.rmtree(ckpt_dir, ignore_errors=True)
    if dev.type == "cuda":
        torch.cuda.synchronize()
    return times


def count_events(path: Path) -> dict[str, int]:
    doc = json.loads(gzip.decompress(path.read_bytes()))
    counts: dict[str, int] = {}
    for ev in doc.get("traceEvents", []):
        cat = ev.get("cat")
        if ev.get("ph") == "X" and isinstance(cat, str):
            counts[cat] = counts.get(cat, 0) + 1
    counts["events"] = len(doc.get("traceEvents", []))
    return counts


def record(args: argparse.Namespace, scenario: str, dev: torch.device, out: Path) -> dict[str, Any]:
    """Warm up untraced, then profile one window of WAIT+WARMUP+ACTIVE steps."""
    train_steps(args, scenario, dev, 2, lambda: None)  # cuBLAS/allocator warm-up, untraced
    target = out / f"{scenario}.pt.trace.json.gz"
    raw = out / f"{scenario}.tmp.json"

    def ready(prof: profile) -> None:
        prof.export_chrome_trace(str(raw))
        with raw.open("rb") as src, gzip.open(target, "wb", compresslevel=9) as dst:
            shutil.copyfileobj(src, dst)
        raw.unlink()

    activities = [ProfilerActivity.CPU]
    if dev.type == "cuda":
        activities.append(ProfilerActivity.CUDA)
    with profile(
        activities=activities,
        schedule=schedule(wait=WAIT, warmup=WARMUP, active=ACTIVE, repeat=1),
        on_trace_ready=ready,
        record_shapes=True,
    ) as prof:
        times = train_steps(args, scenario, dev, WAIT + WARMUP + ACTIVE, prof.step)
    size = target.stat().st_size
    info = {
        "file": target.name,
        "intended_cause": CAUSE[scenario],
        "bytes_gz": size,
        "step_ms": [round(t, 3) for t in times],
        "counts": count_events(target),
    }
    print(f"{scenario}: {size} B gz, steps ms {info['step_ms']}, {info['counts']}", flush=True)
    if size > MAX_GZ_BYTES:
        print(f"WARNING: {target.name} is over 2 MiB", flush=True)
    return info


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", type=Path, required=True)
    ap.add_argument("--dry-run", action="store_true", help="CPU only, tiny sizes")
    ap.add_argument("--only", default=",".join(SCENARIOS))
    ap.add_argument("--batch", type=int, default=8192)
    ap.add_argument("--features", type=int, default=256)
    ap.add_argument("--hidden", type=int, default=4096)
    ap.add_argument("--depth", type=int, default=5, help="number of Linear layers")
    ap.add_argument("--sleep-ms", type=float, default=3.0, help="DataLoader sleep per sample")
    ap.add_argument("--copy-mib", type=int, default=64, help="pageable bytes copied per step")
    ap.add_argument("--copy-chunks", type=int, default=32, help="tensors the copy is split in")
    args = ap.parse_args(argv)
    cuda = torch.cuda.is_available() and not args.dry_run
    if not cuda:
        if not args.dry_run:
            print("no CUDA device: pass --dry-run to profile CPU only", file=sys.stderr)
            return 2
        args.batch, args.hidden, args.copy_mib, args.sleep_ms = 64, 128, 8, 1.0
    dev = torch.device("cuda:0" if cuda else "cpu")
    args.out.mkdir(parents=True, exist_ok=True)
    summary: dict[str, Any] = {
        "torch": torch.__version__,
        "cuda": torch.version.cuda,
        "gpu": torch.cuda.get_device_name(0) if cuda else None,
        "python": platform.python_version(),
        "date_utc": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
        "command": " ".join([Path(sys.argv[0]).name, *(argv or sys.argv[1:])]),
        "config": {k: (str(v) if isinstance(v, Path) else v) for k, v in vars(args).items()},
        "schedule": {"wait": WAIT, "warmup": WARMUP, "active": ACTIVE},
        "traces": {},
    }
    print(json.dumps({k: summary[k] for k in ("torch", "cuda", "gpu")}), flush=True)
    for name in args.only.split(","):
        t0 = time.perf_counter()
        summary["traces"][name] = record(args, name, dev, args.out)
        print(f"{name}: recorded in {time.perf_counter() - t0:.1f} s", flush=True)
    (args.out / "summary.json").write_text(json.dumps(summary, indent=1) + "\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
