"""traceforensics: when the GPU was idle, who was it waiting for?

Library first: ``traceforensics.load(path)`` returns a ``TraceSession``; analyses in
``traceforensics.analysis`` take a session and return typed results.
"""

from traceforensics.model import TraceSession

__version__ = "0.1.0"


def load(path: str, *, use_cache: bool = False) -> TraceSession:
    """Load a trace file or directory of rank files into a ``TraceSession``."""
    from traceforensics.ingest import load_path

    return load_path(path, use_cache=use_cache)


__all__ = ["TraceSession", "__version__", "load"]
