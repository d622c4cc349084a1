"""Answers that fit a model's context: lists cut to what is shown, each cut named in ``more``.

An assistant reads a tool's answer into its context, so ``tf mcp``'s answers (``report.views``)
show the top of each list and say what they left out. Every cut adds one pointer to the
answer's ``more`` list: ``what`` (the field, as a JSON path such as ``findings`` or
``gaps[0].evidence``), ``shown`` and ``total`` (items), and where the rest is: ``tool`` with its
``arguments`` (another tool call) or ``command`` (the ``tf`` command whose JSON has it all).

``fit`` is the last guard: an answer still longer than ``budget`` characters of JSON has its
largest list cut, again and again, until it fits or no list has more than one item left, then
its longest texts cut; each cut is recorded the same way.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any, Final

from traceforensics.report.json_out import dumps

#: The most characters of JSON one answer holds (about 6,000 tokens: room for several
#: answers in one conversation).
BUDGET_CHARS: Final = 24_000


def pointer(
    what: str,
    shown: int,
    total: int,
    *,
    tool: str | None = None,
    arguments: dict[str, Any] | None = None,
    command: str | None = None,
) -> dict[str, Any]:
    """One ``more`` entry: ``total - shown`` items of ``what`` are elsewhere."""
    out: dict[str, Any] = {"what": what, "shown": shown, "total": total}
    if tool is not None:
        out |= {"tool": tool, "arguments": arguments or {}}
    if command is not None:
        out["command"] = command
    return out


def cut(
    items: list[Any], limit: int, what: str, more: list[dict[str, Any]], **where: Any
) -> list[Any]:
    """The first ``limit`` of ``items``; a pointer in ``more`` when some are left out."""
    if len(items) > limit:
        more.append(pointer(what, limit, len(items), **where))
    return items[:limit]


def compact(obj: Any) -> str:
    """``obj`` as compact JSON text, the form an answer is sent in (``json_out.dumps``)."""
    return dumps(obj, indent=False).decode()


def size(obj: Any) -> int:
    """Characters of ``obj`` as compact JSON."""
    return len(compact(obj))


def fit(answer: dict[str, Any], command: str, budget: int = BUDGET_CHARS) -> dict[str, Any]:
    """``answer`` cut until its JSON holds at most ``budget`` characters; ``command`` is where
    the whole lists are. Changes ``answer``.

    The largest list is cut to the most items that fit (or halved when one item is too many)
    until the answer fits or no list of two items or more is left; then, the last resort, the
    longest texts are cut to ``TEXT_CHARS`` (marked ``…``). Each field cut has one pointer in
    ``more``: ``shown`` what is left of it, ``total`` what the answer had before any cut; a
    pointer into an item that was cut away goes with it."""
    more: list[dict[str, Any]] = answer.setdefault("more", [])
    while size(answer) > budget:
        largest = max(_lists(answer, ""), key=lambda t: size(t[3]), default=None)
        if largest is None:
            break
        parent, key, path, items = largest
        parent[key] = items[: _most_kept(answer, parent, key, items, budget)]
        _record(more, path, len(parent[key]), len(items), command)
    for parent, key, path, text in sorted(_texts(answer, ""), key=lambda t: -len(t[3])):
        if size(answer) <= budget:
            break
        parent[key] = text[:TEXT_CHARS] + "…"
        _record(more, path, TEXT_CHARS, len(text), command)
    # (a pointer to what a view never showed, ``shown`` 0, stays)
    paths = set(_paths(answer, ""))
    more[:] = [m for m in more if m["shown"] == 0 or "[*]" in m["what"] or m["what"] in paths]
    return answer


def _most_kept(answer: dict[str, Any], parent: Any, key: Any, items: list[Any], budget: int) -> int:
    """How many of ``items`` (the list at ``parent[key]``) the answer keeps: the most that
    fit in ``budget`` (a binary search), or half when even one item does not fit (another
    list must be cut too)."""
    lo, hi = 1, len(items) - 1
    while lo < hi:
        mid = (lo + hi + 1) // 2
        parent[key] = items[:mid]
        if size(answer) <= budget:
            lo = mid
        else:
            hi = mid - 1
    parent[key] = items[:lo]
    return lo if size(answer) <= budget else len(items) // 2


#: Characters a text keeps when cutting lists was not enough.
TEXT_CHARS: Final = 1_000


def _record(more: list[dict[str, Any]], path: str, shown: int, total: int, command: str) -> None:
    """Note a cut of ``path`` in ``more``: a pointer already there keeps its total."""
    for m in more:
        if m["what"] == path:
            m["shown"] = shown
            m.setdefault("command", command)
            return
    more.append(pointer(path, shown, total, command=command))


def _paths(obj: Any, at: str) -> Iterator[str]:
    for _, value, path in _children(obj, at):
        yield path
        if isinstance(value, list | dict):
            yield from _paths(value, path)


def _lists(obj: Any, at: str) -> Iterator[tuple[Any, Any, str, list[Any]]]:
    """(parent, key in it, JSON path, list) of every list of more than one item under
    ``obj`` (the answer's own ``more`` list left out)."""
    for key, value, path in _children(obj, at):
        if isinstance(value, list):
            if len(value) > 1:
                yield obj, key, path, value
            yield from _lists(value, path)
        elif isinstance(value, dict):
            yield from _lists(value, path)


def _texts(obj: Any, at: str) -> Iterator[tuple[Any, Any, str, str]]:
    """(parent, key in it, JSON path, text) of every text longer than ``TEXT_CHARS``."""
    for key, value, path in _children(obj, at):
        if isinstance(value, str) and len(value) > TEXT_CHARS:
            yield obj, key, path, value
        elif isinstance(value, list | dict):
            yield from _texts(value, path)


def _children(obj: Any, at: str) -> Iterator[tuple[Any, Any, str]]:
    """(key, value, JSON path) of each entry of a dict or list; the answer's ``more`` left
    out."""
    entries = obj.items() if isinstance(obj, dict) else enumerate(obj)
    for key, value in entries:
        if at == "" and key == "more":
            continue
        yield key, value, _path(at, key, isinstance(obj, list))


def _path(at: str, key: Any, indexed: bool) -> str:
    """``a.b``, ``a[3]``; a key that is empty or holds ``.[]"`` as a JSON string,
    ``a["x.y"]``."""
    if indexed:
        return f"{at}[{key}]"
    text = str(key)
    if not text or any(c in text for c in '.[]"'):
        return f"{at}[{json.dumps(text)}]"
    return f"{at}.{text}" if at else text
