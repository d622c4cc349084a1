"""Small number formatters shared by the text renderers."""

from __future__ import annotations


def fmt_ns(ns: int | float) -> str:
    """Human duration from ns: 812 ns, 15.3 us, 4.21 ms, 1.204 s."""
    v = float(ns)
    a = abs(v)
    if a < 1_000:
        return f"{v:.0f} ns"
    if a < 1_000_000:
        return f"{v / 1e3:.1f} us"
    if a < 1_000_000_000:
        return f"{v / 1e6:.2f} ms"
    return f"{v / 1e9:.3f} s"


def fmt_pct(x: float) -> str:
    """A share in [0, 1] as a percentage with one decimal."""
    return f"{100.0 * x:.1f}%"


def truncate(text: str, width: int) -> str:
    """Cut ``text`` to ``width`` characters with an ellipsis."""
    return text if len(text) <= width else text[: max(width - 1, 0)] + "…"
