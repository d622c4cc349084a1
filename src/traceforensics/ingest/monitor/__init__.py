"""Monitoring-log ingesters: nvidia-smi query CSV, nvidia-smi dmon, dcgmi dmon, plain tables.

``load_monitor_log`` sniffs the format from the first lines and returns a ``MonitorLog`` whose
``frame`` follows ``MONITOR_SCHEMA`` (see ``ingest.monitor.schema``).
"""

from __future__ import annotations

import re
from dataclasses import replace
from pathlib import Path

import polars as pl

from traceforensics.ingest.detect import check_input
from traceforensics.ingest.monitor.common import parse_column_map
from traceforensics.ingest.monitor.dmon import (
    is_dcgmi_header,
    is_smi_dmon_header,
    parse_dcgmi_dmon,
    parse_smi_dmon,
)
from traceforensics.ingest.monitor.smi_csv import is_smi_csv_header, parse_smi_csv
from traceforensics.ingest.monitor.table import parse_table
from traceforensics.model.errors import InputError, OptionError
from traceforensics.model.monitor import MONITOR_SCHEMA, MonitorLog
from traceforensics.model.units import NS_PER_S

_SNIFF_BYTES = 65_536


def _decode(data: bytes) -> str:
    """UTF-8 (with or without BOM), else GB18030 — Chinese runbooks are often saved in GBK."""
    try:
        return data.decode("utf-8-sig")
    except UnicodeDecodeError:
        try:
            return data.decode("gb18030")
        except UnicodeDecodeError as err:
            raise ValueError("not UTF-8 or GB18030 text") from err


def sniff_monitor_format(head: str) -> str:
    """Format of a log from its first lines: ``nvidia-smi-csv``, ``nvidia-smi-dmon``,
    ``dcgmi-dmon`` or ``table`` (anything else with a header line)."""
    first = next((ln.strip() for ln in head.splitlines() if ln.strip()), "")
    if is_dcgmi_header(first):
        return "dcgmi-dmon"
    if is_smi_dmon_header(first):
        return "nvidia-smi-dmon"
    if is_smi_csv_header(first):
        return "nvidia-smi-csv"
    return "table"


def load_monitor_log(
    path: str | Path, columns: str | None = None, interval_s: float | None = None
) -> MonitorLog:
    """Read a monitoring log of any supported format.

    ``columns`` is a column mapping (``util=ColA,sm_clock=ColB``); with it the file is
    read as a plain table (header names are still matched for unmapped metrics).
    ``interval_s`` is the sample interval used when the log has no timestamps (default 1 s).
    Raises ``InputError`` with a one-line "<file>: <problem>; <what to do>" message.
    """
    p = Path(path)
    check_input(p)
    if p.is_dir():
        raise InputError(f"{p}: is a directory; give the path of a monitoring log file")
    if interval_s is not None and interval_s <= 0:
        raise OptionError(
            f"{p}: interval_s {interval_s!r} is not positive; pass the sampling interval in "
            "seconds, e.g. 1",
            "interval_s",
        )
    overrides = parse_column_map(columns, p)
    try:
        with p.open("rb") as fh:
            head_bytes = fh.read(_SNIFF_BYTES)
        head = _decode(head_bytes[: head_bytes.rfind(b"\n") + 1] or head_bytes)
    except (OSError, ValueError) as err:
        raise InputError(f"{p}: cannot read as text ({err}); give a text monitoring log") from err
    if not head.strip():
        raise InputError(f"{p}: the file is empty; give a monitoring log with samples")
    fmt = "table" if overrides else sniff_monitor_format(head)
    try:
        return _parse(p, fmt, overrides, interval_s)
    except pl.exceptions.PolarsError as err:
        # a layout the parsers did not foresee (mixed separators, ragged rows): one line
        first = " ".join(str(err).split())[:160]
        raise OptionError(
            f"{p}: the {fmt} log could not be parsed ({first}); check the file or map its columns",
            "columns",
        ) from err


def _parse(p: Path, fmt: str, overrides: dict[str, str], interval_s: float | None) -> MonitorLog:
    if fmt == "nvidia-smi-csv":
        return parse_smi_csv(p, overrides, interval_s)
    try:
        text = _decode(p.read_bytes())
    except (OSError, ValueError) as err:
        raise InputError(f"{p}: cannot read as text ({err}); give a text monitoring log") from err
    if fmt == "dcgmi-dmon":
        return parse_dcgmi_dmon(p, text, interval_s)
    if fmt == "nvidia-smi-dmon":
        return parse_smi_dmon(p, text, interval_s)
    return parse_table(p, text, overrides, interval_s)


def parse_utc_offset(text: str) -> int:
    """``+08:00``, ``-5``, ``+0530`` or ``UTC`` -> offset of local time from UTC in ns."""
    m = re.fullmatch(r"(?:UTC)?\s*([+-])?(\d{1,2})(?::?(\d{2}))?", text.strip(), re.IGNORECASE)
    if text.strip().upper() in ("UTC", "Z", "0"):
        return 0
    if m is None or int(m.group(2)) > 14 or int(m.group(3) or 0) >= 60:
        raise OptionError(
            f"UTC offset {text!r}: not a UTC offset; write it like +08:00, -05:00 or UTC",
            "utc_offset",
        )
    sign = -1 if m.group(1) == "-" else 1
    return sign * (int(m.group(2)) * 3600 + int(m.group(3) or 0) * 60) * NS_PER_S


def shift_to_utc(log: MonitorLog, utc_offset_ns: int) -> MonitorLog:
    """A log whose timestamps were local time (``utc_offset_ns`` ahead of UTC), moved to UTC.

    nvidia-smi prints the machine's local time without a zone; the trace's clock is UTC epoch.
    Logs without absolute timestamps are returned unchanged."""
    if log.time_kind != "absolute" or utc_offset_ns == 0:
        return log
    frame = log.frame.with_columns(pl.col("time_ns") - utc_offset_ns)
    return replace(log, frame=frame)


def load_monitor_log_utc(
    path: str, *, columns: str | None = None, utc_offset: str = "UTC"
) -> MonitorLog:
    """``load_monitor_log`` with its timestamps moved to UTC from the zone ``utc_offset``
    (``parse_utc_offset``); a bad offset fails before the file is read."""
    offset = parse_utc_offset(utc_offset)
    return shift_to_utc(load_monitor_log(path, columns=columns), offset)


__all__ = [
    "MONITOR_SCHEMA",
    "MonitorLog",
    "load_monitor_log",
    "load_monitor_log_utc",
    "parse_utc_offset",
    "shift_to_utc",
    "sniff_monitor_format",
]
