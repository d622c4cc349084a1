"""The exception tree.

Everything the tool raises on purpose derives from ``TraceForensicsError``. ``InputError`` and its
children mean the user's input is at fault: the CLI prints ``str(err)`` as one line and exits 2.
Messages are written as "<file>: <what is wrong>; <what to do>".
"""

from __future__ import annotations

import codecs


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


class OutOfMemoryError(InputError):
    """The input is sound but does not fit in the memory this process may use (the machine's,
    its container's cgroup limit, its address-space limit). CLI exit code 2: the remedy is the
    user's, and the trace must never be called malformed for it."""


#: What to do when an input does not fit in memory: the pre-check's refusal and a load that
#: ran out of memory say the same.
MEMORY_ADVICE = (
    "analyse a part of it (tf analyze --steps, --from/--to), record fewer steps or one rank "
    "per file, or use a machine (or container limit) with more memory"
)


def not_enough_memory(path: object, detail: str) -> OutOfMemoryError:
    """The one-line refusal of an input that does not fit: ``detail`` says how much."""
    return OutOfMemoryError(f"{path}: not enough memory ({detail}); {MEMORY_ADVICE}")


#: Codec error handler for text written to a terminal or a report file: a file-name byte that
#: is not UTF-8 (a lone surrogate U+DC80..U+DCFF, Python's ``surrogateescape``) is written as
#: the byte, ``\xe9``, as ``ls -b`` shows it (``backslashreplace`` wrote ``\udce9``); any other
#: character the encoding cannot hold as ``backslashreplace`` writes it.
NAME_BYTES = "tf-namebytes"


def escaped_char(ch: str) -> str:
    """The escape of one character: ``\\xNN`` for a surrogate-escaped byte (``NAME_BYTES``),
    else ``\\xNN``, ``\\uNNNN`` or ``\\UNNNNNNNN`` by its code point."""
    code = ord(ch)
    if 0xDC80 <= code <= 0xDCFF:
        return f"\\x{code - 0xDC00:02x}"
    if code < 0x100:
        return f"\\x{code:02x}"
    return f"\\u{code:04x}" if code < 0x10000 else f"\\U{code:08x}"


def _name_bytes(exc: UnicodeError) -> tuple[str, int]:
    if not isinstance(exc, UnicodeEncodeError):
        raise exc
    return "".join(escaped_char(ch) for ch in exc.object[exc.start : exc.end]), exc.end


codecs.register_error(NAME_BYTES, _name_bytes)
