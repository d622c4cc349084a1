"""The recording settings of ``capture()`` and ``tf record``, each default defined here once.

What each setting buys (docs/recording.md has the measured sizes and overhead):

- ``wait``/``warmup``/``active`` (steps, default 2/2/5): the profiler's schedule. ``wait`` steps
  run unprofiled (start-up: lazy init, first allocations, compilation), ``warmup`` steps run
  the profiler without keeping events (its own start-up cost stays out), ``active`` steps are
  kept. The recorded steps are ``ProfilerStep#{wait+warmup}`` .. ``#{wait+warmup+active-1}``.
- ``repeat`` (cycles, default 1): how many wait/warmup/active cycles are recorded; each cycle
  is one file per rank. With one cycle the files go straight into the output folder; with
  several (or 0: every cycle until the run ends) cycle ``k`` (from 1) goes into
  ``cycle-k/``, so that every folder is one rank set that ``tf analyze`` reads.
- ``record_shapes`` (default on): operator shapes and dtypes, which FLOPs, MFU and kernel
  efficiency need.
- ``with_stack`` (default off): Python call stacks per operator; large files and slower steps,
  useful only to find a call site.
- ``profile_memory`` (default off): allocator events; not used by the idle analysis.
- ``cuda`` (default None: when ``torch.cuda.is_available()``): record GPU activity (CUPTI).
- ``gzip`` (default on): write ``.pt.trace.json.gz`` (about 14x smaller than plain JSON; ``tf``
  reads both).

Trace files are named ``rank-{rank}.pt.trace.json[.gz]`` (``ingest.ranksets`` reads the rank
from ``rank-N`` in a name), the rank from ``torch.distributed`` when it is initialised, else the
``RANK`` environment variable (set by ``torchrun``), else 0 (``inject.process_rank``,
``inject.write_trace``).
"""

from __future__ import annotations

import json
from dataclasses import asdict, dataclass, fields
from pathlib import Path
from typing import Any, Final

from traceforensics.model.errors import InputError, OptionError

#: Where ``tf record`` writes when ``--out`` is not given.
DEFAULT_OUT_DIR: Final = "tf-traces"
#: The one line every "torch is missing" error ends with.
INSTALL_HINT: Final = "pip install 'traceforensics[capture]'"
#: Environment variable carrying the settings to the process ``tf record`` runs (JSON).
ENV_VAR: Final = "TF_CAPTURE"
#: Name pattern of one rank's trace file (``{rank}`` and the suffix filled in).
TRACE_STEM: Final = "rank-{rank}.pt.trace.json"
#: Folder of cycle ``{cycle}`` (from 1) when several cycles are recorded.
CYCLE_DIR: Final = "cycle-{cycle}"

#: Nsight Systems flags the analysis needs: GPU work, NVTX ranges (the step ranges ``tf record``
#: pushes), OS calls (file I/O, waits), library calls, PyTorch op ranges with shapes (FLOPs),
#: one row per CUDA-graph kernel, and recording only between the cudaProfilerStart/Stop that
#: ``tf record`` issues around the active steps.
NSYS_FLAGS: Final[tuple[str, ...]] = (
    "-t",
    "cuda,nvtx,osrt,cublas,cudnn",
    "--pytorch=autograd-shapes-nvtx",
    "--cuda-graph-trace=node",
    "--capture-range=cudaProfilerApi",
    "--capture-range-end=stop",
)
#: Report name (without ``.nsys-rep``) that ``tf record --nsys`` writes into the output folder.
NSYS_REPORT: Final = "report"
#: Lowest value of each schedule setting (the others are flags): ``check`` and the ``tf record``
#: flags both read it, so the library and the CLI refuse the same values.
SCHEDULE_MIN: Final = {"wait": 0, "warmup": 0, "active": 1, "repeat": 0}


@dataclass(frozen=True)
class CaptureSettings:
    """Profiler settings (module docstring); steps count ``step()`` calls (``capture``) or
    optimizer steps after the first (``tf record``)."""

    wait: int = 2
    warmup: int = 2
    active: int = 5
    repeat: int = 1
    record_shapes: bool = True
    with_stack: bool = False
    profile_memory: bool = False
    cuda: bool | None = None
    gzip: bool = True

    def check(self) -> CaptureSettings:
        """Raise ``OptionError`` naming the setting when a value is out of range; else self."""
        for f in fields(self):
            name, value = f.name, getattr(self, f.name)
            low = SCHEDULE_MIN.get(name)
            if low is not None:  # (``type``, not ``isinstance``: True is no step count)
                if type(value) is not int or value < low:
                    raise OptionError(f"{name} {value!r}: must be an integer >= {low}", name)
            elif not (isinstance(value, bool) or (name == "cuda" and value is None)):
                raise OptionError(f"{name} {value!r}: must be True or False", name)
        return self

    @property
    def first_step(self) -> int:
        """Number of the first recorded ``ProfilerStep`` (steps are numbered from 0)."""
        return self.wait + self.warmup

    @property
    def cycle_steps(self) -> int:
        """Steps one cycle needs to be recorded whole (wait + warmup + active)."""
        return self.wait + self.warmup + self.active

    def config(self, out_dir: Path) -> dict[str, Any]:
        """The settings as ``inject`` reads them (``new_profiler``, ``trace_path``), with the
        output folder and the file-name patterns."""
        return {
            **asdict(self),
            "out": str(out_dir),
            "trace_stem": TRACE_STEM,
            "cycle_dir": CYCLE_DIR,
        }

    @classmethod
    def of(cls, **values: Any) -> CaptureSettings:
        """Settings from keyword values (unknown names raise ``OptionError``), checked."""
        known = {f.name for f in fields(cls)}
        for name in values:
            if name not in known:
                raise OptionError(
                    f"{name}: not a capture setting; use one of {', '.join(sorted(known))}", name
                )
        return cls(**values).check()


def require_torch() -> None:
    """Raise a one-line ``InputError`` naming the extra when ``torch`` cannot be imported."""
    try:
        import torch.profiler  # noqa: F401
    except ImportError as exc:
        raise InputError(
            f"recording needs PyTorch, which is not importable here ({exc}); {INSTALL_HINT}"
        ) from None


def child_env(settings: CaptureSettings, out_dir: Path, status_dir: Path, mode: str) -> str:
    """The ``ENV_VAR`` value for a process run by ``tf record``: everything its injected
    ``sitecustomize`` needs (it imports nothing of traceforensics, so the names and the schedule
    travel here, and the defaults stay defined once in this module). ``mode``: ``kineto`` or
    ``nsys``. Paths are written as given (absolute ones survive a ``cd`` in the command)."""
    cfg = settings.config(out_dir)
    return json.dumps({**cfg, "mode": mode, "status": str(status_dir)})
