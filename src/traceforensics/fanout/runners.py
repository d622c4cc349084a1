"""Where the rank tasks run: here one at a time, in a pool of processes, or on a Dask cluster.

Each runner maps a function over tasks and yields the results in task order, so the parent
holds one finished part per rank and nothing else:

- ``jobs=1``: in this process, one rank after the other (the parent's peak is one rank's);
- ``jobs=N``: ``N`` worker processes started with ``spawn`` (the CLI's main module is
  import-safe; a script must guard its entry with ``if __name__ == "__main__":``);
- ``dask="local"``: a ``distributed.LocalCluster`` of ``jobs`` single-threaded worker
  processes; ``dask=ADDRESS``: the scheduler at that address (the workers must see the rank
  files at the same absolute paths, and have traceforensics installed). ``distributed`` is
  the optional extra ``traceforensics[dask]``, imported only here.

The functions sent to workers are module-level (``worker.analyse_rank``, ``worker.session_start``)
so that they pickle by name. Local workers start with ``POLARS_MAX_THREADS`` = CPUs / jobs
(unless it is set): ``jobs`` processes each running polars on every core would fight over
them; and polars' allocator keeps freed pages for 1 s (``WORKER_ALLOCATOR_CONF``) instead of
returning them at once as ``tf`` does: a worker reuses them for the next rank (a rank's
working set each time; ~8 % less time per rank on the ResNet-50 trace, mostly system time).
"""

from __future__ import annotations

import logging
import os
from collections.abc import Callable, Iterator
from concurrent.futures import Executor, ProcessPoolExecutor
from concurrent.futures.process import BrokenProcessPool
from contextlib import AbstractContextManager, ExitStack, contextmanager
from multiprocessing import get_context
from typing import Any, TypeVar

from traceforensics._allocator import TF_ALLOCATOR_CONF
from traceforensics.model.errors import OptionError, TraceForensicsError

T = TypeVar("T")
R = TypeVar("R")

#: polars' jemalloc in rank workers: freed pages kept 1 s for the next rank (tf's own setting
#: is ``_allocator.TF_ALLOCATOR_CONF``).
WORKER_ALLOCATOR_CONF = "dirty_decay_ms:1000,muzzy_decay_ms:1000"
#: The scheduler address that starts a local cluster instead.
LOCAL = "local"
INSTALL_HINT = "pip install 'traceforensics[dask]'"


def default_jobs() -> int:
    """The CPUs this process may run on."""
    try:
        return max(len(os.sched_getaffinity(0)), 1)
    except AttributeError:  # not on Linux
        return max(os.cpu_count() or 1, 1)


@contextmanager
def worker_env(jobs: int) -> Iterator[None]:
    """Inside the block, processes start with the settings of rank workers (module
    docstring); this process's own are unchanged (polars and its allocator read them once)."""
    keys = ("POLARS_MAX_THREADS", "_RJEM_MALLOC_CONF")
    saved = {k: os.environ.get(k) for k in keys}
    os.environ.setdefault("POLARS_MAX_THREADS", str(max(default_jobs() // jobs, 1)))
    if saved["_RJEM_MALLOC_CONF"] == TF_ALLOCATOR_CONF:  # tf's setting, not the user's
        os.environ["_RJEM_MALLOC_CONF"] = WORKER_ALLOCATOR_CONF
    try:
        yield
    finally:
        for k, v in saved.items():
            if v is None:
                os.environ.pop(k, None)
            else:
                os.environ[k] = v


class Runner(AbstractContextManager["Runner"]):
    """Runs ``fn`` over tasks in this process, one at a time."""

    remote = False

    def map(self, fn: Callable[[T], R], items: list[T]) -> Iterator[R]:
        for item in items:
            yield fn(item)

    def __exit__(self, *exc: object) -> None:
        return None


class PoolRunner(Runner):
    """``jobs`` worker processes (spawned on first use)."""

    def __init__(self, jobs: int) -> None:
        self.jobs = jobs
        self._pool: Executor | None = None

    def map(self, fn: Callable[[T], R], items: list[T]) -> Iterator[R]:
        if self._pool is None:
            ctx = get_context("spawn")
            self._pool = ProcessPoolExecutor(max_workers=min(self.jobs, len(items)), mp_context=ctx)
        with worker_env(self.jobs):  # the pool starts its processes as tasks come
            futures = [self._pool.submit(fn, item) for item in items]
        try:
            for f in futures:
                yield f.result()
        except BrokenProcessPool as exc:
            raise TraceForensicsError(
                "a rank worker process ended unexpectedly (out of memory?); analyse the ranks "
                "with fewer jobs"
            ) from exc
        finally:
            for f in futures:  # the parent stopped (an error): drop what has not started
                f.cancel()

    def __exit__(self, *exc: object) -> None:
        if self._pool is not None:
            self._pool.shutdown(wait=True, cancel_futures=True)
            self._pool = None


class DaskRunner(Runner):
    """Tasks on a Dask cluster: a local one (``address`` ``"local"``, ``jobs`` workers) or the
    scheduler at ``address``."""

    def __init__(self, address: str, jobs: int) -> None:
        self.remote = address != LOCAL
        self._stack = ExitStack()
        distributed = _distributed()
        try:
            if self.remote:
                self.client: Any = self._stack.enter_context(
                    distributed.Client(address, timeout="20s", set_as_default=False)
                )
            else:
                with worker_env(jobs):
                    cluster = self._stack.enter_context(
                        distributed.LocalCluster(
                            n_workers=jobs,
                            threads_per_worker=1,
                            processes=True,
                            dashboard_address=None,
                            silence_logs=logging.ERROR,
                        )
                    )
                self.client = self._stack.enter_context(
                    distributed.Client(cluster, set_as_default=False)
                )
        except (OSError, TimeoutError, ValueError) as exc:
            self._stack.close()
            raise OptionError(
                f"dask {address!r}: cannot reach the scheduler ({exc}); pass its address "
                "(tcp://host:8786) or 'local'",
                "dask",
            ) from exc

    def map(self, fn: Callable[[T], R], items: list[T]) -> Iterator[R]:
        futures = self.client.map(fn, items, pure=False)
        try:
            for f in futures:
                yield f.result()
        finally:
            self.client.cancel(futures)

    def __exit__(self, *exc: object) -> None:
        self._stack.close()


def _distributed() -> Any:
    """The ``distributed`` module, or an ``OptionError`` saying how to install it."""
    try:
        import distributed
    except ImportError as exc:
        raise OptionError(
            f"dask: the Dask scheduler client (distributed) is not installed; install the extra: "
            f"{INSTALL_HINT}",
            "dask",
        ) from exc
    return distributed


def runner(jobs: int | None, dask: str | None, tasks: int) -> Runner:
    """The runner for ``tasks`` rank tasks (module docstring); ``jobs`` None: one per CPU."""
    n = default_jobs() if jobs is None else jobs
    if n < 1:
        raise OptionError(f"jobs {n}: must be 1 or more; pass 1 or more", "jobs")
    if dask is not None:
        return DaskRunner(dask, n)
    if n == 1 or tasks <= 1:
        return Runner()
    return PoolRunner(n)
