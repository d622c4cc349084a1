"""Small number formatters shared by the text renderers (the duration and share formats are
the model's, so analysis titles read the same)."""

from __future__ import annotations

import re

from traceforensics.model.errors import escaped_char
from traceforensics.model.units import fmt_bytes, fmt_ns, fmt_pct, fmt_rate

__all__ = ["fmt_bytes", "fmt_ns", "fmt_pct", "fmt_rate", "one_line", "same_text", "truncate"]


def truncate(text: str, width: int) -> str:
    """Cut ``text`` to ``width`` characters with an ellipsis."""
    return text if len(text) <= width else text[: max(width - 1, 0)] + "…"


def one_line(text: str) -> str:
    """``text`` with control characters escaped (``\\n``, ``\\r``, ``\\t``, ``\\x1b``, ...), so a
    file name holding a newline cannot split the one-line error or pass for another file.
    Also escaped: Unicode line/paragraph separators, format characters (bidi overrides such as
    U+202E could visually reorder the line) and lone surrogates (undecodable name bytes)."""
    named = {"\n": "\\n", "\r": "\\r", "\t": "\\t"}
    return "".join(ch if ch.isprintable() or ch == " " else _escaped(ch, named) for ch in text)


def _escaped(ch: str, named: dict[str, str]) -> str:
    # (a name byte that is not UTF-8 shows as the byte, \xe9: ``model.errors.escaped_char``)
    return named[ch] if ch in named else escaped_char(ch)


#: A measured figure inside a sentence (``92.34 ms``, ``77.0%``, ``12.0 GB/s``): two ranks'
#: remedies that differ only in these say the same thing.
_FIGURE = re.compile(r"[~+-]?\d[\d,]*(?:\.\d+)?\s*(?:ns|µs|us|ms|s|%|[kMGT]?B(?:/s)?)(?![\w])")


def same_text(text: str) -> str:
    """``text`` with its measured figures blanked (``_FIGURE``): the key that groups the same
    advice given to several ranks with their own figures (rank numbers are kept)."""
    return _FIGURE.sub("#", text)
