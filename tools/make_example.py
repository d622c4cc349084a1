"""Write the bundled example trace ``examples/synthetic_training.pt.trace.json.gz``.

The trace is the deterministic ``synth.training_loop()`` scenario (6 steps of a bf16 MLP on a
synthetic H100 with a slow DataLoader in two steps, a pageable batch copy, ``aten::item`` every
step and a checkpoint write in step 3). Run: ``python tools/make_example.py [OUT]``.
"""

from __future__ import annotations

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from synth import training_loop

ROOT = Path(__file__).resolve().parents[1]
DEFAULT_OUT = ROOT / "examples" / "synthetic_training.pt.trace.json.gz"


def build(out: Path = DEFAULT_OUT) -> Path:
    """Build the example trace and write it to ``out``."""
    out.parent.mkdir(parents=True, exist_ok=True)
    return training_loop(steps=6, checkpoint_steps=(3,)).write_kineto(out)


if __name__ == "__main__":
    path = build(Path(sys.argv[1]) if len(sys.argv) > 1 else DEFAULT_OUT)
    print(f"{path}: {path.stat().st_size} bytes")
