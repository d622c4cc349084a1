"""What ``tf record`` injects into the command it runs, and the profiler ``capture()`` builds.

``tf record`` copies this file as ``sitecustomize.py`` into ``OUT/.tf-record/`` and puts that
folder first on the command's ``PYTHONPATH``; every Python process of the command (``torchrun``
and its workers too) then imports it at start-up. It imports only the standard library and
``torch`` (the command may run another Python than ``tf``'s), and does nothing unless
``$TF_CAPTURE`` holds the settings (JSON, ``settings.child_env``). Then:

1. when ``torch`` has been imported (a ``sys.meta_path`` hook; a process that never imports
   torch, like a shell, costs nothing), a global optimizer step post-hook is registered
   (``torch.optim.optimizer.register_optimizer_step_post_hook``, torch >= 2.0);
2. the first optimizer whose ``step()`` returns is the one followed (a second optimizer in the
   same loop does not double the steps). After its first step the profiler starts
   (``ProfilerStep#0``), and each later step ends one profiler step: ``ProfilerStep#k`` runs from
   the end of optimizer step ``k+1`` to the end of step ``k+2`` (zero_grad, the next batch's
   fetch, forward, backward, update). The schedule counts these steps, so the first optimizer
   step (start-up) is never recorded;
3. PyTorch's ``DataLoader`` records its own ``enumerate(DataLoader)#...__next__`` range around
   every batch while the profiler runs: no wrapping is needed for the loader to show;
4. at exit (``atexit``) a profiler inside its active window is stopped, which writes what was
   recorded; a status file (``status-<pid>.json``: rank, optimizer steps, traces written, error)
   tells ``tf record`` what happened.

In ``nsys`` mode (``tf record --nsys``) there is no torch profiler: the same step counting calls
``cudaProfilerStart`` when the active window begins and ``cudaProfilerStop`` when it ends (the
capture range ``nsys`` waits for), and pushes one NVTX range ``ProfilerStep#k`` per active step.
Errors never reach the user's script: they are written to the status file and stderr.
"""

from __future__ import annotations

import atexit
import importlib.abc
import importlib.machinery
import importlib.util
import json
import os
import sys
import warnings
import weakref
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from types import ModuleType
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from torch.optim import Optimizer
    from torch.profiler import profile

ENV_VAR = "TF_CAPTURE"  # settings.ENV_VAR (a test keeps them equal)


def write_trace(prof: profile, cfg: Mapping[str, Any], rank: int, cycle: int) -> Path:
    """Write ``rank``'s trace of cycle ``cycle`` (from 1) and return its file: straight in the
    output folder when one cycle is recorded, else in its cycle folder (``settings``
    docstring). The ``on_trace_ready`` of both ``capture()`` and ``Recorder``."""
    out = Path(cfg["out"])
    folder = out if cfg["repeat"] == 1 else out / str(cfg["cycle_dir"]).format(cycle=cycle)
    path = folder / (str(cfg["trace_stem"]).format(rank=rank) + (".gz" if cfg["gzip"] else ""))
    folder.mkdir(parents=True, exist_ok=True)
    prof.export_chrome_trace(os.fspath(path))
    return path


def _active_steps(cfg: Mapping[str, Any]) -> range:
    """The ``ProfilerStep`` numbers of the first active window (``CaptureSettings.first_step``
    spelled again: this file cannot import the settings)."""
    first = cfg["wait"] + cfg["warmup"]
    return range(first, first + cfg["active"])


def new_profiler(cfg: Mapping[str, Any], on_trace_ready: Callable[[profile], None]) -> profile:
    """The ``torch.profiler.profile`` of these settings, not started."""
    import torch
    from torch.profiler import ProfilerActivity, profile, schedule

    cuda = torch.cuda.is_available() if cfg["cuda"] is None else bool(cfg["cuda"])
    if cfg["repeat"] != 1:  # each cycle is written to its own file: that is the point
        warnings.filterwarnings("ignore", "Warning: Profiler clears events at the end of each")
    return profile(
        activities=[ProfilerActivity.CPU, *([ProfilerActivity.CUDA] if cuda else [])],
        schedule=schedule(
            wait=cfg["wait"], warmup=cfg["warmup"], active=cfg["active"], repeat=cfg["repeat"]
        ),
        on_trace_ready=on_trace_ready,
        record_shapes=cfg["record_shapes"],
        with_stack=cfg["with_stack"],
        profile_memory=cfg["profile_memory"],
    )


def process_rank() -> int:
    """``torch.distributed``'s rank when initialised, else ``$RANK``, else 0."""
    import torch.distributed as dist

    if dist.is_available() and dist.is_initialized():
        return int(dist.get_rank())
    try:
        return max(int(os.environ.get("RANK", "0")), 0)
    except ValueError:
        return 0


class Recorder:
    """Follows the first optimizer's steps in one process (module docstring)."""

    def __init__(self, cfg: Mapping[str, Any]) -> None:
        self.cfg = cfg
        self.followed: weakref.ref[Optimizer] | None = None
        self.optimizer_steps = 0
        self.rank = 0
        self.prof: profile | None = None
        self.traces: list[str] = []
        self.nvtx_open = False
        self.error = ""

    def after_step(self, optimizer: Optimizer, args: Sequence[Any], kwargs: Any) -> None:
        if self.error:
            return
        if self.followed is None or self.followed() is None:  # first, or the old one is gone
            self.followed = weakref.ref(optimizer)
        elif self.followed() is not optimizer:
            return
        self.optimizer_steps += 1
        try:
            self._advance()
        except Exception as exc:  # the user's run goes on, unprofiled
            self.fail(f"{type(exc).__name__}: {exc}")

    def _advance(self) -> None:
        step = self.optimizer_steps - 1  # ProfilerStep#step starts now
        if self.cfg["mode"] == "nsys":
            self._nsys(step)
        elif self.prof is None:
            self.rank = process_rank()
            self.prof = new_profiler(self.cfg, self._write)
            self.prof.start()
        else:
            self.prof.step()

    def _nsys(self, step: int) -> None:
        """Capture range and NVTX step ranges for ``nsys`` (first cycle only)."""
        import torch

        cuda: Any = torch.cuda  # (nvtx and cudart are untyped in torch)
        window = _active_steps(self.cfg)
        if self.nvtx_open:
            cuda.nvtx.range_pop()
            self.nvtx_open = False
            if step == window.stop:
                cuda.synchronize()  # the last step's GPU work inside the range
                cuda.cudart().cudaProfilerStop()
                self.traces.append("nsys")
        if step in window:
            if step == window.start:
                self.rank = process_rank()
                cuda.cudart().cudaProfilerStart()
            cuda.nvtx.range_push(f"ProfilerStep#{step}")
            self.nvtx_open = True

    def _write(self, prof: profile) -> None:
        path = write_trace(prof, self.cfg, self.rank, len(self.traces) + 1)
        self.traces.append(os.fspath(path))  # (the status file is JSON)

    def fail(self, message: str) -> None:
        self.error = message
        print(f"tf record: profiling stopped in process {os.getpid()}: {message}", file=sys.stderr)

    def finish(self) -> None:
        """At exit: stop a running profiler (writes a window cut short), then the status."""
        try:
            if self.prof is not None:
                prof, self.prof = self.prof, None
                prof.stop()
            elif self.nvtx_open:  # the window was cut short: close the range nsys records
                self._nsys(_active_steps(self.cfg).stop)
        except Exception as exc:
            self.fail(f"{type(exc).__name__}: {exc}")
        status = {
            "pid": os.getpid(),
            "rank": self.rank,
            "optimizer_steps": self.optimizer_steps,
            "traces": self.traces,
            "error": self.error,
        }
        try:
            path = Path(self.cfg["status"]) / f"status-{os.getpid()}.json"
            path.write_text(json.dumps(status))
        except OSError as exc:  # the folder was removed while the command ran
            print(f"tf record: no status written ({exc})", file=sys.stderr)


def _on_torch(cfg: Mapping[str, Any]) -> None:
    """``torch`` is imported: follow optimizer steps, and report at exit."""
    recorder = Recorder(cfg)
    atexit.register(recorder.finish)
    try:
        from torch.optim.optimizer import register_optimizer_step_post_hook
    except ImportError:
        recorder.fail("this torch has no global optimizer step hook; use torch >= 2.0")
        return
    register_optimizer_step_post_hook(recorder.after_step)


class _AfterTorch(importlib.abc.MetaPathFinder):
    """Runs ``_on_torch`` once ``torch`` has finished importing (its loader wrapped)."""

    def __init__(self, cfg: Mapping[str, Any]) -> None:
        self.cfg = cfg

    def find_spec(
        self, fullname: str, path: Sequence[str] | None, target: ModuleType | None = None
    ) -> importlib.machinery.ModuleSpec | None:
        if fullname != "torch":
            return None
        sys.meta_path.remove(self)  # once; the finders after this one find the real spec
        spec = importlib.util.find_spec("torch")
        loader = spec.loader if spec is not None else None
        if loader is None:
            return spec
        run = loader.exec_module
        cfg = self.cfg

        def exec_module(module: ModuleType) -> None:
            run(module)
            _on_torch(cfg)

        loader.exec_module = exec_module  # type: ignore[method-assign]
        return spec


def _chain_next_sitecustomize() -> None:
    """Run the ``sitecustomize`` this file shadows (a distribution's or a virtualenv's)."""
    here = os.path.dirname(os.path.abspath(__file__))
    for entry in sys.path:
        if os.path.abspath(entry or os.curdir) == here:
            continue
        candidate = os.path.join(entry or os.curdir, "sitecustomize.py")
        if os.path.isfile(candidate):
            spec = importlib.util.spec_from_file_location("_tf_shadowed_sitecustomize", candidate)
            if spec is not None and spec.loader is not None:
                spec.loader.exec_module(importlib.util.module_from_spec(spec))
            return


def install() -> None:
    """Start-up of a process run by ``tf record`` (module docstring)."""
    raw = os.environ.get(ENV_VAR)
    if raw:
        cfg = json.loads(raw)
        if "torch" in sys.modules:  # imported by another start-up hook already
            _on_torch(cfg)
        else:
            sys.meta_path.insert(0, _AfterTorch(cfg))
    _chain_next_sitecustomize()


if __name__ == "sitecustomize":
    install()
