"""Types of the compiled column scanner (``_colscan.c``; see ``colscan``)."""

from typing import Any

def scan(
    text: bytes,
    event_keys: tuple[str, ...],
    args_key: str,
    rule_keys: tuple[str, ...],
    kept_keys: tuple[str, ...],
) -> tuple[int, tuple[list[Any], ...], list[Any], bytes, bytes, bytes, list[str]] | None: ...
