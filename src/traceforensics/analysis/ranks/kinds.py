"""Polars expressions of the communication-kernel table (``model.comm``): the kind and family
of every kernel name in one column pass. They live here, not in ``model.comm``, because the
Kineto scan child imports ``model.comm`` and must not load polars (tests/test_kineto_early.py).
"""

from __future__ import annotations

import polars as pl

from traceforensics.model.comm import (
    COMM_PATTERNS,
    KIND_WORDS,
    NOT_COMM_KERNEL_RE,
    OP_KIND_WORDS,
    WORD,
)


def _word_expr(name: pl.Expr, words: tuple[tuple[str, str], ...]) -> pl.Expr:
    out: pl.Expr = pl.lit(None, dtype=pl.String)
    for kind, word in reversed(words):  # built inside out: the first word wins
        out = pl.when(name.str.contains("(?i)" + word)).then(pl.lit(kind)).otherwise(out)
    return out


def comm_kind_expr(name: pl.Expr) -> pl.Expr:
    """``comm_kind`` as a polars expression over a String column of kernel names (null: not
    communication)."""
    plain = name.str.replace_all(NOT_COMM_KERNEL_RE, " ")
    word = _word_expr(plain, KIND_WORDS).fill_null(pl.lit("custom"))
    out: pl.Expr = pl.lit(None, dtype=pl.String)
    for p in reversed(COMM_PATTERNS):
        kind = word if p.kind == WORD else pl.lit(p.kind)
        out = pl.when(plain.str.contains("(?i)" + p.regex)).then(kind).otherwise(out)
    return out


def comm_family_expr(name: pl.Expr) -> pl.Expr:
    """The family (``CommPattern.family``) of the first pattern a kernel name matches."""
    plain = name.str.replace_all(NOT_COMM_KERNEL_RE, " ")
    out: pl.Expr = pl.lit(None, dtype=pl.String)
    for p in reversed(COMM_PATTERNS):
        out = pl.when(plain.str.contains("(?i)" + p.regex)).then(pl.lit(p.family)).otherwise(out)
    return out


def op_kind_expr(name: pl.Expr) -> pl.Expr:
    """``op_kind`` as a polars expression over a String column of op names."""
    return _word_expr(name, OP_KIND_WORDS)


def word_kind_expr(name: pl.Expr) -> pl.Expr:
    """The kind a collective word in ``name`` states (``KIND_WORDS``), else null: for values
    such as PyTorch's ``Collective name`` arg (``allreduce``, ``_allgather_base``, ``send``)."""
    return _word_expr(name, KIND_WORDS)
