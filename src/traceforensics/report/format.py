"""Small number formatters shared by the text renderers (the duration and share formats are
the model's, so analysis titles read the same)."""

from __future__ import annotations

from traceforensics.model.units import fmt_bytes, fmt_ns, fmt_pct, fmt_rate

__all__ = ["fmt_bytes", "fmt_ns", "fmt_pct", "fmt_rate", "truncate"]


def truncate(text: str, width: int) -> str:
    """Cut ``text`` to ``width`` characters with an ellipsis."""
    return text if len(text) <= width else text[: max(width - 1, 0)] + "…"
