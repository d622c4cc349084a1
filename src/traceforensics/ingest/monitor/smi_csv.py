"""``nvidia-smi --query-gpu=... --format=csv[,nounits] [-l N | -lms N]`` output.

    timestamp, index, utilization.gpu [%], memory.used [MiB], clocks.sm [MHz], power.draw [W]
    2025/03/21 10:00:01.123, 0, 98 %, 21432 MiB, 1815 MHz, 250.12 W

Any subset of fields, in any order; units in the values or not (``nounits``); "N/A",
"[N/A]" and "[Not Supported]" become nulls. Throttle reasons come either from the hex mask
``clocks_throttle_reasons.active`` / ``clocks_event_reasons.active`` or from the per-reason
columns that print "Active" / "Not Active".
"""

from __future__ import annotations

from pathlib import Path
from typing import Final

import polars as pl

from traceforensics.ingest.monitor.common import (
    MASK_COLUMN,
    build_frame,
    normalize_header,
    plan_from_headers,
    split_unit,
)
from traceforensics.model.errors import OptionError
from traceforensics.model.monitor import MonitorLog

REASON_PREFIXES: Final = ("clocks_throttle_reasons.", "clocks_event_reasons.")
#: Reasons that are not a slowdown under load (the GPU is idle, or clocks were set on purpose).
_IGNORED_REASON_FIELDS: Final = frozenset({"supported"})


def is_smi_csv_header(line: str) -> bool:
    """True when a first line looks like an nvidia-smi ``--format=csv`` header."""
    if "," not in line:
        return False
    names = [normalize_header(split_unit(h)[0]) for h in line.split(",")]
    return any(
        n.startswith(
            ("utilization.", "clocks.", "temperature.", "power.", "memory.", *REASON_PREFIXES)
        )
        for n in names
    )


def reason_expr(headers: list[str]) -> pl.Expr | None:
    """Throttle-reason text from the mask column, else from the per-reason Active columns."""
    by_name = {normalize_header(split_unit(h)[0]): h for h in headers}
    for prefix in REASON_PREFIXES:
        raw = by_name.get(prefix + "active")
        if raw is not None:
            hexdigits = pl.col(raw).str.strip_chars().str.replace(r"^0[xX]", "")
            # the mask stays an integer through the scan; ``build_frame`` names its few
            # distinct values afterwards (far cheaper than string work on every row)
            return hexdigits.str.to_integer(base=16, strict=False).alias(MASK_COLUMN)
    parts: list[pl.Expr] = []
    known: list[pl.Expr] = []
    for name, raw in by_name.items():
        if not name.startswith(REASON_PREFIXES):
            continue
        reason = name.split(".", 1)[1]
        if reason in _IGNORED_REASON_FIELDS:
            continue
        cell = pl.col(raw).str.strip_chars()
        parts.append(pl.when(cell == "Active").then(pl.lit(reason)))
        known.append(cell.is_in(["Active", "Not Active"]))
    if not parts:
        return None
    return pl.when(pl.any_horizontal(known)).then(
        pl.concat_str(parts, separator=",", ignore_nulls=True)
    )


def parse_smi_csv(path: Path, overrides: dict[str, str], interval_s: float | None) -> MonitorLog:
    """Read an nvidia-smi query CSV with polars' reader (all cells as text, then cleaned)."""
    try:
        lf = pl.scan_csv(
            path,
            infer_schema=False,
            has_header=True,
            truncate_ragged_lines=True,
            encoding="utf8-lossy",
        )
        headers = lf.collect_schema().names()
    except (pl.exceptions.ComputeError, pl.exceptions.NoDataError) as err:
        raise OptionError(
            f"{path}: not a readable nvidia-smi CSV ({str(err).splitlines()[0]}); "
            f"check the file or map its columns",
            "columns",
        ) from err
    first = headers[0]
    # logs appended across restarts repeat the header line; drop those rows
    raw = lf.filter(pl.col(first).str.strip_chars() != first.strip())
    plan = plan_from_headers(headers, overrides, path)
    extra: dict[str, pl.Expr] = {}
    reasons = reason_expr(headers)
    if reasons is not None and "throttle_reasons" not in plan.sources:
        is_mask = reasons.meta.output_name() == MASK_COLUMN
        extra[MASK_COLUMN if is_mask else "throttle_reasons"] = reasons
    return build_frame(raw, plan, path, "nvidia-smi-csv", interval_s, extra)
