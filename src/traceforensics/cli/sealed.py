"""One file of the analysis cache (``result_cache``) or of its replay (``replay``): a first line of
JSON with the SHA-256 of the rest (and what the caller adds, its format), then the body::

    {"format": "2", "sha256": "9f86d0..."}\\n<body bytes>

Written to a temporary file beside it and renamed into place, so a reader sees the old entry or
the new one, never part of one; read back only when the body matches its SHA-256, so an entry
whose bytes changed since (a damaged disk, a stray edit) is never served. The standard library
alone: the console script's replay reads entries before polars is imported.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
from pathlib import Path
from typing import Any


def write_entry(entry: Path, body: bytes, **head: Any) -> None:
    """Write ``body`` to ``entry`` after its head line (``head`` and the body's SHA-256), by one
    rename. Raises ``OSError`` when it cannot be written (no temporary file is left)."""
    # (imported here: the console script imports ``replay`` before the early scan's fork, and
    # tempfile alone took ~10 ms of that)
    import tempfile

    line = json.dumps({**head, "sha256": hashlib.sha256(body).hexdigest()}).encode() + b"\n"
    entry.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=entry.parent, prefix=".tmp-")
    try:
        with os.fdopen(fd, "wb") as fh:
            fh.write(line)
            fh.write(body)
        os.replace(tmp, entry)
    except OSError:
        with contextlib.suppress(OSError):
            os.unlink(tmp)
        raise


def read_entry(entry: Path) -> tuple[dict[str, Any], memoryview]:
    """``(head, body)`` of an entry ``write_entry`` wrote; ``ValueError`` when its body does
    not match the SHA-256 in its head (``OSError`` when it cannot be read)."""
    data = entry.read_bytes()
    cut = data.index(b"\n")
    head = json.loads(data[:cut])
    body = memoryview(data)[cut + 1 :]
    if not isinstance(head, dict) or head.get("sha256") != hashlib.sha256(body).hexdigest():
        raise ValueError(f"{entry}: not the whole entry that was written")
    return head, body


__all__ = ["read_entry", "write_entry"]
