"""The loader wrapper of ``capture()``: each batch fetch is a named range read as data loading,
and (optionally) each batch starts a profiler step.

The range name is PyTorch's own DataLoader spelling, ``enumerate(DataLoader)#<Type>.__next__``
with the wrapped iterable's type: ``tf`` reads that name as data loading on every host kind
whatever ``data_patterns`` say (``analysis.names.BUILTIN_DATA_RE``), and so do other
PyTorch trace viewers. A ``torch.utils.data.DataLoader`` already records exactly that range
around every ``__next__`` while a profiler runs, so it gets no second one.

Steps, when ``step`` is given: the profiler steps before every fetch but the first, and once
more when the iterable is exhausted, so ``N`` batches make ``N`` steps and each
``ProfilerStep#k`` opens with the fetch of batch ``k``::

    ProfilerStep#0          ProfilerStep#1          ProfilerStep#2
    [fetch 0][train 0.....] [fetch 1][train 1.....] [fetch: exhausted]
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator
from contextlib import nullcontext
from typing import Final, TypeVar

T = TypeVar("T")

#: Range around one fetch (``{kind}``: the iterable's type name).
FETCH_RANGE: Final = "enumerate(DataLoader)#{kind}.__next__"


def fetch_range_name(iterable: object) -> str | None:
    """The range name for fetches from ``iterable``; None for a ``DataLoader`` (it records its
    own range)."""
    from torch.utils.data import DataLoader

    if isinstance(iterable, DataLoader):
        return None
    return FETCH_RANGE.format(kind=type(iterable).__name__)


def timed_batches(iterable: Iterable[T], step: Callable[[], None] | None = None) -> Iterator[T]:
    """The items of ``iterable``, each fetch inside a data-loading range (module docstring),
    calling ``step`` before every fetch but the first and once at exhaustion."""
    from torch.autograd.profiler import record_function

    name = fetch_range_name(iterable)
    items = iter(iterable)
    while True:
        try:
            with nullcontext() if name is None else record_function(name):
                item = next(items)
        except StopIteration:
            return
        yield item
        if step is not None:  # resumed for the next fetch: this batch's step has ended
            step()
