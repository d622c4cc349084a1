"""Public re-export of the exception tree (defined in ``model.errors`` so ``model`` stays leaf)."""

from traceforensics.model.errors import (
    CorruptTraceError,
    InputError,
    SchemaError,
    ToolMissingError,
    TraceForensicsError,
    UnsupportedFormatError,
)

__all__ = [
    "CorruptTraceError",
    "InputError",
    "SchemaError",
    "ToolMissingError",
    "TraceForensicsError",
    "UnsupportedFormatError",
]
