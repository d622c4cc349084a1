"""The exception tree.

Everything the tool raises on purpose derives from ``TraceForensicsError``. ``InputError`` and its
children mean the user's input is at fault: the CLI prints ``str(err)`` as one line and exits 2.
Messages are written as "<file>: <what is wrong>; <what to do>".
"""

from __future__ import annotations


class TraceForensicsError(Exception):
    """Base of every deliberate traceforensics error."""


class InputError(TraceForensicsError):
    """The input cannot be used (missing, unreadable, wrong format). CLI exit code 2."""


class OptionError(InputError):
    """An option is out of range, or an option is the remedy. ``option`` is its library name
    (``bin_ms``, ``columns``): library messages never name a CLI flag; the CLI adds its own
    (``--bin-ms``)."""

    def __init__(self, message: str, option: str) -> None:
        super().__init__(message)
        self.option = option


class UnsupportedFormatError(InputError):
    """The file is readable but is not a trace format we know."""


class CorruptTraceError(InputError):
    """The file claims a known format but its content is broken (truncated, invalid)."""


class ToolMissingError(InputError):
    """An external tool needed for this input (e.g. ``nsys``) is not installed."""


class SchemaError(TraceForensicsError):
    """An event table violates the unified schema (a bug in an ingester, or a bad saved file)."""
