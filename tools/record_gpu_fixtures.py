"""Record two small CUDA traces with ``traceforensics.capture()`` and check their first finding.

Run on a machine with a CUDA GPU, from the repository root, with the dev install (torch and
traceforensics importable)::

    python tools/record_gpu_fixtures.py --out tests/fixtures/recorded

Check the script without a GPU (CPU profiling, tiny sizes, into a temporary folder unless
``--out`` is given; the traces have no GPU work, so there is no finding to check)::

    python tools/record_gpu_fixtures.py --dry-run

Scenarios, both a bf16 MLP (256 -> 4096 x 4 -> 256, ReLU, batch 8192, MSE, SGD) whose GEMMs keep
the GPU ahead of the host in a clean step, recorded with ``capture()``'s defaults (schedule
wait 2 / warmup 2 / active 5, ``record_shapes``, CPU + CUDA activities, gzip):

- ``capture_dataloader`` [first finding ``data_loading``]: batches come through
  ``cap.loader(DataLoader(num_workers=0))`` whose ``__getitem__`` sleeps ``--sleep-ms`` per
  sample, 8 samples per batch;
- ``capture_pageable`` [first finding ``memcpy``]: ``--copy-mib`` of pageable (not pinned)
  host tensors in ``--copy-chunks`` pieces are copied with ``.to(device)`` every step, through
  ``cap.step()`` at the end of each iteration.

Each trace is copied to ``OUT/<scenario>.pt.trace.json.gz``; ``OUT/capture_summary.json`` records
the versions, the GPU, each file's size and the first three findings. The script prints each
scenario's first finding and exits 1 when one is not the intended category (or a file is larger
than 2 MiB), so a run that did not reproduce the stall is not committed by mistake.
"""

from __future__ import annotations

import argparse
import itertools
import json
import platform
import shutil
import sys
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import torch
from torch.utils.data import DataLoader, Dataset

import traceforensics
from traceforensics.recording import Capture

INTENDED = {"capture_dataloader": "data_loading", "capture_pageable": "memcpy"}
MAX_BYTES = 2 * 1024 * 1024
STEPS = 12  # > 2 + 2 + 5: the default window is recorded whole
SAMPLES = 8  # per DataLoader batch


class SlowRows(Dataset[torch.Tensor]):
    """Rows of random features; each item sleeps ``sleep_s`` (slow decoding)."""

    def __init__(self, n: int, rows: int, features: int, sleep_s: float) -> None:
        self.n, self.rows, self.features, self.sleep_s = n, rows, features, sleep_s

    def __len__(self) -> int:
        return self.n

    def __getitem__(self, i: int) -> torch.Tensor:
        time.sleep(self.sleep_s)
        return torch.randn(self.rows, self.features)


def make_model(args: argparse.Namespace, dev: torch.device) -> torch.nn.Module:
    layers: list[torch.nn.Module] = []
    width = [args.features, *[args.hidden] * args.depth, args.features]
    for a, b in itertools.pairwise(width):
        layers += [torch.nn.Linear(a, b), torch.nn.ReLU()]
    return torch.nn.Sequential(*layers[:-1]).to(dev, args.dtype)


def train_step(model: torch.nn.Module, opt: torch.optim.Optimizer, x: torch.Tensor) -> None:
    loss = torch.nn.functional.mse_loss(model(x), x)
    opt.zero_grad(set_to_none=True)
    loss.backward()
    opt.step()


def dataloader_run(args: argparse.Namespace, dev: torch.device, out: Path) -> Capture:
    model = make_model(args, dev)
    opt = torch.optim.SGD(model.parameters(), lr=1e-3)
    rows = SlowRows(SAMPLES * STEPS, args.batch // SAMPLES, args.features, args.sleep_ms / 1e3)
    data = DataLoader(rows, batch_size=SAMPLES)
    with traceforensics.capture(out, cuda=args.cuda, print_verdict=False) as cap:
        for batch in cap.loader(data):
            train_step(model, opt, batch.reshape(-1, args.features).to(dev, args.dtype))
    return cap


def pageable_run(args: argparse.Namespace, dev: torch.device, out: Path) -> Capture:
    model = make_model(args, dev)
    opt = torch.optim.SGD(model.parameters(), lr=1e-3)
    x = torch.randn(args.batch, args.features, device=dev, dtype=args.dtype)
    chunk = args.copy_mib * 2**20 // args.copy_chunks // 4  # float32 elements per piece
    host = [torch.randn(chunk) for _ in range(args.copy_chunks)]  # pageable: not pinned
    with traceforensics.capture(out, cuda=args.cuda, print_verdict=False) as cap:
        for _ in range(STEPS):
            for h in host:
                h.to(dev)
            train_step(model, opt, x)
            cap.step()
    return cap


def _scenarios(args: argparse.Namespace, dev: torch.device) -> Iterator[tuple[str, Capture]]:
    scratch = Path(tempfile.mkdtemp(prefix="tf-capture-"))
    yield "capture_dataloader", dataloader_run(args, dev, scratch / "dataloader")
    yield "capture_pageable", pageable_run(args, dev, scratch / "pageable")


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--out", type=Path, default=None, help="default: tests/fixtures/recorded")
    p.add_argument("--dry-run", action="store_true", help="CPU only, tiny sizes")
    p.add_argument("--sleep-ms", type=float, default=3.0)
    p.add_argument("--copy-mib", type=int, default=64)
    p.add_argument("--copy-chunks", type=int, default=32)
    args = p.parse_args(argv)
    if not args.dry_run and not torch.cuda.is_available():
        print("no CUDA GPU here: run with --dry-run to check the script", file=sys.stderr)
        return 2
    dry = args.dry_run
    args.features, args.hidden, args.depth = (16, 32, 2) if dry else (256, 4096, 4)
    args.batch, args.dtype = (64, torch.float32) if dry else (8192, torch.bfloat16)
    args.copy_mib = 1 if dry else args.copy_mib
    args.cuda = not dry
    out = args.out or (Path(tempfile.mkdtemp()) if dry else Path("tests/fixtures/recorded"))
    out.mkdir(parents=True, exist_ok=True)
    dev = torch.device("cpu" if dry else "cuda")
    summary: dict[str, Any] = _environment(dry)
    ok = True
    for name, cap in _scenarios(args, dev):
        target = out / f"{name}.pt.trace.json.gz"
        shutil.copyfile(cap.traces[-1], target)
        findings = cap.analysis.findings if cap.analysis is not None else []
        first = findings[0].category if findings else "none (no GPU work)"
        size = target.stat().st_size
        good = dry or (first == INTENDED[name] and size <= MAX_BYTES)
        ok = ok and good
        print(f"{name}: first finding {first} (intended {INTENDED[name]}), {size / 1024:.0f} KiB"
              f" -> {target}{'' if good else '  <-- NOT AS INTENDED'}")  # fmt: skip
        summary["traces"][target.name] = {
            "bytes": size,
            "intended": INTENDED[name],
            "findings": [
                {"category": f.category, "recoverable_ns": f.recoverable_ns, "title": f.title}
                for f in findings[:3]
            ],
        }
    (out / "capture_summary.json").write_text(json.dumps(summary, indent=2) + "\n")
    return 0 if ok else 1


def _environment(dry: bool) -> dict[str, Any]:
    return {
        "date_utc": time.strftime("%Y-%m-%d %H:%M", time.gmtime()),
        "dry_run": dry,
        "torch": torch.__version__,
        "cuda": torch.version.cuda,
        "gpu": None if dry else torch.cuda.get_device_name(0),
        "python": platform.python_version(),
        "settings": "traceforensics.capture() defaults",
        "traces": {},
    }


if __name__ == "__main__":
    sys.exit(main())
