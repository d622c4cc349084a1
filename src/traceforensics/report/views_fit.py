"""Answers that fit a model's context: lists cut to what is shown, each cut named in ``more``.

An assistant reads a tool's answer into its context, so ``tf mcp``'s answers (``report.views``)
show the top of each list and say what they left out. Every cut adds one pointer to the
answer's ``more`` list: ``what`` (the field, as a JSON path such as ``findings`` or
``gaps[0].evidence``), ``shown`` and ``total`` (items), and where the rest is: ``tool`` with its
``arguments`` (another tool call) or ``command`` (the ``tf`` command whose JSON has it all).

``fit`` is the last guard: an answer still longer than ``budget`` characters of JSON has its
largest list halved, again and again, each cut recorded the same way, until it fits or no list
has more than one item left.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any, Final

import orjson

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
    """``obj`` as compact JSON text, the form an answer is sent in. A text holding a lone
    surrogate (a file name with bytes that are not UTF-8) is written as its ``\\udcXX``
    escape, still valid JSON."""
    try:
        return orjson.dumps(obj, option=orjson.OPT_NON_STR_KEYS).decode()
    except TypeError:
        return json.dumps(obj, ensure_ascii=True, separators=(",", ":"))


def size(obj: Any) -> int:
    """Characters of ``obj`` as compact JSON."""
    return len(compact(obj))


def fit(answer: dict[str, Any], command: str, budget: int = BUDGET_CHARS) -> dict[str, Any]:
    """``answer`` cut until its JSON holds at most ``budget`` characters (``more`` keeps
    growing with each cut; ``command`` is where the whole lists are). Changes ``answer``."""
    more: list[dict[str, Any]] = answer.setdefault("more", [])
    while size(answer) > budget:
        largest = max(_lists(answer, ""), key=lambda t: size(t[3]), default=None)
        if largest is None:
            break
        parent, key, path, items = largest
        keep = len(items) // 2
        more.append(pointer(path, keep, len(items), command=command))
        parent[key] = items[:keep]
    return answer


def _lists(obj: Any, at: str) -> Iterator[tuple[Any, Any, str, list[Any]]]:
    """(parent, key in it, JSON path, list) of every list of more than one item under
    ``obj`` (the answer's own ``more`` list left out)."""
    entries = obj.items() if isinstance(obj, dict) else enumerate(obj)
    for key, value in entries:
        if at == "" and key == "more":
            continue
        path = f"{at}[{key}]" if isinstance(obj, list) else (f"{at}.{key}" if at else str(key))
        if isinstance(value, list):
            if len(value) > 1:
                yield obj, key, path, value
            yield from _lists(value, path)
        elif isinstance(value, dict):
            yield from _lists(value, path)
