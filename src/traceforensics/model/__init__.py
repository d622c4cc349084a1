"""The unified event table, its schema and the session that holds it. Imports nothing of ours."""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any, Final

from traceforensics.model.errors import (
    CorruptTraceError,
    InputError,
    OptionError,
    SchemaError,
    ToolMissingError,
    TraceForensicsError,
    UnsupportedFormatError,
)

if TYPE_CHECKING:
    from traceforensics.model.schema import ARGS_SCHEMA, BUSY_KINDS, EVENT_SCHEMA, KINDS
    from traceforensics.model.session import DeviceInfo, InputInfo, TraceMeta, TraceSession

#: Names read from their module on first use (``__getattr__``): the package imports no polars,
#: so a module of ``ingest`` that needs only the errors does not import it either.
_LAZY: Final = {
    **dict.fromkeys(("ARGS_SCHEMA", "BUSY_KINDS", "EVENT_SCHEMA", "KINDS"), "schema"),
    **dict.fromkeys(("DeviceInfo", "InputInfo", "TraceMeta", "TraceSession"), "session"),
}


def __getattr__(name: str) -> Any:
    module = _LAZY.get(name)
    if module is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    return getattr(importlib.import_module(f"{__name__}.{module}"), name)


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
