"""Types of the compiled column scanner (``_colscan.c``; see ``colscan``)."""

from typing import Any

def array_end(text: bytes | bytearray | memoryview) -> int | None: ...
def scan(
    text: bytes | memoryview,
    coded_keys: tuple[str, ...],
    number_keys: tuple[str, ...],
    args_key: str,
    arg_number_keys: tuple[str, ...],
    arg_value_keys: tuple[str, ...],
    kept_keys: tuple[str, ...],
) -> (
    tuple[
        int,
        list[Any],
        bytes,
        bytes,
        bytes,
        bytes,
        bytes,
        bytes,
        bytes,
        bytes,
        bytes,
        bytes,
        list[str],
    ]
    | None
): ...
