"""Kineto microsecond values (``ts``, ``dur``) to exact integer nanoseconds.

Kineto writes ``ts``/``dur`` in microseconds: integers up to PyTorch ~2.2, then floats with three
decimals (ns precision), relative to ``baseTimeNanoseconds`` since kineto #910 and absolute epoch
µs in some mid-2024 traces. JSON numbers reach us as Python ``int`` or ``float`` (IEEE double).

Rule applied (one value ``v`` in µs -> ns):

- ``int``: ``v * 1000`` exactly.
- ``float``: the exact decimal value of the double's *shortest round-trip repr* (Python ``repr``)
  times 1000, rounded half-to-even to an integer when the repr has more than three decimals.
  Example: ``1712195495519695.8`` µs -> ``1712195495519695800`` ns.
- a numeric string (seen in non-Kineto Chrome traces) is read the same way as its text.

Why not just ``round(v * 1000.0)``: at absolute-epoch magnitudes (1.7e15 µs) one ulp of a double
is 0.25 µs, so the double ``1712195495519695.75`` stands for the text ``...695.8``; multiplying
gives ...695750 ns (and the product itself is rounded to 256 ns steps), 50 ns off the written
value. Below ``FAST_LIMIT_US = 2**43`` µs (~102 days, which covers every relative timestamp
because ``baseTimeNanoseconds`` is floored to ~91-day steps) one ulp is at most 2**-10 < 0.001,
so at most one three-decimal number lies within half an ulp of the double. Therefore when
``N = rint(v * 1000)`` satisfies ``float(N) / 1000 == v`` (IEEE division is correctly rounded),
``N / 1000`` is the unique ≤3-decimal value that reads back as ``v``, which is exactly the value
of its shortest repr. That vectorised check runs on the whole column in numpy. Absolute-epoch
values (2**43 to 2**53 µs) get the shortest repr computed in int64 arithmetic on the double's
mantissa (``_shortest_ns_mid``); the rest (sub-ns digits, beyond 2**53) take the per-value
``repr`` path. Between 2**43 and 2**53/1000 µs the ``rint`` shortcut can pick a 3-decimal
value where the shortest repr has 2 decimals, which is why its limit is 2**43 and not
2**53/1000 (tests/test_kineto_variants.py finds such a counterexample and checks both paths
against ``Decimal(repr(v))``).
"""

from __future__ import annotations

from decimal import ROUND_HALF_EVEN, Decimal, InvalidOperation

import numpy as np
import numpy.typing as npt

from traceforensics.ingest.kineto.colscan import FLOAT, INT, OTHER

FAST_LIMIT_US = float(2**43)
#: Up to here (2**53 µs, year 2255) doubles are converted by ``_shortest_ns_mid``.
MID_LIMIT_US = float(2**53)
_INT64_US_LIMIT = (2**63 - 1) // 1000
_THOUSAND = Decimal(1000)


class TimeValueError(ValueError):
    """A ``ts``/``dur`` value that is not a finite number of microseconds."""


def text_us_to_ns(text: str) -> int:
    """Exact ns of a decimal µs text, half-to-even beyond 1 ns. Raises ``TimeValueError``."""
    try:
        dec = Decimal(text.strip())
    except InvalidOperation as exc:
        raise TimeValueError(f"not a number: {text!r}") from exc
    if not dec.is_finite():
        raise TimeValueError(f"not a finite number: {text!r}")
    return int((dec * _THOUSAND).to_integral_value(rounding=ROUND_HALF_EVEN))


def float_us_to_ns(value: float) -> int:
    """Exact ns of a double in µs by the shortest-repr rule (see module docstring)."""
    text = repr(value)
    if "e" in text or "n" in text:  # exponent form, inf or nan: let Decimal decide
        return text_us_to_ns(text)
    neg = text.startswith("-")
    whole, _, frac = text.lstrip("-").partition(".")
    if len(frac) > 3:
        return text_us_to_ns(text)
    ns = int(whole) * 1000 + int(frac.ljust(3, "0"))
    return -ns if neg else ns


def _scalar_us_to_ns(value: object) -> int:
    if type(value) is int:
        return value * 1000
    if isinstance(value, float):
        return float_us_to_ns(value)
    if isinstance(value, str):
        return text_us_to_ns(value)
    if isinstance(value, int) and not isinstance(value, bool):
        return int(value) * 1000
    raise TimeValueError(f"not a number: {value!r}")


def _shortest_ns_mid(values: npt.NDArray[np.float64]) -> npt.NDArray[np.int64]:
    """Shortest-repr ns of doubles with ``2**43 <= |v| < 2**53`` µs in integer arithmetic.

    ``|v| = M / 2**s`` exactly (M: 53-bit integer, 0 <= s <= 9). For k = 0..3 decimals the
    nearest k-decimal value is ``c / 10**k`` with ``c = round(M * 10**k / 2**s)`` (ties to even,
    as CPython's repr does); it reads back as ``v`` iff ``2 * |c * 2**s - M * 10**k| < 10**k``
    (``<=`` when M is even: round-half-even reads the midpoint back). The repr is the smallest
    such k. ``M * 1000 < 2**63``, so int64 is exact. Always succeeds by k = 3 since the
    read-back interval (one ulp >= 2**-9 wide) holds a multiple of 0.001.
    """
    mant, exp = np.frexp(np.abs(values))
    big_m = (mant * 2.0**53).astype(np.int64)
    shift = (53 - exp).astype(np.int64)
    result = np.zeros(values.shape, dtype=np.int64)
    done = np.zeros(values.shape, dtype=bool)
    for k in range(4):
        scale = np.int64(10**k)
        num = big_m * scale
        one = np.left_shift(np.int64(1), shift)
        floor = np.right_shift(num, shift)
        rem = num - np.left_shift(floor, shift)
        twice = 2 * rem
        up = (twice > one) | ((twice == one) & (floor % 2 == 1))
        cand = floor + up
        diff = np.abs(np.left_shift(cand, shift) - num)
        ok = (2 * diff < scale) | ((2 * diff == scale) & (big_m % 2 == 0))
        take = ok & ~done
        result[take] = cand[take] * np.int64(10 ** (3 - k))
        done |= ok
    return np.where(values < 0, -result, result)


def floats_us_to_ns(values: npt.NDArray[np.float64]) -> npt.NDArray[np.int64]:
    """Vectorised shortest-repr conversion of a float64 µs array (see module docstring)."""
    if not np.all(np.isfinite(values)):
        raise TimeValueError("a timestamp is NaN or infinite")
    magnitude = np.abs(values)
    with np.errstate(over="ignore"):  # |µs| > 1.8e305 overflows here; the slow path refuses it
        scaled = np.rint(values * 1000.0)
    fast = (magnitude < FAST_LIMIT_US) & (scaled / 1000.0 == values)
    out = np.where(fast, scaled, 0.0).astype(np.int64)  # other entries are filled below
    mid = ~fast & (magnitude >= FAST_LIMIT_US) & (magnitude < MID_LIMIT_US)
    if mid.any():
        out[mid] = _shortest_ns_mid(values[mid])
    slow = np.flatnonzero(~fast & ~mid)
    if slow.size:
        try:
            out[slow] = [float_us_to_ns(v) for v in values[slow].tolist()]
        except OverflowError as exc:
            raise TimeValueError("a timestamp does not fit in int64 nanoseconds") from exc
    return out


def _fill_missing(values: list[object], missing: int | None) -> tuple[list[object], set[type]]:
    """``(values with None replaced by missing, their types)``: instants have no ``dur``, and
    a column of numbers with a few None then still takes a vectorised path."""
    types = set(map(type, values))
    if missing is not None and type(None) in types and types <= {int, float, type(None)}:
        values = [missing if v is None else v for v in values]
        types = (types - {type(None)}) | {int}
    return values, types


def us_to_ns(values: list[object], missing: int | None = None) -> npt.NDArray[np.int64]:
    """Convert a column of JSON µs values to int64 ns.

    ``missing`` replaces ``None`` values (e.g. ``dur`` absent on instants); with ``missing=None``
    a ``None`` raises ``TimeValueError``. Integers beyond int64 ns raise ``TimeValueError``.
    """
    n = len(values)
    values, types = _fill_missing(values, missing)
    if types <= {int}:
        # compared as Python ints first: a value beyond int64 would overflow np.fromiter
        ints: list[int] = values  # type: ignore[assignment]
        if n and (max(ints) > _INT64_US_LIMIT or min(ints) < -_INT64_US_LIMIT):
            raise TimeValueError("a timestamp does not fit in int64 nanoseconds")
        arr = np.fromiter(ints, dtype=np.int64, count=n) if n else np.zeros(0, np.int64)
        return arr * 1000
    if types == {float}:
        return floats_us_to_ns(np.asarray(values, dtype=np.float64))
    out = np.zeros(n, dtype=np.int64)
    float_idx: list[int] = []
    float_vals: list[float] = []
    for i, v in enumerate(values):
        if type(v) is float:
            float_idx.append(i)
            float_vals.append(v)
        elif v is None:
            if missing is None:
                raise TimeValueError("an event has no timestamp")
            out[i] = missing
        else:
            ns = _scalar_us_to_ns(v)
            if abs(ns) > 2**63 - 1:
                raise TimeValueError("a timestamp does not fit in int64 nanoseconds")
            out[i] = ns
    if float_idx:
        out[np.asarray(float_idx, dtype=np.int64)] = floats_us_to_ns(
            np.asarray(float_vals, dtype=np.float64)
        )
    return out


def usable_us(values: list[object], missing: int | None = None) -> list[bool]:
    """Per value, whether ``us_to_ns`` converts it (the slow path, run only after a column
    failed: one bad value then costs its event, not the trace)."""
    out: list[bool] = []
    for v in values:
        try:
            us_to_ns([v], missing)
        except TimeValueError:
            out.append(False)
        else:
            out.append(True)
    return out


def slots_usable(tags: npt.NDArray[np.uint8], raw: npt.NDArray[np.int64]) -> bool:
    """Whether every row's ``ts`` is a number and its ``dur`` a number or absent, all within
    the ranges the array conversion takes (ints within int64 ns, doubles below 2**53 µs)."""
    if not np.isin(tags[:, 0], (INT, FLOAT)).all() or (tags[:, 1] == OTHER).any():
        return False
    ints = np.where(tags == INT, raw, 0)
    floats = np.where(tags == FLOAT, raw.view(np.float64), 0.0)
    # (not np.abs: the absolute value of INT64_MIN is INT64_MIN)
    in_range = (ints <= _INT64_US_LIMIT) & (ints >= -_INT64_US_LIMIT)
    return bool(in_range.all() and (np.abs(floats) < MID_LIMIT_US).all())


def slots_ns(tags: npt.NDArray[np.uint8], raw: npt.NDArray[np.int64]) -> npt.NDArray[np.int64]:
    """int64 ns of number slots (checked by ``slots_usable``); missing and null are 0."""
    out = np.where(tags == INT, raw * 1000, 0)
    floats = tags == FLOAT
    if floats.any():
        out[floats] = floats_us_to_ns(raw[floats].view(np.float64))
    return out
