"""A plain table: one header line of named columns, then one sample per line.

Separated by commas, tabs or runs of spaces. The header names are matched through
``HEADER_ALIASES`` (English and Chinese, units in brackets/parentheses are read and used to
scale), and a column mapping (``columns="KEY=COLUMN,..."``, ``--columns``) names anything
else::

    时间戳 GPU利用率(%) 显存占用(MB) SM时钟(MHz) 温度(°C)
    2025-03-21 10:00:01 98.2 21432 1815 68

With whitespace separation a timestamp written as "date time" is two tokens under one header;
a data line with exactly one token more than the header has those two tokens joined.
"""

from __future__ import annotations

import io
from pathlib import Path

import polars as pl

from traceforensics.ingest.monitor.common import build_frame, plan_from_headers
from traceforensics.model.errors import InputError, OptionError
from traceforensics.model.monitor import MonitorLog


def _read_separated(lines: list[str], headers: list[str], sep: str) -> pl.DataFrame | None:
    """A separated table read by polars (fast), or None when its rows do not fit the header
    (polars sizes the table from the first row: a short first row fails it)."""
    try:
        raw = pl.read_csv(
            io.StringIO("\n".join(lines[1:])),
            has_header=False,
            new_columns=headers,
            separator=sep,
            infer_schema=False,
            truncate_ragged_lines=True,
        )
    except pl.exceptions.PolarsError:
        return None
    return raw.select(pl.col(c).str.strip_chars() for c in raw.columns)


def _split_lines(
    lines: list[str], headers: list[str], sep: str | None, time_idx: int, path: Path
) -> tuple[pl.DataFrame, int]:
    """Rows with as many values as the header (whitespace tables may split "date time" in
    two); the others are skipped and counted."""
    rows: list[list[str]] = []
    bad = 0
    for ln in lines:
        toks = [t.strip() for t in ln.split(sep)] if sep else ln.split()
        if sep is None and len(toks) == len(headers) + 1:
            toks[time_idx : time_idx + 2] = [f"{toks[time_idx]} {toks[time_idx + 1]}"]
        if len(toks) == len(headers):
            rows.append(toks)
        else:
            bad += 1
    if not rows:
        raise OptionError(
            f"{path}: no line has as many values as the header has columns "
            f"({len(headers)}); check the separator or map the columns",
            "columns",
        )
    return pl.DataFrame(rows, schema=dict.fromkeys(headers, pl.String), orient="row"), bad


def _split_header(line: str, sep: str | None) -> list[str]:
    toks = [t.strip() for t in line.split(sep)] if sep else line.split()
    merged: list[str] = []
    for tok in toks:
        # "Power (W)" split by spaces: glue the unit back onto its name
        if merged and sep is None and tok[:1] in "([（【":
            merged[-1] = f"{merged[-1]}{tok}"
        else:
            merged.append(tok)
    return merged


def parse_table(
    path: Path, text: str, overrides: dict[str, str], interval_s: float | None
) -> MonitorLog:
    """Parse a delimited or whitespace-aligned table (see module docstring)."""
    lines = [ln for ln in text.splitlines() if ln.strip()]
    if len(lines) < 2:
        raise InputError(
            f"{path}: fewer than two non-empty lines, so no header and samples; "
            f"give a monitoring log with a header line (or map its columns)"
        )
    header_line = lines[0].lstrip("#").strip()
    sep = "\t" if "\t" in header_line else "," if "," in header_line else None
    headers = _split_header(header_line, sep)
    if len(set(headers)) != len(headers):
        raise OptionError(
            f"{path}: repeated column names in the header; rename them or map the columns",
            "columns",
        )
    plan = plan_from_headers(headers, overrides, path)
    bad = 0
    raw = _read_separated(lines, headers, sep) if sep is not None else None
    if raw is None:  # whitespace table, or a CSV whose rows do not all match its header
        time_idx = headers.index(plan.sources["time_ns"]) if "time_ns" in plan.sources else 0
        raw, bad = _split_lines(lines[1:], headers, sep, time_idx, path)
    fmt = "table-csv" if sep else "table"
    log = build_frame(raw, plan, path, fmt, interval_s)
    if bad:
        log.warnings.append(f"{bad} lines with a different number of values were skipped")
    missing = [c for c in ("util_pct",) if c not in plan.sources]
    if missing and "sm_active" not in plan.sources:
        raise OptionError(
            f"{path}: no utilization column found (columns: {', '.join(headers)}); "
            f"name it with a column mapping, e.g. util=COLUMN",
            "columns",
        )
    return log
