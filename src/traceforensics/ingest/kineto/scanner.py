"""The keys the decoders read, and the compiled scanner's raw call (``_colscan.c``).

Nothing here imports numpy or polars: the early scan (``early``) reads a file with the
compiled scanner while the interpreter is still importing those. ``colscan`` turns a raw
result into arrays (``Scanned``). ``TRACEFORENSICS_PURE_DECODE=1`` turns the scanner off
(every file is then read by the generic path; tests compare both paths).
"""

from __future__ import annotations

import os
from typing import Any, Final

from traceforensics.ingest.kineto import categories as cats

_colscan: Any
try:
    from traceforensics.ingest.kineto import _colscan
except ImportError:  # built without a C compiler: the generic reader reads every file
    _colscan = None

#: Whether the compiled scanner was built with this install.
AVAILABLE: Final = _colscan is not None
_OFF: Final = "TRACEFORENSICS_PURE_DECODE"

#: Args keys the rules read: name -> JSON key.
RULE_FIELDS: Final[dict[str, str]] = {
    "external_id": "External id",
    "external_id_lower": "external id",
    "correlation": "correlation",
    "device": "device",
    "stream": "stream",
    "bytes": "bytes",
    "kind": "kind",
    "grid": "grid",
    "block": "block",
    "size": "size",
    "labels": "labels",
    "name": "name",
}


#: Top-level keys read as codes into ``values``, in the order of ``Scanned.codes``' columns.
CODED_KEYS: Final = ("ph", "cat", "name", "pid", "tid", "id")
#: Number slots, in the order of ``Scanned.tags``' columns: top-level keys, then args keys.
NUMBER_KEYS: Final = ("ts", "dur")
ARG_NUMBER_KEYS: Final = (
    RULE_FIELDS["external_id"],
    RULE_FIELDS["external_id_lower"],
    RULE_FIELDS["correlation"],
)
#: The other args keys the rules read, as (event, key, value code) triples.
ARG_VALUE_KEYS: Final = tuple(k for k in RULE_FIELDS.values() if k not in ARG_NUMBER_KEYS)
#: The kept args keys, in the order ``Scanned.kept_keys`` indexes: sorted by key.
KEPT_KEYS: Final = tuple(sorted(cats.KEPT_ARG_KEYS))

#: What ``_colscan.scan`` returns: ``(n, values, codes, tags, numbers, has_args, arg_events,
#: arg_keys, arg_values, kept_events, kept_keys, kept_values, kept_texts)``, the arrays as
#: bytes (``colscan.scan`` reads them as numpy arrays).
RawScan = tuple[
    int, list[Any], bytes, bytes, bytes, bytes, bytes, bytes, bytes, bytes, bytes, bytes, list[str]
]


def enabled() -> bool:
    """Whether chunks go to the compiled scanner (built, and not turned off)."""
    return AVAILABLE and os.environ.get(_OFF, "") in ("", "0")


def scan_raw(text: bytes | memoryview) -> RawScan | None:
    """The compiled scanner's result for one JSON array text, or None when the scanner is off
    or the text is not its clean case. No other thread may write into ``text`` during the call
    (the scan reads it without the GIL)."""
    if _colscan is None or not enabled():
        return None
    out: RawScan | None = _colscan.scan(
        text, CODED_KEYS, NUMBER_KEYS, "args", ARG_NUMBER_KEYS, ARG_VALUE_KEYS, KEPT_KEYS
    )
    return out


def array_end(text: bytes | bytearray | memoryview) -> int | None:
    """The offset just past the JSON array at the start of ``text`` (white space before it
    skipped), by the compiled scanner's rules; None when the scanner is off or it is not such
    an array (the generic reader then judges the text)."""
    if _colscan is None or not enabled():
        return None
    end: int | None = _colscan.array_end(text)
    return end
