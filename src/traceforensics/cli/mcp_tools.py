"""What ``tf mcp``'s tools do: each one a plain method over the same loaders as the commands,
returning a view (``report.views``, ``report.views_runs``) of the documented JSON.

A trace is analysed exactly as ``tf analyze`` analyses it (``cli.analyze.analysis_of``: the
session and analysis caches, the fan-out of a rank directory), once per (input as it is now,
options): the answer's document and verdict stay in memory (``MEMO_ENTRIES`` of them, the
least recently used dropped), so a second question on the same trace is answered without
reading it again; a changed file is another entry (``cache.input_identity``). One analysis
runs at a time (the tools run on worker threads).

Paths pass ``Roots.confine`` first; nothing is written but the user cache (``--no-cache``:
no analysis cache; a ``.nsys-rep``'s export is still kept there). Errors are raised as the
commands raise them; ``cli.mcp_server`` turns each into the commands' one line.
"""

from __future__ import annotations

import shlex
import threading
from collections import OrderedDict
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Final

from traceforensics.analysis.options import DEFAULTS, AnalysisOptions
from traceforensics.cache import input_identity
from traceforensics.cli.analyze import analysis_of
from traceforensics.cli.history import HISTORY_LIMIT
from traceforensics.cli.mcp_roots import Roots
from traceforensics.cli.options import parse_duration
from traceforensics.model.errors import InputError, OptionError
from traceforensics.report.explain import explanation, explanation_index
from traceforensics.report.json_out import build_json
from traceforensics.report.views import (
    SHOWN,
    Where,
    analysis_view,
    findings_view,
    gap_view,
    gaps_view,
    kernels_view,
    ranks_view,
)

#: Analyses kept in memory (each a document of some 100 KB per rank and its verdict).
MEMO_ENTRIES: Final = 8
#: The most gaps (and kernel rows) an analysis keeps for ``gaps``, ``gap`` and ``kernels`` (a
#: larger top or index would keep every gap's evidence of a long trace in memory).
MAX_ROWS: Final = 10_000


@dataclass(frozen=True)
class Answered:
    """One analysis as the tools read it: the ``tf analyze --json`` document and the
    verdict lines."""

    doc: dict[str, Any]
    verdict: list[str]


@dataclass
class Tools:
    """The server's state: the roots, the history store, whether the caches are used and the
    analyses answered so far."""

    roots: Roots
    store: str | None = None
    use_cache: bool = True
    _memo: OrderedDict[tuple[Any, ...], Answered] = field(default_factory=OrderedDict)
    _memo_lock: threading.Lock = field(default_factory=threading.Lock)
    _analysing: threading.Lock = field(default_factory=threading.Lock)

    # -- one trace ------------------------------------------------------------------------
    def analyze(
        self, path: str, steps: str | None = None, window: str | None = None
    ) -> dict[str, Any]:
        ans, where = self._answer(path, steps, window)
        return analysis_view(ans.doc, ans.verdict, where)

    def findings(
        self,
        path: str,
        category: str | None = None,
        steps: str | None = None,
        window: str | None = None,
    ) -> dict[str, Any]:
        ans, where = self._answer(path, steps, window)
        return findings_view(ans.doc, category.strip().lower() if category else None, where)

    def gaps(
        self,
        path: str,
        top: int = SHOWN["gaps"],
        start: int = 0,
        steps: str | None = None,
        window: str | None = None,
    ) -> dict[str, Any]:
        _positive(top, "top")
        if not 0 <= start < MAX_ROWS:
            raise InputError(f"start {start}: pass a gap's index, 0 to {MAX_ROWS - 1}")
        ans, where = self._answer(path, steps, window, top_gaps=min(start + top, MAX_ROWS))
        return gaps_view(ans.doc, top, where, start)

    def gap(
        self, path: str, index: int, steps: str | None = None, window: str | None = None
    ) -> dict[str, Any]:
        if not 0 <= index < MAX_ROWS:
            raise InputError(
                f"gap {index}: pass a gap's index in the gaps answer, 0 to {MAX_ROWS - 1}"
            )
        ans, where = self._answer(path, steps, window, top_gaps=index + 1)
        return gap_view(ans.doc, index, where)

    def kernels(
        self,
        path: str,
        top: int = SHOWN["kernels"],
        steps: str | None = None,
        window: str | None = None,
    ) -> dict[str, Any]:
        _positive(top, "top")
        ans, where = self._answer(path, steps, window, top=top)
        return kernels_view(ans.doc, top, where)

    def ranks(
        self, path: str, steps: str | None = None, window: str | None = None
    ) -> dict[str, Any]:
        ans, where = self._answer(path, steps, window)
        return ranks_view(ans.doc, ans.verdict, where)

    # -- runs -----------------------------------------------------------------------------
    def diff(
        self,
        before: str | None,
        after: str,
        fail_on: Sequence[str] = (),
        baseline: str | None = None,
    ) -> dict[str, Any]:
        from traceforensics.analysis.idle.causes import CAUSES
        from traceforensics.cli.diff import saved_document
        from traceforensics.compare import check_rules, diff_documents, parse_rules
        from traceforensics.model.schema import BUSY_CLASSES
        from traceforensics.report.views_runs import diff_view

        if before is None and baseline is None:
            raise InputError(
                "diff: give before (a trace, rank directory or tf analyze --json file) or "
                "baseline (a stored run's selector)"
            )
        if before is not None and baseline is not None:
            raise InputError("diff: give before or baseline, not both")
        rules = parse_rules(list(fail_on), CAUSES, BUSY_CLASSES, relative=True)
        sides: list[tuple[dict[str, Any], str]] = []
        if baseline is not None:
            from traceforensics.history import find_baseline

            sides.append((find_baseline(baseline, self.store), f"baseline {baseline}"))
        for text in [p for p in (before, after) if p is not None]:
            path = self.roots.confine(text)
            doc = saved_document(path)
            sides.append((doc if doc is not None else self._analysed(path, DEFAULTS).doc, path))
        (b_doc, b_label), (a_doc, a_label) = sides
        result = diff_documents(b_doc, a_doc, b_label, a_label)
        words = [
            "tf",
            "diff",
            *([f"--baseline={baseline}"] if baseline else []),
            *(p for _, p in sides[1 if baseline else 0 :]),
            *(f"--fail-on={r}" for r in fail_on),
            *([f"--store={self.store}"] if self.store and baseline else []),
            "--json",
        ]
        return diff_view(
            result.to_json(), check_rules(rules, result.job.figures), shlex.join(words)
        )

    def history(
        self, label: Sequence[str] = (), figure: str | None = None, limit: int = HISTORY_LIMIT
    ) -> dict[str, Any]:
        from traceforensics import history
        from traceforensics.analysis.idle.causes import CAUSES
        from traceforensics.history.figures import check_figure
        from traceforensics.model.schema import BUSY_CLASSES
        from traceforensics.report.history_text import runs_json, trend_json
        from traceforensics.report.views_runs import history_view

        _positive(limit, "limit")
        shown = history.display(history.check_url(self.store))
        flt = history.RunFilter(labels=tuple(label), limit=limit)
        words = [
            "tf",
            "history",
            *(f"--label={x}" for x in label),
            f"--limit={limit}",
            *([f"--store={self.store}"] if self.store else []),
            "--json",
        ]
        if figure is not None:
            name = check_figure(figure, CAUSES, BUSY_CLASSES)
            obj = trend_json(history.trend(self.store, name, flt), name, shown)
            words.insert(2, f"--trend={name}")
        else:
            obj = runs_json(history.list_runs(self.store, flt), shown)
        return history_view(obj, shlex.join(words))

    def explain(self, id: str | None = None) -> dict[str, Any]:
        if id is None or not id.strip():
            return {"ids": explanation_index()}
        return explanation(id)

    # -- the analyses ---------------------------------------------------------------------
    def _answer(
        self, text: str, steps: str | None, window: str | None, **flat: int
    ) -> tuple[Answered, Where]:
        path = self.roots.confine(text)
        options, opts = _options(steps, window, flat)
        where = Where(
            {"path": text}
            | ({"steps": steps} if steps else {})
            | ({"window": window} if window else {}),
            shlex.join(["tf", "analyze", path, *opts, "--json"]),
        )
        return self._analysed(path, options), where

    def _analysed(self, path: str, options: AnalysisOptions) -> Answered:
        """The answer of ``path`` with ``options``: from memory, else analysed (one analysis
        at a time; a question answered from memory never waits for another's analysis)."""
        try:
            key: tuple[Any, ...] | None = (input_identity(Path(path)), repr(options))
        except OSError:  # (the loader says what is wrong with the input)
            key = None
        found = self._recall(key)
        if found is not None:
            return found
        with self._analysing:
            found = self._recall(key)  # (answered while this call waited for its turn)
            if found is not None:
                return found
            result = analysis_of(path, options, use_cache=self.use_cache)
            ans = Answered(build_json(result), _verdict(result))
            if key is not None:
                with self._memo_lock:
                    self._memo[key] = ans
                    while len(self._memo) > MEMO_ENTRIES:
                        self._memo.popitem(last=False)
            return ans

    def _recall(self, key: tuple[Any, ...] | None) -> Answered | None:
        with self._memo_lock:
            if key is None or key not in self._memo:
                return None
            self._memo.move_to_end(key)
            return self._memo[key]


def _verdict(result: Any) -> list[str]:
    from traceforensics.report.terminal import headline_lines, no_gpu_lines

    return headline_lines(result) if result.devices else no_gpu_lines(result)


def _options(
    steps: str | None, window: str | None, flat: dict[str, int]
) -> tuple[AnalysisOptions, list[str]]:
    """The analysis options of a call and the ``tf analyze`` flags that give them. ``window``:
    ``device``, ``trace`` or ``FROM:TO`` (times after the trace's first event, either side
    may be empty). ``flat``: list sizes (``top_gaps``, ``top``), rounded up to a power of two
    and never below the defaults (a smaller list is cut by the view: the analysis stays the
    default one)."""
    given: dict[str, Any] = {}
    words: list[str] = []
    if steps:
        given["steps"] = steps
        words.append(f"--steps={steps}")
    if window:
        w = window.strip().lower()
        if w in ("device", "trace"):
            given["window"] = w
            words.append(f"--window={w}")
        elif ":" in w:
            start, _, end = w.partition(":")
            if start.strip():
                given["start_ns"] = parse_duration(start, "window")
                words.append(f"--from={start.strip()}")
            if end.strip():
                given["end_ns"] = parse_duration(end, "window")
                words.append(f"--to={end.strip()}")
        else:
            raise InputError(
                f"window {window!r}: pass device, trace or FROM:TO (e.g. 1.5s:3s, 200ms:)"
            )
    defaults = {"top_gaps": DEFAULTS.idle.top_gaps, "top": DEFAULTS.kernels.top}
    for name, asked in flat.items():
        if asked <= defaults[name]:  # the default analysis lists enough
            continue
        # rounded up to a power of two: gap 12, then gap 14, is one analysis, not two
        value = min(1 << (asked - 1).bit_length(), MAX_ROWS)
        given[name] = value
        words.append(f"--{'gaps' if name == 'top_gaps' else 'top'}={value}")
    try:
        return DEFAULTS.with_(**given), words
    except OptionError as exc:  # (named as the tool's arguments, not the flags)
        arg = "window" if exc.option in ("start_ns", "end_ns", "window") else exc.option
        typed = {"window": window, "steps": steps}.get(arg)
        raise InputError(f"{arg} {typed!r}: {exc}" if typed else str(exc)) from exc


def _positive(value: int, name: str) -> None:
    if value < 1:
        raise InputError(f"{name} {value}: pass 1 or more")
