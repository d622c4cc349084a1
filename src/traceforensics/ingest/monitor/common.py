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

from traceforensics.ingest.monitor.aliases import HEADER_ALIASES
from traceforensics.model.errors import OptionError
from traceforensics.model.monitor import COLUMN_KEYS, THROTTLE_BITS, MonitorLog, conform_monitor
from traceforensics.model.units import NS_PER_S

#: Intermediate column carrying an NVML clocks-event reason bit mask (see ``THROTTLE_BITS``).
MASK_COLUMN: Final = "_throttle_mask"
DEFAULT_INTERVAL_S: Final = 1.0

# A leading number, optionally signed / decimal / exponent; units after it are ignored.
_NUMBER_RE: Final = r"^\s*([-+]?(?:\d+\.?\d*|\.\d+)(?:[eE][-+]?\d+)?)"

#: Headers that identify a GPU without numbering it; used only when no index column exists.
GPU_ID_FALLBACKS: Final = frozenset({"pci.bus_id", "uuid", "gpu_uuid", "gpu_bus_id", "bus_id"})
_UNIT_RE: Final = re.compile(r"\s*[\[\(（【]([^\]\)）】]*)[\]\)）】]\s*$")


@dataclass
class ColumnPlan:
    """Which raw column feeds which schema column, and the factor its numbers are scaled by."""

    sources: dict[str, str] = field(default_factory=dict)  # schema column -> raw column
    scales: dict[str, float] = field(default_factory=dict)  # schema column -> factor


def split_unit(header: str) -> tuple[str, str]:
    """Header -> (name, unit): ``"utilization.gpu [%]"`` -> ``("utilization.gpu", "%")``,
    ``"温度(°C)"`` -> ``("温度", "°C")``."""
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
    return {
        "gb": 1024.0,
        "gib": 1024.0,
        "kb": 1 / 1024,
        "kib": 1 / 1024,
        "ghz": 1000.0,
        "khz": 1e-3,
        "mw": 1e-3,
        "kw": 1e3,
    }.get(u, 1.0)


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
            raise OptionError(
                f"{path}: bad column mapping entry {part.strip()!r}; write KEY=COLUMN pairs "
                f"with KEY one of {', '.join(sorted(COLUMN_KEYS))}",
                "columns",
            )
        out[COLUMN_KEYS[k]] = col.strip()
    return out


def plan_from_headers(headers: list[str], overrides: dict[str, str], path: Path) -> ColumnPlan:
    """Map raw headers to schema columns: the column mapping first, then ``HEADER_ALIASES``."""
    plan = ColumnPlan()
    by_raw = {h.strip(): h for h in headers}
    by_base = {normalize_header(split_unit(h)[0]): h for h in headers}
    for target, want in overrides.items():
        found = by_raw.get(want) or by_base.get(normalize_header(split_unit(want)[0]))
        if found is None:
            raise OptionError(
                f"{path}: the column mapping names {want!r}, which is not a column of this log "
                f"(columns: {', '.join(h.strip() for h in headers)}); fix the mapping",
                "columns",
            )
        plan.sources[target] = found
        plan.scales[target] = unit_scale(split_unit(found)[1])
    for raw in headers:
        base, unit = split_unit(raw)
        alias = HEADER_ALIASES.get(normalize_header(base))
        if alias and alias not in plan.sources and raw not in plan.sources.values():
            plan.sources[alias] = raw
            plan.scales[alias] = unit_scale(unit)
    if "gpu" not in plan.sources:
        # no index column: a UUID or PCI bus id still tells the GPUs apart
        ids = [h for h in headers if normalize_header(split_unit(h)[0]) in GPU_ID_FALLBACKS]
        if ids:
            plan.sources["gpu"] = ids[0]
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
_DAY_NS: Final = 86_400 * NS_PER_S
#: Rows sniffed to choose a timestamp rule and a GPU-id rule before the columnar pass.
SNIFF_ROWS: Final = 2000


def mask_names(mask: int) -> str:
    """NVML reason bit mask -> comma-separated reason names ("" for 0)."""
    return ",".join(name for bit, name in THROTTLE_BITS.items() if mask & bit)


def time_rule(sample: pl.Series) -> tuple[str, object] | None:
    """Choose how to read timestamps from a sample of the column.

    Tried in order: date-time formats (naive times are taken as UTC), ISO with offset, epoch
    numbers (magnitude picks s/ms/us/ns), plain seconds, time of day. A rule must parse >= 90%
    of the non-empty sample cells. Returns (rule, parameter) or None.
    """
    text = sample.cast(pl.String).str.strip_chars()
    n = max(int(text.is_not_null().sum()), 1)

    def good(parsed: pl.Series) -> bool:
        return int(parsed.is_not_null().sum()) >= 0.9 * n

    for fmt in _DATETIME_FORMATS:
        if good(text.str.to_datetime(fmt, strict=False, time_unit="ns")):
            return "format", fmt
    if good(text.str.to_datetime(strict=False, time_unit="ns", time_zone="UTC")):
        return "iso_tz", None
    num = text.cast(pl.Float64, strict=False)
    if good(num):
        med = float(num.cast(pl.Float64).median() or 0.0)  # type: ignore[arg-type]
        for bound, factor in ((1e17, 1.0), (1e14, 1e3), (1e11, 1e6), (1e8, 1e9)):
            if med >= bound:
                return "epoch", factor
        return "seconds", 1e9
    if good(text.str.to_time("%H:%M:%S%.f", strict=False)):
        return "time_of_day", None
    return None


def time_expr(col: str, rule: tuple[str, object]) -> tuple[pl.Expr, str]:
    """Expression giving Int64 ns for ``rule``; kind "absolute" (epoch) or "relative"."""
    text = pl.col(col).str.strip_chars()
    kind, param = rule
    if kind == "format":
        dt = text.str.to_datetime(str(param), strict=False, time_unit="ns")
        return dt.dt.epoch("ns").cast(pl.Int64), "absolute"
    if kind == "iso_tz":
        dt = text.str.to_datetime(strict=False, time_unit="ns", time_zone="UTC")
        return dt.dt.epoch("ns").cast(pl.Int64), "absolute"
    if kind in ("epoch", "seconds"):
        factor = float(param)  # type: ignore[arg-type]
        ns = (text.cast(pl.Float64, strict=False) * factor).round().cast(pl.Int64)
        return ns, "absolute" if kind == "epoch" else "relative"
    # time of day: ns since midnight, a step backwards means the next day
    tod = text.str.to_time("%H:%M:%S%.f", strict=False).cast(pl.Int64)
    wraps = (tod.diff().fill_null(0) < 0).cast(pl.Int64).cum_sum()
    return tod + wraps * _DAY_NS - tod.drop_nulls().first(), "relative"


_GPU_DIGITS: Final = r"^(?:[Gg][Pp][Uu]\s*)?(\d+)$"


def gpu_expr(lf: pl.LazyFrame, col: str, sample: pl.Series) -> pl.Expr:
    """GPU column -> Int32 index: digits in the cell ("0", "GPU 3"); UUIDs or bus ids get the
    order of first appearance."""
    text = sample.cast(pl.String).str.strip_chars()
    digits = text.str.extract(_GPU_DIGITS, 1)
    if int(digits.is_null().sum()) == int(text.is_null().sum()):
        return (
            pl.col(col).str.strip_chars().str.extract(_GPU_DIGITS, 1).cast(pl.Int32, strict=False)
        )
    uniq = (
        lf.select(pl.col(col).str.strip_chars().unique(maintain_order=True)).collect().to_series()
    )
    order = {v: i for i, v in enumerate(uniq.to_list())}
    text_col = pl.col(col).str.strip_chars()
    return text_col.replace_strict(order, default=None, return_dtype=pl.Int32)


#: Schema columns that ``build_frame`` reads with their own rule, not as plain numbers.
_NON_NUMERIC_TARGETS: Final = ("time_ns", "gpu", "throttle_reasons")


def _metric_exprs(
    plan: ColumnPlan, extra: dict[str, pl.Expr] | None, columns: list[str], path: Path
) -> list[pl.Expr]:
    """One expression per metric column: mapped numbers scaled to the schema unit (MiB, MHz,
    W; see ``unit_scale``), throttle reasons as stripped text, then ``extra`` as given.

    Raises ``OptionError`` when there is none: a log without metrics cannot be analysed.
    """
    exprs: list[pl.Expr] = []
    for target, src in plan.sources.items():
        if target in _NON_NUMERIC_TARGETS:
            continue
        exprs.append(numeric(src, plan.scales.get(target, 1.0)).alias(target))
    if "throttle_reasons" in plan.sources:
        exprs.append(
            pl.col(plan.sources["throttle_reasons"]).str.strip_chars().alias("throttle_reasons")
        )
    for target, expr in (extra or {}).items():
        exprs.append(expr.alias(target))
    if not exprs:
        raise OptionError(
            f"{path}: no metric column recognised (columns: {', '.join(columns)}); "
            f"name them with a column mapping, e.g. util=ColA,sm_clock=ColB",
            "columns",
        )
    return exprs


def _gpu_column(lf: pl.LazyFrame, plan: ColumnPlan, sample: pl.DataFrame) -> pl.Expr:
    """``gpu`` (Int32): the mapped GPU column read by ``gpu_expr``; 0 for a log without one
    and for cells it cannot read."""
    gpu_src = plan.sources.get("gpu")
    gpu = gpu_expr(lf, gpu_src, sample.get_column(gpu_src)) if gpu_src else pl.lit(0)
    return gpu.cast(pl.Int32).fill_null(0).alias("gpu")


def _time_column(
    plan: ColumnPlan, sample: pl.DataFrame, warnings: list[str]
) -> tuple[pl.Expr | None, str]:
    """``(time_ns expression, time kind)``; kind ``absolute``/``relative`` (``time_expr``), or
    ``index`` with no expression when there is no time column or ``time_rule`` cannot read it
    (warned): the sample index then stands in for time."""
    time_src = plan.sources.get("time_ns")
    if time_src is None:
        return None, "index"
    rule = time_rule(sample.get_column(time_src))
    if rule is None:
        warnings.append(f"timestamps in column {time_src!r} could not be read; using sample index")
        return None, "index"
    expr, time_kind = time_expr(time_src, rule)
    return expr.alias("time_ns"), time_kind


def _named_throttle_reasons(out: pl.DataFrame) -> pl.DataFrame:
    """Replace the ``MASK_COLUMN`` bit masks (if any) by ``throttle_reasons`` names; each
    distinct mask is decoded once."""
    if MASK_COLUMN not in out.columns:
        return out
    masks = out.get_column(MASK_COLUMN).drop_nulls().unique().to_list()
    names = {m: mask_names(int(m)) for m in masks}
    return out.with_columns(
        pl.col(MASK_COLUMN)
        .replace_strict(names, default=None, return_dtype=pl.String)
        .alias("throttle_reasons")
    ).drop(MASK_COLUMN)


def _drop_unreadable_times(out: pl.DataFrame, warnings: list[str]) -> pl.DataFrame:
    """Rows whose timestamp could not be read (null ``time_ns``) are skipped, and counted in
    ``warnings``: a sample without a time cannot be placed."""
    bad = out.get_column("time_ns").null_count()
    if not bad:
        return out
    warnings.append(f"{bad} rows with unreadable timestamps were skipped")
    return out.filter(pl.col("time_ns").is_not_null())


def _index_times(out: pl.DataFrame, interval_s: float | None) -> tuple[pl.DataFrame, float]:
    """``(frame with time_ns, step in s)`` for a log without usable timestamps: sample ``k``
    of each GPU is at ``k * step`` ns, the step being ``interval_s`` (s), else
    ``DEFAULT_INTERVAL_S``."""
    step_s = interval_s or DEFAULT_INTERVAL_S
    step_ns = round(step_s * NS_PER_S)
    out = out.with_columns(
        (pl.int_range(pl.len(), dtype=pl.Int64).over("gpu") * step_ns).alias("time_ns")
    )
    return out, step_s


def build_frame(
    raw: pl.LazyFrame | pl.DataFrame,
    plan: ColumnPlan,
    path: Path,
    source_format: str,
    interval_s: float | None,
    extra: dict[str, pl.Expr] | None = None,
) -> MonitorLog:
    """Turn an all-text raw table into a conformed ``MonitorLog`` following ``plan``.

    Columnar and lazy: timestamp and GPU-id rules are chosen on the first ``SNIFF_ROWS`` rows,
    then one streaming pass reads only the mapped columns. ``extra`` adds already-built
    expressions (e.g. throttle reasons) by schema column.
    """
    lf = raw.lazy()
    warnings: list[str] = []
    exprs = _metric_exprs(plan, extra, lf.collect_schema().names(), path)
    sample = lf.head(SNIFF_ROWS).collect()
    exprs.append(_gpu_column(lf, plan, sample))
    time_ns, time_kind = _time_column(plan, sample, warnings)
    if time_ns is not None:
        exprs.append(time_ns)
    # rows stay in log order: sorting a multi-GPU log by GPU would hold a second copy of the
    # table at peak; analyses take one GPU at a time (``gpu_rows``)
    out = _named_throttle_reasons(lf.select(exprs).collect())
    step_s: float | None
    if time_kind == "index":
        out, step_s = _index_times(out, interval_s)
    else:
        out = _drop_unreadable_times(out, warnings)
        step_s = interval_s
    frame = conform_monitor(out, sort=False)
    if frame.height == 0:
        raise OptionError(
            f"{path}: no samples could be read; check the file, or map its columns",
            "columns",
        )
    return MonitorLog(str(path), source_format, frame, time_kind, step_s, warnings)
