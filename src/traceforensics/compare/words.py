"""How the diff's numbers are written in the verdict, the rule messages and every renderer:
a before -> after pair in one unit (``47.28 → 0.46 ms/step``), signed changes with a true minus
sign (``−99%``, ``+10 142%``: thousands separated by a space), MFU in percent."""

from __future__ import annotations

from traceforensics.compare.deltas import FigureDelta
from traceforensics.model.units import NS_PER_MS, NS_PER_S, NS_PER_US

MINUS = "\u2212"
#: (ns per unit, unit, decimals), largest first: a pair is written in the unit of its larger value.
_TIME_UNITS = ((NS_PER_S, "s", 3), (NS_PER_MS, "ms", 2), (NS_PER_US, "µs", 1), (1, "ns", 0))


def _time_unit(*values: float | None) -> tuple[int, str, int]:
    big = max((abs(v) for v in values if v is not None), default=0.0)
    for scale, name, decimals in _TIME_UNITS:
        if big >= scale:
            return scale, name, decimals
    return _TIME_UNITS[-2]  # all zero: ms reads best beside the other figures


def _signed(text: str, negative: bool, plus: bool) -> str:
    return (MINUS if negative else ("+" if plus else "")) + text


def fmt_pct(p: float | None, sign: bool = True) -> str:
    """A percent number: ``+10 142%``, ``−27.6%``, ``+4.2%`` (one decimal below 100)."""
    if p is None:
        return "n/a"
    digits = f"{abs(p):,.0f}" if abs(p) >= 100 else f"{abs(p):.1f}"
    return _signed(digits.replace(",", " ") + "%", p < 0, sign and p > 0)


def fmt_value(v: float | None, unit: str) -> str:
    """One value in its unit: ``126.68 ms``, ``0.46 ms/step``, ``37.1%`` (MFU)."""
    return fmt_pair(None, v, unit)


def fmt_cells(before: float | None, after: float | None, unit: str) -> tuple[str, str]:
    """Both values in one unit for a table row (``47.28 ms``, ``0.46 ms``; ``-`` when
    unknown); fractions in percent."""
    if unit == "fraction":
        b, a = ("-" if v is None else f"{100 * v:.1f}%" for v in (before, after))
        return b, a
    scale, name, decimals = _time_unit(before, after)
    b, a = (
        "-" if v is None else f"{v / scale:.{decimals}f} {name}".replace("-", MINUS)
        for v in (before, after)
    )
    return b, a


def fmt_pair(before: float | None, after: float | None, unit: str) -> str:
    """``b → a unit`` in one unit (times: the larger value's, ``/step`` for per-step figures;
    fractions: percent); just ``a`` without ``before``; ``?`` for an unknown value."""
    if unit == "fraction":
        shown = [f"{100 * v:.1f}%" if v is not None else "?" for v in (before, after)]
        return shown[1] if before is None else " → ".join(shown)
    scale, name, decimals = _time_unit(before, after)
    suffix = name + ("/step" if unit.endswith("/step") else "")
    nums = [
        "?" if v is None else f"{v / scale:.{decimals}f}".replace("-", MINUS)
        for v in (before, after)
    ]
    body = nums[1] if before is None else f"{nums[0]} → {nums[1]}"
    return f"{body} {suffix}"


def fmt_delta(d: FigureDelta) -> str:
    """The signed change in the figure's unit: ``−48.18 ms``, ``+7.2 pp`` (MFU), ``n/a``."""
    delta = d.delta
    if delta is None:
        return "n/a"
    if d.unit == "fraction":
        return _signed(f"{abs(100 * delta):.1f} pp", delta < 0, delta > 0)
    scale, name, decimals = _time_unit(d.before, d.after)
    suffix = name + ("/step" if d.unit.endswith("/step") else "")
    return _signed(f"{abs(delta) / scale:.{decimals}f} {suffix}", delta < 0, delta > 0)


def fmt_change(d: FigureDelta) -> str:
    """``−99.0% (47.28 → 0.46 ms/step)``; a change from zero reads ``new (0 → 1.37 ms/step)``."""
    pct = d.delta_pct
    if pct is None:
        lead = "new" if (d.before == 0 and (d.after or 0) > 0) else "n/a"
        lead = "unchanged" if d.before == 0 and d.after == 0 else lead
    else:
        lead = fmt_pct(pct)
    return f"{lead} ({fmt_pair(d.before, d.after, d.unit)})"
