"""rocprof Chrome-trace ingester: ``load_rocprof(path) -> TraceSession``.

Reads the Chrome JSON of AMD's rocprof: v1's ``results.json`` (``rocprof --hip-trace``,
``--hsa-trace``, ``--sys-trace``: ``tblextr.py``) and v2's ``--plugin json`` output. Kernels and
copies come from the GPU and COPY processes, HIP/HSA calls become ``cuda_api`` launch rows
linked to their GPU ops (rules: ``load``, ``lanes``, ``flows``, ``meta``, ``decode``;
docs/event-table.md). rocprofv3's own JSON (``rocprofiler-sdk-tool``) is another format,
refused by ``ingest.detect``.

The package imports nothing heavy: ``load_rocprof`` imports its reader (polars) on first call.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from pathlib import Path

    from traceforensics.model.session import TraceSession


def load_rocprof(path: Path) -> TraceSession:
    """``load.load_rocprof``: one rocprof Chrome trace as a session."""
    from traceforensics.ingest.rocprof.load import load_rocprof as load

    return load(path)


__all__ = ["load_rocprof"]
