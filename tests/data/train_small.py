"""A small CPU training loop with a deliberately slow data loader, for ``tf record`` tests.

Plain PyTorch, no traceforensics import: ``tf record -- python tests/data/train_small.py`` must
profile it without any edit. ``Dataset.__getitem__`` sleeps ``--sleep-ms`` per sample (default
2 ms, 4 samples per batch: >= 8 ms of loading per step), ``--steps`` optimizer steps (default
12: the default schedule, 1 + 2 wait + 2 warmup + 5 active optimizer steps, fits).
"""

from __future__ import annotations

import argparse
import sys
import time

import torch
from torch.utils.data import DataLoader, Dataset

BATCH = 4


class SlowDataset(Dataset[tuple[torch.Tensor, torch.Tensor]]):
    """Random regression samples; each one takes ``sleep_s`` to "decode"."""

    def __init__(self, n: int, sleep_s: float) -> None:
        self.n = n
        self.sleep_s = sleep_s

    def __len__(self) -> int:
        return self.n

    def __getitem__(self, i: int) -> tuple[torch.Tensor, torch.Tensor]:
        time.sleep(self.sleep_s)
        g = torch.Generator().manual_seed(i)
        return torch.randn(64, generator=g), torch.randn(8, generator=g)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--steps", type=int, default=12)
    parser.add_argument("--sleep-ms", type=float, default=2.0)
    parser.add_argument("--fail", action="store_true", help="exit 3 after training")
    args = parser.parse_args(argv)
    torch.manual_seed(0)
    loader = DataLoader(SlowDataset(args.steps * BATCH, args.sleep_ms / 1e3), batch_size=BATCH)
    model = torch.nn.Sequential(torch.nn.Linear(64, 256), torch.nn.ReLU(), torch.nn.Linear(256, 8))
    opt = torch.optim.SGD(model.parameters(), lr=0.01)
    for x, y in loader:
        loss = torch.nn.functional.mse_loss(model(x), y)
        opt.zero_grad()
        loss.backward()
        opt.step()
    print(f"train_small: {args.steps} steps, last loss {loss.item():.4f}")
    return 3 if args.fail else 0


if __name__ == "__main__":
    sys.exit(main())
