"""Helpers shared by the monitor-log parsers: header aliases, value cleaning, timestamps.

Parsers read every cell as text, decide which raw column feeds which schema column
(``MONITOR_SCHEMA``), then call ``build_frame``; all numeric cleaning ("45 %", "1234 MiB",
"N/A", "-") and time handling happens here, columnar, in polars.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Final

import polars as pl

from traceforensics.ingest.monitor.schema import COLUMN_KEYS, conform_monitor
from traceforensics.model.errors import InputError

NS_PER_S: Final = 1_000_000_000
DEFAULT_INTERVAL_S: Final = 1.0

# A leading number, optionally signed / decimal / exponent; units after it are ignored.
_NUMBER_RE: Final = r"^\s*([-+]?(?:\d+\.?\d*|\.\d+)(?:[eE][-+]?\d+)?)"

#: Normalised header (see ``normalize_header``) -> schema column. Covers nvidia-smi query names,
#: common English spellings and the Chinese headers runbooks use.
HEADER_ALIASES: Final[dict[str, str]] = {
    # time
    "timestamp": "time_ns", "time": "time_ns", "datetime": "time_ns", "date_time": "time_ns",
    "ts": "time_ns", "时间戳": "time_ns", "时间": "time_ns", "采样时间": "time_ns",
    "日期时间": "time_ns",
    # gpu id
    "index": "gpu", "gpu": "gpu", "gpu_id": "gpu", "gpu_index": "gpu", "idx": "gpu",
    "device": "gpu", "卡号": "gpu", "gpu编号": "gpu", "gpu序号": "gpu", "显卡": "gpu",
    "设备": "gpu",
    # utilization
    "utilization.gpu": "util_pct", "util": "util_pct", "gpu_util": "util_pct",
    "utilization": "util_pct", "util_pct": "util_pct", "gpu_utilization": "util_pct",
    "gputl": "util_pct", "gpu利用率": "util_pct", "利用率": "util_pct", "gpu使用率": "util_pct",
    "算力利用率": "util_pct",
    "utilization.memory": "mem_util_pct", "mem_util": "mem_util_pct",
    "mem_util_pct": "mem_util_pct", "memory_util": "mem_util_pct",
    "显存利用率": "mem_util_pct", "显存带宽利用率": "mem_util_pct",
    # memory
    "memory.used": "mem_used_mib", "mem_used": "mem_used_mib", "memory_used": "mem_used_mib",
    "mem_used_mib": "mem_used_mib", "fb_used": "mem_used_mib", "显存占用": "mem_used_mib",
    "显存使用": "mem_used_mib", "显存使用量": "mem_used_mib", "已用显存": "mem_used_mib",
    "显存": "mem_used_mib",
    # clocks
    "clocks.sm": "sm_clock_mhz", "clocks.current.sm": "sm_clock_mhz", "sm_clock": "sm_clock_mhz",
    "sm_clock_mhz": "sm_clock_mhz", "clocks.gr": "sm_clock_mhz", "sm时钟": "sm_clock_mhz",
    "sm频率": "sm_clock_mhz", "核心频率": "sm_clock_mhz", "核心时钟": "sm_clock_mhz",
    "clocks.max.sm": "sm_clock_max_mhz", "clocks.max.gr": "sm_clock_max_mhz",
    "sm_clock_max": "sm_clock_max_mhz", "sm_clock_max_mhz": "sm_clock_max_mhz",
    "最大sm时钟": "sm_clock_max_mhz", "sm最大时钟": "sm_clock_max_mhz",
    "最大核心频率": "sm_clock_max_mhz",
    # temperature / power
    "temperature.gpu": "temperature_c", "temperature": "temperature_c", "temp": "temperature_c",
    "temperature_c": "temperature_c", "gpu_temp": "temperature_c", "温度": "temperature_c",
    "gpu温度": "temperature_c", "核心温度": "temperature_c",
    "power.draw": "power_w", "power.draw.instant": "power_w", "power.draw.average": "power_w",
    "power": "power_w", "power_w": "power_w", "power_draw": "power_w", "功耗": "power_w",
    "功率": "power_w",
    "power.limit": "power_limit_w", "enforced.power.limit": "power_limit_w",
    "power_limit": "power_limit_w", "power_limit_w": "power_limit_w",
    "功耗上限": "power_limit_w", "功率上限": "power_limit_w", "功耗限制": "power_limit_w",
    # DCGM-style activity
    "sm_active": "sm_active", "smact": "sm_active", "tensor_active": "tensor_active",
    "tenso": "tensor_active",
    # reasons
    "throttle_reasons": "throttle_reasons", "throttle": "throttle_reasons",
    "降频原因": "throttle_reasons",
}

_UNIT_RE: Final = re.compile(r"\s*[\[\(（【]([^\]\)）】]*)[\]\)）】]\s*$")


@dataclass
class ColumnPlan:
    """Which raw column feeds which schema column, and the factor its numbers are scaled by."""

    sources: dict[str, str] = field(default_factory=dict)  # schema column -> raw column
    scales: dict[str, float] = field(default_factory=dict)  # schema column -> factor


@dataclass
class MonitorLog:
    """A parsed monitoring log.

    ``time_kind`` is ``"absolute"`` (epoch ns from timestamps), ``"relative"`` (timestamps
    without a date, ns from the first sample) or ``"index"`` (no timestamps: sample index x
    ``interval_s``).
    """

    path: str
    source_format: str
    frame: pl.DataFrame
    time_kind: str
    interval_s: float | None
    warnings: list[str] = field(default_factory=list)


def split_unit(header: str) -> tuple[str, str]:
    """``"utilization.gpu [%]"`` -> ``("utilization.gpu", "%")``; ``"温度(°C)"`` -> ``("温度", "°C")``."""
    h = header.strip().strip('"').strip()
    m = _UNIT_RE.search(h)
    if m:
        return h[: m.start()].strip(), m.group(1).strip()
    return h, ""


def normalize_header(name: str) -> str:
    """Lower-case, spaces and hyphens to underscores: the key into ``HEADER_ALIASES``."""
    return re.sub(r"[\s\-]+", "_", name.strip().lower())


def unit_scale(unit: str) -> float:
    """Factor that brings a value in ``unit`` to the schema's unit (MiB, MHz, W)."""
    u = unit.strip().lower()
    return {"gb": 1024.0, "gib": 1024.0, "kb": 1 / 1024, "kib": 1 / 1024, "ghz": 1000.0,
            "khz": 1e-3, "mw": 1e-3, "kw": 1e3}.get(u, 1.0)


def parse_column_map(text: str | None, path: Path) -> dict[str, str]:
    """``"util=ColA,sm_clock=ColB"`` -> ``{"util_pct": "ColA", "sm_clock_mhz": "ColB"}``."""
    if not text:
        return {}
    out: dict[str, str] = {}
    for part in text.split(","):
        if not part.strip():
            continue
        key, sep, col = part.partition("=")
        k = key.strip().lower()
        if not sep or not col.strip() or k not in COLUMN_KEYS:
            raise InputError(
                f"{path}: bad --columns entry {part.strip()!r}; write KEY=COLUMN pairs with "
                f"KEY one of {', '.join(sorted(COLUMN_KEYS))}"
            )
        out[COLUMN_KEYS[k]] = col.strip()
    return out


def plan_from_headers(headers: list[str], overrides: dict[str, str], path: Path) -> ColumnPlan:
    """Map raw headers to schema columns: ``--columns`` first, then ``HEADER_ALIASES``."""
    plan = ColumnPlan()
    by_raw = {h.strip(): h for h in headers}
    by_base = {normalize_header(split_unit(h)[0]): h for h in headers}
    for target, want in overrides.items():
        raw = by_raw.get(want) or by_base.get(normalize_header(split_unit(want)[0]))
        if raw is None:
            raise InputError(
                f"{path}: --columns names {want!r}, which is not a column of this log "
                f"(columns: {', '.join(h.strip() for h in headers)}); fix the mapping"
            )
        plan.sources[target] = raw
        plan.scales[target] = unit_scale(split_unit(raw)[1])
    for raw in headers:
        base, unit = split_unit(raw)
        target = HEADER_ALIASES.get(normalize_header(base))
        if target and target not in plan.sources and raw not in plan.sources.values():
            plan.sources[target] = raw
            plan.scales[target] = unit_scale(unit)
    return plan


def numeric(col: str, scale: float = 1.0) -> pl.Expr:
    """Text cell -> Float64: the leading number ("45 %" -> 45.0); "N/A", "-", "" -> null."""
    expr = pl.col(col).str.extract(_NUMBER_RE, 1).cast(pl.Float64, strict=False)
    return expr * scale if scale != 1.0 else expr


_DATETIME_FORMATS: Final = (
    "%Y/%m/%d %H:%M:%S%.f",
    "%Y-%m-%d %H:%M:%S%.f",
    "%Y-%m-%dT%H:%M:%S%.f",
    "%Y%m%d %H:%M:%S%.f",
    "%Y.%m.%d %H:%M:%S%.f",
    "%m/%d/%Y %H:%M:%S%.f",
)


def parse_times(values: pl.Series) -> tuple[pl.Series, str] | None:
    """Timestamps as text -> (Int64 ns, kind). Kind is "absolute" (epoch ns) or "relative".

    Tried in order: date-time formats (naive times are taken as UTC), ISO with offset, epoch
    numbers (magnitude picks s/ms/us/ns), time of day (relative to the first sample, midnight
    wraps forward). ``None`` when no rule parses at least 90% of the non-empty cells.
    """
    text = values.cast(pl.String).str.strip_chars()
    n = max(int(text.is_not_null().sum()), 1)

    def good(parsed: pl.Series) -> bool:
        return int(parsed.is_not_null().sum()) >= 0.9 * n

    for fmt in _DATETIME_FORMATS:
        dt = text.str.to_datetime(fmt, strict=False, time_unit="ns")
        if good(dt):
            return dt.dt.epoch("ns").cast(pl.Int64), "absolute"
    dtz = text.str.to_datetime(strict=False, time_unit="ns", time_zone="UTC")
    if good(dtz):
        return dtz.dt.epoch("ns").cast(pl.Int64), "absolute"
    num = text.cast(pl.Float64, strict=False)
    if good(num):
        med = float(num.median() or 0.0)
        for bound, factor in ((1e17, 1.0), (1e14, 1e3), (1e11, 1e6), (1e8, 1e9)):
            if med >= bound:
                return (num * factor).round().cast(pl.Int64), "absolute"
        return (num * 1e9).round().cast(pl.Int64), "relative"
    tod = text.str.to_time("%H:%M:%S%.f", strict=False)
    if good(tod):
        ns = tod.cast(pl.Int64)  # ns since midnight
        wraps = (ns.diff().fill_null(0) < 0).cum_sum().cast(pl.Int64)
        day = 86_400 * NS_PER_S
        return ns + wraps * day - int(ns.drop_nulls()[0]), "relative"
    return None


def gpu_ids(values: pl.Series) -> pl.Series:
    """GPU column -> Int32 index: digits in the cell ("0", "GPU 3"); UUIDs or bus ids get the
    order of first appearance."""
    text = values.cast(pl.String).str.strip_chars()
    digits = text.str.extract(r"^(?:gpu\s*|GPU\s*)?(\d+)$", 1).cast(pl.Int32, strict=False)
    if int(digits.is_null().sum()) == int(text.is_null().sum()):
        return digits
    order = {v: i for i, v in enumerate(text.unique(maintain_order=True).to_list())}
    return text.replace_strict(order, default=None, return_dtype=pl.Int32)


def build_frame(
    raw: pl.DataFrame,
    plan: ColumnPlan,
    path: Path,
    source_format: str,
    interval_s: float | None,
    extra: dict[str, pl.Expr] | None = None,
) -> MonitorLog:
    """Turn an all-text raw table into a conformed ``MonitorLog`` following ``plan``.

    ``extra`` adds already-built expressions (e.g. throttle reasons) by schema column.
    """
    warnings: list[str] = []
    exprs: list[pl.Expr] = []
    for target, src in plan.sources.items():
        if target in ("time_ns", "gpu", "throttle_reasons"):
            continue
        exprs.append(numeric(src, plan.scales.get(target, 1.0)).alias(target))
    if "throttle_reasons" in plan.sources:
        exprs.append(pl.col(plan.sources["throttle_reasons"]).str.strip_chars()
                     .alias("throttle_reasons"))
    for target, expr in (extra or {}).items():
        exprs.append(expr.alias(target))
    if not exprs:
        raise InputError(
            f"{path}: no metric column recognised (columns: {', '.join(raw.columns)}); "
            f"name them with --columns, e.g. --columns util=ColA,sm_clock=ColB"
        )
    out = raw.select(exprs)
    gpu_src = plan.sources.get("gpu")
    gpu = gpu_ids(raw.get_column(gpu_src)) if gpu_src else pl.repeat(0, raw.height, dtype=pl.Int32, eager=True)
    out = out.with_columns(gpu.fill_null(0).alias("gpu"))
    time_kind = "index"
    time_src = plan.sources.get("time_ns")
    if time_src is not None:
        parsed = parse_times(raw.get_column(time_src))
        if parsed is None:
            warnings.append(f"timestamps in column {time_src!r} could not be read; using sample index")
        else:
            out = out.with_columns(parsed[0].alias("time_ns"))
            time_kind = parsed[1]
            out = out.filter(pl.col("time_ns").is_not_null())
    step_s = interval_s
    if time_kind == "index":
        step_s = interval_s or DEFAULT_INTERVAL_S
        step_ns = round(step_s * NS_PER_S)
        out = out.with_columns(
            (pl.int_range(pl.len(), dtype=pl.Int64).over("gpu") * step_ns).alias("time_ns")
        )
    frame = conform_monitor(out)
    if frame.height == 0:
        raise InputError(f"{path}: no samples could be read; check the file, or map columns with --columns")
    return MonitorLog(str(path), source_format, frame, time_kind, step_s, warnings)
