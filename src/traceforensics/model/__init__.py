"""The unified event table, its schema and the session that holds it. Imports nothing of ours."""

from traceforensics.model.errors import (
    CorruptTraceError,
    InputError,
    OptionError,
    SchemaError,
    ToolMissingError,
    TraceForensicsError,
    UnsupportedFormatError,
)
from traceforensics.model.schema import ARGS_SCHEMA, BUSY_KINDS, EVENT_SCHEMA, KINDS
from traceforensics.model.session import DeviceInfo, InputInfo, TraceMeta, TraceSession

__all__ = [
    "ARGS_SCHEMA",
    "BUSY_KINDS",
    "EVENT_SCHEMA",
    "KINDS",
    "CorruptTraceError",
    "DeviceInfo",
    "InputError",
    "InputInfo",
    "OptionError",
    "SchemaError",
    "ToolMissingError",
    "TraceForensicsError",
    "TraceMeta",
    "TraceSession",
    "UnsupportedFormatError",
]
