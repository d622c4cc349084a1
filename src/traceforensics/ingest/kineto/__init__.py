"""PyTorch Profiler (Kineto) Chrome-trace ingester: ``load_kineto(paths) -> TraceSession``.

Reads ``.json`` and ``.json.gz`` traces of every vintage (PyTorch 1.8 to 2.x, CUDA and ROCm);
several paths are the rank files of one job and are concatenated with a ``rank`` column.

Rules (details in the submodules):
- timestamps: exact integer ns; ints ×1000, floats by their shortest repr, ``baseTimeNanoseconds``
  added when present (``timeconv``); the clock is wall-clock epoch ns when the base is present
  or the values are absolute epoch µs (then ``meta.clock_base_ns = 0``, ``clock_is_wall``);
- kind from ``cat`` (and ``ph`` for instants), never from ``pid`` (``categories``);
- GPU device from ``args.device``, else ``GPU n`` metadata labels, else pid; stream from
  ``args.stream`` else the tid (``"stream 7"`` in 1.8/1.9) (``gpu``);
- ``correlation`` from ``args.correlation``, else launch flows (``flows``);
- rank from ``distributedInfo.rank``, else the file name, else input order (``meta``).

Rows keep each file's event order (files concatenated in input order); ``event_id`` is the row's
position counted across files, and the ``args`` side table is keyed by it. Speed and memory:
the file is streamed (chunked gunzip) and its event list read a chunk at a time by the compiled
scanner (``text``, ``colscan``), the one reader of valid JSON; each chunk is reduced to numpy
arrays before the next is read (``decode``), so memory holds one chunk plus the arrays, not the
file. Everything else (the Chrome array format, NaN literals, cut-off or damaged JSON, no
compiler at install) is read whole by the generic reader (``reader``) and made the same coded
columns (``generic``): one decoder, one set of rules (``rules``, in polars). The cyclic GC is
paused during a load (the decoded objects have no cycles).

The package itself imports nothing heavy: ``load_kineto`` imports its reader (``load``, with
polars and numpy) on first call, so the early scan (``early``) can read and decode a file while
the command is still importing them.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from traceforensics.ingest.detect import KINETO_SUFFIXES, is_rocprof
from traceforensics.model.errors import InputError

if TYPE_CHECKING:
    from collections.abc import Sequence
    from pathlib import Path

    from traceforensics.model.session import TraceSession


def load_kineto(paths: Sequence[Path], *, skip_non_traces: bool = False) -> TraceSession:
    """``load.load_kineto``: one Kineto trace, or several rank files of one job, in a session."""
    from traceforensics.ingest.kineto.load import load_kineto as load

    return load(paths, skip_non_traces=skip_non_traces)


def rank_files(directory: Path, files: list[Path]) -> tuple[list[Path], list[str]]:
    """The rank files of a directory (``ingest.readers``): every ``.json``/``.json.gz`` (the
    loader leaves out those that are not traces); a directory of rocprof traces is refused
    here, not misread (issue 43)."""
    kineto = [p for p in files if p.name.endswith(KINETO_SUFFIXES)]
    rocprof = [p.name for p in kineto if is_rocprof(p)]
    if rocprof:
        raise InputError(
            f"{directory}: {len(rocprof)} rocprof trace(s) ({', '.join(rocprof[:3])}); a "
            "directory of rocprof traces is not read as one job yet: pass each file alone"
        )
    return kineto, []


__all__ = ["load_kineto", "rank_files"]
