"""``--fail-on RULE`` for ``tf analyze`` and ``tf diff``: the CI gate (issue 15, docs/diff.md).

Rules are parsed by the option's callback, so a malformed rule exits 2 before any trace is read.
After the command has written its normal output, ``check_gate`` checks every rule against the
job's figures: a rule within step-to-step noise is reported as a note and not counted; broken
rules are printed one line each (``tf: fail-on: ...``) and the command exits 1 (``EXIT_GATE``):
the run's output is written by then, only the exit status says the gate failed.
"""

from __future__ import annotations

import sys
from collections.abc import Callable, Mapping
from typing import TYPE_CHECKING, Any, TypeVar

import click

from traceforensics.analysis.idle.causes import CAUSES
from traceforensics.model.schema import BUSY_CLASSES
from traceforensics.report.format import one_line

if TYPE_CHECKING:  # the rules' code (``compare``) is imported only when a rule is given
    from traceforensics.compare import Rule
    from traceforensics.compare.deltas import FigureDelta

F = TypeVar("F", bound=Callable[..., Any])

#: Exit status when a rule broke (0 done, 2 bad input, 3 internal error: ``cli.main``).
EXIT_GATE = 1
#: The exit code a broken rule gives, added to the commands' help after ``EXIT_CODES_HELP``.
FAIL_ON_EXIT_HELP = " With --fail-on: 1 when a rule broke (one line per broken rule on stderr)."

_HELP_FIGURES = (
    " Figures: step_time, idle, idle.CAUSE, busy, busy.KIND, comm, comm.exposed, copy.exposed, "
    "mfu (docs/diff.md)."
)
_HELP_ABSOLUTE = (
    "Exit 1 when this rule holds for the run (repeatable): FIGURE OP VALUE, e.g. 'idle>30%' "
    "(share of the window), 'idle.data_loading>10ms' (per step), 'step_time>150ms' (median "
    "step), 'mfu<25%'." + _HELP_FIGURES
)
_HELP_RELATIVE = (
    "Exit 1 when this rule holds (repeatable): a signed value is a change from BEFORE to AFTER "
    "('idle.data_loading>+20%', 'step_time>+5%', 'step_time>+5ms', 'mfu<-3%', 'idle>+2pp'; "
    "changes within step-to-step noise never count), an unsigned one a threshold on AFTER "
    "('idle>30%', 'mfu<25%')." + _HELP_FIGURES
)


def fail_on_option(relative: bool) -> Callable[[F], F]:
    """The ``--fail-on`` option; ``relative`` allows signed (change) rules (``tf diff``)."""

    def parse(
        ctx: click.Context, param: click.Parameter, value: tuple[str, ...]
    ) -> tuple[Rule, ...]:
        if not value:  # no rule (most runs): nothing to parse
            return ()
        from traceforensics.compare import parse_rules

        return parse_rules(value, CAUSES, BUSY_CLASSES, relative=relative)

    return click.option(
        "--fail-on",
        "fail_on",
        multiple=True,
        metavar="RULE",
        callback=parse,
        help=_HELP_RELATIVE if relative else _HELP_ABSOLUTE,
    )


def check_gate(rules: tuple[Rule, ...], figures: Callable[[], Mapping[str, FigureDelta]]) -> None:
    """Check the rules (nothing to do without any): notes on stderr for rules held back by
    noise, one line per broken rule on stderr and ``SystemExit(EXIT_GATE)`` when any broke."""
    if not rules:
        return
    from traceforensics.compare import check_rules

    checks = check_rules(rules, figures())
    for c in checks:
        if c.held:
            click.echo(f"tf: fail-on: note: {one_line(c.line)}", err=True)
    broken = [c.line for c in checks if c.broken]
    for line in broken:
        click.echo(f"tf: fail-on: {one_line(line)}", err=True)
    if broken:
        sys.exit(EXIT_GATE)
