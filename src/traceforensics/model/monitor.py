"""The monitoring-sample table: one row per (GPU, sample), whatever tool wrote the log.

Every monitor parser returns a polars DataFrame with exactly these columns, in this order, with
these dtypes (``conform_monitor`` makes it so). A metric the log does not carry is an all-null
column, never a made-up value.

Columns
-------
gpu               Int32    GPU index as the log numbers it (0 when the log names none)
time_ns           Int64    epoch ns when the log has absolute timestamps (naive local times are
                           read as UTC); otherwise sample index x interval, ns from 0
util_pct          Float64  GPU utilization, % of the sample period a kernel ran (nvidia-smi/NVML)
mem_util_pct      Float64  memory-controller (or DCGM copy-engine) utilization, %
mem_used_mib      Float64  device memory in use, MiB (nvidia-smi "MB"/"MiB" are both MiB)
sm_clock_mhz      Float64  current SM (graphics/processor) clock, MHz
sm_clock_max_mhz  Float64  maximum SM clock, MHz
temperature_c     Float64  GPU core temperature, degrees Celsius
power_w           Float64  board power draw, W
power_limit_w     Float64  enforced power limit, W
sm_active         Float64  DCGM SM activity, fraction 0..1 of SM-cycles with a warp resident
tensor_active     Float64  DCGM tensor-pipe activity, fraction 0..1
throttle_reasons  String   comma-separated active clock-event reasons (e.g. "sw_power_cap");
                           "" when the log says none is active; null when the log does not say

Rows are in log order (a multi-GPU log interleaves GPUs); take one GPU's series with
``gpu_rows``.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Final

import polars as pl

MONITOR_SCHEMA: Final[dict[str, pl.DataType]] = {
    "gpu": pl.Int32(),
    "time_ns": pl.Int64(),
    "util_pct": pl.Float64(),
    "mem_util_pct": pl.Float64(),
    "mem_used_mib": pl.Float64(),
    "sm_clock_mhz": pl.Float64(),
    "sm_clock_max_mhz": pl.Float64(),
    "temperature_c": pl.Float64(),
    "power_w": pl.Float64(),
    "power_limit_w": pl.Float64(),
    "sm_active": pl.Float64(),
    "tensor_active": pl.Float64(),
    "throttle_reasons": pl.String(),
}

#: ``--columns`` keys (short names users type) -> schema column.
COLUMN_KEYS: Final[dict[str, str]] = {
    "time": "time_ns",
    "timestamp": "time_ns",
    "gpu": "gpu",
    "util": "util_pct",
    "mem_util": "mem_util_pct",
    "mem_used": "mem_used_mib",
    "sm_clock": "sm_clock_mhz",
    "sm_clock_max": "sm_clock_max_mhz",
    "temperature": "temperature_c",
    "temp": "temperature_c",
    "power": "power_w",
    "power_limit": "power_limit_w",
    "sm_active": "sm_active",
    "tensor_active": "tensor_active",
    "throttle": "throttle_reasons",
}

#: Bits of NVML's clocks-event (throttle) reason mask, as ``clocks_throttle_reasons.active``
#: prints it in hex. Names follow the nvidia-smi field suffixes.
THROTTLE_BITS: Final[dict[int, str]] = {
    0x1: "gpu_idle",
    0x2: "applications_clocks_setting",
    0x4: "sw_power_cap",
    0x8: "hw_slowdown",
    0x10: "sync_boost",
    0x20: "sw_thermal_slowdown",
    0x40: "hw_thermal_slowdown",
    0x80: "hw_power_brake_slowdown",
    0x100: "display_clock_setting",
}


def conform_monitor(frame: pl.DataFrame, sort: bool = True) -> pl.DataFrame:
    """Add missing columns as nulls, cast to the declared dtypes, order columns, sort rows.

    Rows are sorted by (gpu, time_ns) so analyses can treat each GPU's rows as a time series;
    ``sort=False`` when the caller already sorted them.
    """
    exprs: list[pl.Expr] = []
    for col, dtype in MONITOR_SCHEMA.items():
        if col in frame.columns:
            exprs.append(pl.col(col).cast(dtype))
        elif col == "gpu":
            exprs.append(pl.lit(0, dtype=dtype).alias(col))
        else:
            exprs.append(pl.lit(None, dtype=dtype).alias(col))
    out = frame.select(exprs)
    return out.sort(["gpu", "time_ns"], maintain_order=True) if sort else out


def gpu_ids(frame: pl.DataFrame) -> list[int]:
    """The GPU indices present, sorted."""
    return sorted(int(g) for g in frame.get_column("gpu").unique().to_list())


def gpu_rows(frame: pl.DataFrame, gpu: int) -> pl.DataFrame:
    """One GPU's rows in time order (a copy of 1/N of the table, not of all of it)."""
    return frame.filter(pl.col("gpu") == gpu).sort("time_ns", maintain_order=True)


def first_time_ns(frame: pl.DataFrame) -> int:
    """Earliest ``time_ns`` of the table (0 when empty): the origin of report times."""
    if frame.height == 0:
        return 0
    value = frame.select(pl.col("time_ns").min()).item()
    return int(value) if value is not None else 0


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
