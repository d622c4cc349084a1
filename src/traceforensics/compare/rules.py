"""``--fail-on`` rules: parse them (before any trace is read) and check them.

Grammar (docs/diff.md has the full table)::

    RULE   := FIGURE OP VALUE                       e.g.  idle.data_loading>+20%
    FIGURE := a name of ``figures.figure_names``    step_time, idle, idle.<cause>, mfu, ...
    OP     := >  >=  <  <=                          the condition that FAILS the run
    VALUE  := [+|-] NUMBER UNIT
    UNIT   := %  pp  ns  us  µs  ms  s

An unsigned value is an **absolute** threshold on one analysis (on a diff: on AFTER): ``%`` is
a share of the window for time figures and the MFU itself for ``mfu``; a time unit compares the
figure's value (per step when the analysis has steps, else the window total; step time: the
median step). A signed value is a **change** from BEFORE to AFTER (a diff only): ``%`` relative
to BEFORE (``delta_pct``; from zero to anything above zero counts as an infinite rise), a time
unit the change itself, ``pp`` the change of the share of the window (``mfu``: of MFU) in
percentage points. A change within step-to-step noise (``noise``) never breaks a rule; a rule
whose figure is unknown on a side (no steps, no MFU) breaks, saying it cannot be checked: a
gate must not pass by not looking.
"""

from __future__ import annotations

import math
import operator
import re
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass

from traceforensics.compare.deltas import FigureDelta
from traceforensics.compare.figures import STEP_FIGURES, figure_names, is_time_figure
from traceforensics.compare.words import (
    fmt_change,
    fmt_delta,
    fmt_pair,
    fmt_pct,
    fmt_value,
)
from traceforensics.model.errors import OptionError
from traceforensics.model.schema import BUSY_CLASSES

_RULE_RE = re.compile(
    r"^\s*(?P<figure>[A-Za-z_][\w.]*)\s*(?P<op>>=|<=|>|<)\s*(?P<sign>[+-])?\s*"
    r"(?P<num>\d+(?:\.\d*)?|\.\d+)\s*(?P<unit>%|pp|ns|us|µs|ms|s)?\s*$",
    re.IGNORECASE,
)
_NS = {"ns": 1, "us": 1_000, "µs": 1_000, "ms": 1_000_000, "s": 1_000_000_000}
_OPS: dict[str, Callable[[float, float], bool]] = {
    ">": operator.gt,
    ">=": operator.ge,
    "<": operator.lt,
    "<=": operator.le,
}
_EXAMPLES = "e.g. 'idle.data_loading>+20%', 'step_time>150ms', 'mfu<25%'"


@dataclass(frozen=True)
class Rule:
    """One parsed rule. ``unit``: ``%``, ``pp`` or ``ns`` (time units read as ns);
    ``threshold``: percent, percentage points or ns; ``relative``: a signed value."""

    text: str
    figure: str
    op: str
    relative: bool
    unit: str
    threshold: float
    value_text: str


@dataclass(frozen=True)
class Check:
    """A rule checked: ``broken``; ``held``: it crossed its threshold within noise; ``line``:
    what was measured against the rule, one line."""

    rule: Rule
    broken: bool
    held: bool
    line: str


def _fail(text: str, why: str) -> OptionError:
    return OptionError(f"rule {text!r}: {why}", "fail_on")


def parse_rule(
    text: str,
    causes: Sequence[str],
    kinds: Sequence[str] = BUSY_CLASSES,
    relative: bool = True,
) -> Rule:
    """One rule (module doc); ``relative=False`` refuses signed values (no baseline).
    Raises ``OptionError`` (option ``fail_on``) with one line saying what is wrong."""
    m = _RULE_RE.match(text)
    if m is None:
        raise _fail(text, f"not FIGURE OP VALUE; write {_EXAMPLES}")
    figure = m["figure"].lower()
    names = figure_names(causes, kinds)
    if figure not in names:
        raise _fail(text, _unknown(figure, causes, kinds, names))
    sign, unit = m["sign"], (m["unit"] or "").lower()
    if not unit:
        raise _fail(
            text,
            f"{m['num']} has no unit; add one of %, pp, ms, us, ns, s ({_EXAMPLES})",
        )
    _check_unit(text, figure, unit, bool(sign))
    if sign and not relative:
        raise _fail(
            text,
            "a signed value is a change against a baseline, which only a diff has; give an "
            "absolute value (e.g. 'idle>30%', 'step_time>150ms') or compare two runs",
        )
    number = float(m["num"]) * (-1 if sign == "-" else 1)
    value_text = f"{sign or ''}{m['num']}{m['unit']}"
    if unit in _NS:
        unit, number = "ns", number * _NS[unit]
    return Rule(text, figure, m["op"], bool(sign), unit, number, value_text)


def _unknown(figure: str, causes: Sequence[str], kinds: Sequence[str], names: Sequence[str]) -> str:
    head, _, tail = figure.partition(".")
    if head == "idle" and tail:
        return f"unknown cause {tail!r}; idle.CAUSE takes one of {', '.join(causes)}"
    if head == "busy" and tail:
        return f"unknown busy kind {tail!r}; busy.KIND takes one of {', '.join(kinds)}"
    short = [n for n in names if not n.startswith(("idle.", "busy."))]
    return f"unknown figure {figure!r}; use one of {', '.join(short)}, idle.CAUSE, busy.KIND"


def _check_unit(text: str, figure: str, unit: str, signed: bool) -> None:
    """Refuse units a figure cannot be compared in (module doc)."""
    if unit == "pp" and not signed:
        raise _fail(text, "pp is a change in percentage points; sign it (e.g. 'idle>+5pp')")
    if figure in STEP_FIGURES and (unit == "pp" or (unit == "%" and not signed)):
        raise _fail(
            text,
            f"{figure} is a time, not a share; give a time ('{figure}>150ms') or a change "
            f"('{figure}>+5%', '{figure}>+5ms')",
        )
    if figure == "mfu" and unit in _NS:
        raise _fail(
            text,
            "mfu is a fraction, not a time; give a % ('mfu<25%', 'mfu<-3%', 'mfu<-2pp')",
        )


def parse_rules(
    texts: Sequence[str],
    causes: Sequence[str],
    kinds: Sequence[str] = BUSY_CLASSES,
    relative: bool = True,
) -> tuple[Rule, ...]:
    """Every rule, or the first malformed one's ``OptionError``."""
    return tuple(parse_rule(t, causes, kinds, relative) for t in texts)


def check_rules(rules: Sequence[Rule], figures: Mapping[str, FigureDelta]) -> list[Check]:
    """Each rule against the job's figures (``figures``: a diff's, or one analysis' with
    ``before`` None)."""
    return [check_rule(r, figures[r.figure]) for r in rules]


def check_rule(rule: Rule, d: FigureDelta) -> Check:
    """One rule against one figure (module doc)."""
    value = _measured(rule, d)
    if value is None:
        return Check(rule, True, False, f"{rule.text}: cannot be checked ({_missing(rule, d)})")
    crossed = _OPS[rule.op](value, rule.threshold)
    line = f"{_describe(rule, d, value)} {rule.op} {rule.value_text}"
    if crossed and rule.relative and d.within_noise is True and d.noise is not None:
        band = fmt_value(d.noise.band, "ns" if rule.figure != "mfu" else "fraction")
        note = f"{line}, but within step-to-step noise (±{band}): not counted"
        return Check(rule, False, True, note)
    return Check(rule, crossed, False, line)


def _missing(rule: Rule, d: FigureDelta) -> str:
    """Why a figure has no value: which side lacks what."""
    why = "no steps" if rule.figure in STEP_FIGURES else "no value"
    why = "no FLOPs or no peak" if rule.figure == "mfu" else why
    if not rule.relative:
        return f"{why} in the analysis"
    sides = [s for s, v in (("BEFORE", d.before), ("AFTER", d.after)) if v is None]
    return f"{why} in {' and '.join(sides) or 'the window'}"


def _measured(rule: Rule, d: FigureDelta) -> float | None:
    """The number the rule's threshold is compared with, in the rule's unit."""
    if not rule.relative:
        if rule.unit == "ns":
            return d.after
        base = d.share_after if is_time_figure(rule.figure) else d.after
        return None if base is None else 100 * base
    if rule.unit == "ns":
        return d.delta
    if rule.unit == "pp":
        b, a = _pp_base(rule.figure, d)
        return None if a is None or b is None else 100 * (a - b)
    if d.before == 0 and d.after is not None:  # from nothing: any rise is infinite
        return math.inf if d.after > 0 else 0.0
    return d.delta_pct


def _pp_base(figure: str, d: FigureDelta) -> tuple[float | None, float | None]:
    """What a ``pp`` rule compares: shares of the window for time figures, else the values."""
    return (d.share_before, d.share_after) if is_time_figure(figure) else (d.before, d.after)


def _describe(rule: Rule, d: FigureDelta, value: float) -> str:
    """What was measured (``value``: ``_measured``), in words: ``idle.data_loading +10 142%
    (0.46 → 47.28 ms/step)``."""
    what = rule.figure
    of = " of the window" if is_time_figure(what) else ""
    if not rule.relative:
        if rule.unit == "ns":
            return f"{what} {fmt_value(d.after, d.unit)}"
        return f"{what} {fmt_pct(value, sign=False)}{of}"
    if rule.unit == "pp":
        pair = " → ".join(f"{100 * (s or 0):.1f}%" for s in _pp_base(what, d))
        return f"{what} {fmt_pct(value).removesuffix('%')} pp ({pair}{of})"
    if rule.unit == "ns":
        return f"{what} {fmt_delta(d)} ({fmt_pair(d.before, d.after, d.unit)})"
    return f"{what} {fmt_change(d)}"
