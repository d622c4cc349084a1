"""What each decoded event is, and the ``kind`` of each row: decided per distinct value.

One definition for both decoded forms (parsed events, the compiled scanner's codes; see
``batches`` and ``scanned_rows``):

- an event is a table row (``X``/``i``/``I`` but not a skipped category), metadata (``M``),
  a launch-flow endpoint (``s``/``t``/``f`` of a launch-flow category) or nothing;
- a row's kind comes from ``cat`` for ``X`` events (an unknown category reads as annotation,
  counted for a warning) and is ``marker`` for instants.
"""

from __future__ import annotations

from collections import Counter
from typing import Any

from traceforensics.ingest.kineto import categories as cats
from traceforensics.ingest.kineto import gpu

DROP, ROW, META, FLOW = 0, 1, 2, 3
_FLOW_PHASES = frozenset({"s", "t", "f"})


def class_of(ph: Any, cat: Any) -> int:
    """``ROW``, ``META``, ``FLOW`` or ``DROP`` for an event's phase and category (any JSON
    values: a damaged one is never a string, so it is dropped or classed by the other)."""
    if type(ph) is not str:
        return DROP
    if ph in cats.ROW_PHASES:
        return DROP if type(cat) is str and cat in cats.SKIPPED_CATEGORIES else ROW
    if ph == "M":
        return META
    if ph in _FLOW_PHASES and type(cat) is str and cat in cats.LAUNCH_FLOW_CATS:
        return FLOW
    return DROP


def classes(ph: list[Any], cat: list[Any]) -> list[int]:
    """``class_of`` each event, decided once per distinct (phase, category) pair. Pairs that
    compare equal across types (``1``/``True``) are never strings, so they share a class."""
    pairs = list(zip(ph, cat, strict=True))
    try:
        table = {p: class_of(*p) for p in set(pairs)}
    except TypeError:  # an unhashable (damaged) phase or category
        return [class_of(a, b) for a, b in pairs]
    return list(map(table.__getitem__, pairs))


def kind_of(cat: Any) -> str:
    """The kind of an ``X`` row of category ``cat`` (``UNKNOWN_KIND`` for any other value)."""
    if isinstance(cat, str):
        return cats.KIND_BY_CAT.get(cat, cats.UNKNOWN_KIND)
    return cats.UNKNOWN_KIND


def unknown_name(cat: Any) -> str | None:
    """How an ``X`` row's category is counted as unknown (``str`` of a non-string), or None
    when it is a known one."""
    if cats.is_str_in(cat, cats.KIND_BY_CAT):
        return None
    return cat if isinstance(cat, str) else str(cat)


def kinds(ph: list[Any], cat: list[Any], unknown: Counter[str]) -> list[str]:
    """``kind`` of each row (see the module docstring); unknown ``X`` categories are counted
    in ``unknown``."""
    try:
        table = {v: kind_of(v) for v in set(cat)}
        kind = [table[c] for c in cat]
    except TypeError:  # an unhashable (damaged) cat
        kind = [kind_of(c) for c in cat]
    if set(ph) != {"X"}:
        kind = [k if p == "X" else "marker" for p, k in zip(ph, kind, strict=True)]
    if cats.UNKNOWN_KIND in kind and any(
        not cats.is_str_in(c, cats.KIND_BY_CAT) for c in set(map(gpu.key_of, cat))
    ):
        unknown.update(
            name
            for c, k, p in zip(cat, kind, ph, strict=True)
            if p == "X" and k == cats.UNKNOWN_KIND and (name := unknown_name(c)) is not None
        )
    return kind


#: Kinds whose rule args are kept (GPU placement and payload, runtime copy sizes).
RULE_KINDS: frozenset[str] = cats.GPU_ROW_KINDS | {"cuda_api"}
#: Kinds whose args are read at all (rule args, or kept args for the side table).
NEED_KINDS: frozenset[str] = RULE_KINDS | cats.ARGS_KINDS
#: The args keys the GPU-side rules read (``payload``); correlation has its own column.
RULE_KEYS: frozenset[str] = frozenset(
    {"device", "stream", "bytes", "kind", "grid", "block", "size", "Collective name"}
)
#: The rule args of a row that has none (shared: never written to).
EMPTY_ARGS: dict[str, Any] = {}
