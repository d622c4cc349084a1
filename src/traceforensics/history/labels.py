"""Run labels (``git=abc123``, ``run=baseline``) and the selectors that find runs by them.

A label key starts with a letter or ``_`` and holds letters, digits, ``_``, ``.``, ``-`` (at
most 64 characters); a value is 1 to 256 printable characters. A run has at most one value
per key.

A selector names stored runs: ``KEY=VALUE`` (that label), ``#ID`` (that run id), or a bare
``VALUE`` (any label with that value; a bare integer is first tried as a run id).
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass

from traceforensics.model.errors import InputError

KEY_MAX = 64
VALUE_MAX = 256
_KEY_RE = re.compile(r"[A-Za-z_][A-Za-z0-9_.\-]*")


def check_label(key: str, value: str) -> None:
    """An ``InputError`` (one line) when ``key=value`` breaks the label rules above."""
    shown = repr(f"{key}={value}")  # quoted, control characters escaped: one line
    if not _KEY_RE.fullmatch(key) or len(key) > KEY_MAX:
        raise InputError(
            f"label {shown}: the key must start with a letter or _ and hold letters, digits, "
            f"_ . - (at most {KEY_MAX}); pass KEY=VALUE, e.g. git=abc123"
        )
    if not value or len(value) > VALUE_MAX or not value.isprintable():
        raise InputError(
            f"label {shown}: the value must be 1 to {VALUE_MAX} printable characters; pass "
            "KEY=VALUE, e.g. run=baseline"
        )


def parse_label(text: str) -> tuple[str, str]:
    """``KEY=VALUE`` split at the first ``=`` and checked."""
    key, sep, value = text.partition("=")
    if not sep:
        raise InputError(f"label {text!r}: no '='; pass KEY=VALUE, e.g. git=abc123 or run=baseline")
    check_label(key.strip(), value.strip())
    return key.strip(), value.strip()


def parse_labels(texts: Iterable[str]) -> dict[str, str]:
    """Several ``KEY=VALUE`` texts as one mapping; a key given twice is an error (which value
    was meant cannot be told)."""
    out: dict[str, str] = {}
    for text in texts:
        key, value = parse_label(text)
        if key in out and out[key] != value:
            raise InputError(
                f"label {key} given twice ({out[key]!r} and {value!r}); give each key once"
            )
        out[key] = value
    return out


def checked(labels: Mapping[str, str]) -> dict[str, str]:
    """``labels`` as a plain dict after checking every pair (library callers)."""
    for key, value in labels.items():
        check_label(key, value)
    return dict(labels)


@dataclass(frozen=True)
class Selector:
    """What a selector names: a run id, a label (``key`` and ``value``), or any label's
    ``value`` (``key`` None). ``run_id`` with ``value`` set: a bare integer (id first)."""

    text: str
    run_id: int | None = None
    key: str | None = None
    value: str | None = None

    def describe(self) -> str:
        """How messages name what was looked for."""
        if self.key is not None:
            return f"labelled {self.key}={self.value}"
        if self.value is None:
            return f"with id {self.run_id}"
        if self.run_id is not None:
            return f"with id {self.run_id} or a label valued {self.value}"
        return f"with a label valued {self.value}"


def parse_selector(text: str) -> Selector:
    """The selector of ``text`` (rules in the module docstring)."""
    raw = text.strip()
    if raw.startswith("#"):
        if not raw[1:].isdigit():
            raise InputError(f"run {text!r}: # must be followed by a run id, e.g. #12")
        return Selector(raw, run_id=int(raw[1:]))
    if "=" in raw:
        key, value = parse_label(raw)
        return Selector(raw, key=key, value=value)
    if not raw or not raw.isprintable():
        raise InputError(
            f"run {text!r}: empty; pass KEY=VALUE, a label value or #ID, e.g. run=baseline"
        )
    return Selector(raw, run_id=int(raw) if raw.isdigit() else None, value=raw)
