"""The investigation section (``analysis.method``) as text, Markdown and HTML.

Every check is shown, in the method's order, numbered 1-6: its question, the one-sentence
answer and where its figures come from. The check the top finding belongs to is marked
(``<- start here: <the finding's title>``); the checks after it are de-emphasised (terminal:
the number in parentheses; Markdown: italics; HTML: grey), since the walk stops there. A job
names the device the walk reads in the heading; a trace without GPU work gets one line.
"""

from __future__ import annotations

import html
import re
import textwrap
from typing import Final

from traceforensics.analysis.method import MethodLine, investigation, walk_device
from traceforensics.analysis.pipeline import Analysis

#: Each check's question, as the reports print it.
QUESTIONS: Final[dict[str, str]] = {
    "step_time": "Step time stable?",
    "busy_idle": "Busy vs idle?",
    "idle_cause": "Idle: which cause?",
    "kernels": "Busy: which kernels?",
    "communication": "Waits across GPUs?",
    "model": "The model?",
}
#: The section's heading (the terminal's ``== ... ==`` line starts with it).
TITLE: Final = "Investigation"
_PAD: Final = 28  # the terminal's mark, number and question column
_NBSP: Final = "\u00a0"  # (textwrap never breaks at it)
_FIGURE_UNIT: Final = re.compile(r"(\d) (ns|µs|ms|s|TFLOPS)\b")
#: Characters that would start Markdown syntax inside a line: emphasis (``*``, an ``_`` at a
#: word's edge: GitHub ignores it inside a word), code, links, HTML, table pipes.
_MD_SPECIAL: Final = re.compile(r"([\\`*\[\]<|]|(?<!\w)_|_(?!\w))")


def method_title(analysis: Analysis) -> str:
    """``Investigation (the method's order; rank 1 GPU 1, the top finding's device)``."""
    chosen = walk_device(analysis)
    where = ""
    if chosen is not None and chosen[1]:
        where = f"; rank {chosen[0].rank} GPU {chosen[0].device}, {chosen[1]}"
    return f"{TITLE} (the method's order, stopping at the top finding{where})"


def no_gpu_method() -> str:
    """The section's one line for a trace without GPU work."""
    return (
        f"{TITLE}: 0 GPUs ran work in this trace, so the method's walk (step time, busy vs "
        "idle, idle cause, kernels, communication, model) has nothing to read."
    )


def _stop_title(analysis: Analysis) -> str:
    return analysis.findings[0].title if analysis.findings else ""


def _states(lines: list[MethodLine]) -> list[str]:
    """``before``, ``stop`` or ``after`` for each line (all ``before`` without a stop)."""
    out, seen = [], False
    for m in lines:
        out.append("stop" if m.stop else ("after" if seen else "before"))
        seen = seen or m.stop
    return out


def method_lines(analysis: Analysis, width: int = 100) -> list[str]:
    """The terminal section's body: per check, its number and question, the answer wrapped
    beside them; under the stop, ``from:`` its evidence and the top finding's title (the
    other checks' evidence is in the JSON, Markdown and HTML: the terminal keeps its first
    screen for the answers)."""
    lines = investigation(analysis)
    if not lines:
        return [no_gpu_method()]
    pad = " " * _PAD
    out: list[str] = []
    for i, (m, state) in enumerate(zip(lines, _states(lines), strict=True), 1):
        mark = "> " if state == "stop" else "  "
        number = f"({i})" if state == "after" else f"{i}. "
        head = f"{mark}{number} {QUESTIONS[m.check]}".ljust(_PAD)
        # (textwrap's width counts the indent)
        body = textwrap.wrap(_glued(m.answer), max(width, _PAD + 30), subsequent_indent=pad,
                             initial_indent=head, break_on_hyphens=False)  # fmt: skip
        out += [t.replace(_NBSP, " ") for t in body]
        if state == "stop":
            for text, more in ((f"from: {m.evidence}", "  "), (_start(analysis), "   ")):
                out += textwrap.wrap(text, width, initial_indent=pad, subsequent_indent=pad + more)
    return out


def _glued(text: str) -> str:
    """``text`` with each figure glued to its unit (``537.4 µs`` never split by wrapping)."""
    return _FIGURE_UNIT.sub(lambda m: m.group(1) + _NBSP + m.group(2), text)


def _start(analysis: Analysis) -> str:
    return f"<- start here: {_stop_title(analysis)}"


def _md(text: str) -> str:
    """Trace text (kernel names, step names) with Markdown's special characters escaped."""
    return _MD_SPECIAL.sub(r"\\\1", " ".join(text.split()))


def _md_code(text: str) -> str:
    """``text`` as an inline code span (a backtick inside: a longer fence)."""
    flat = " ".join(text.split())
    return f"`` {flat} ``" if "`" in flat else f"`{flat}`"


def method_markdown(analysis: Analysis) -> list[str]:
    """The Markdown section (heading included): a numbered list, the stop in bold, the
    checks after it in italics."""
    lines = investigation(analysis)
    if not lines:
        return ["## " + TITLE, "", no_gpu_method()]
    out = [f"## {_md(method_title(analysis))}", ""]
    for i, (m, state) in enumerate(zip(lines, _states(lines), strict=True), 1):
        q, answer, source = QUESTIONS[m.check], _md(m.answer), _md_code(m.evidence)
        if state == "after":
            out.append(f"{i}. *{q} {answer}* (from: {source})")
            continue
        out.append(f"{i}. **{q}** {answer} (from: {source})")
        if state == "stop":
            out[-1] += f" ← **start here:** {_md(_stop_title(analysis))}"
    return out


def method_html(analysis: Analysis) -> list[str]:
    """The HTML section (heading included): an ordered list, the stop highlighted
    (``li.stop``), the checks after it grey (``li.after``); styles in ``report.html``."""
    lines = investigation(analysis)
    esc = html.escape
    if not lines:
        return [f"<h2>{TITLE}</h2><p>{esc(no_gpu_method())}</p>"]
    out = [f"<h2 id='method'>{esc(method_title(analysis))}</h2><ol class='method'>"]
    for m, state in zip(lines, _states(lines), strict=True):
        item = (
            f"<li class='{state}' data-check='{m.check}'><b>{esc(QUESTIONS[m.check])}</b> "
            f"{esc(m.answer)}<br><span class='from'>from: {esc(m.evidence)}</span>"
        )
        if state == "stop":
            item += f"<div class='start'>← start here: {esc(_stop_title(analysis))}</div>"
        out.append(item + "</li>")
    out.append("</ol>")
    return out


#: The HTML section's styles (``report.html`` adds them to its page style).
METHOD_STYLE: Final = """
ol.method li{margin:.35em 0;padding:.15em .5em}
ol.method li.stop{background:#fff8e1;border-left:4px solid #f0a000}
ol.method li.after{color:#999}ol.method .from{color:#777;font-size:.9em}
ol.method .start{font-weight:bold;color:#8a5a00}
"""
