"""``nvidia-smi dmon`` and ``dcgmi dmon`` text output.

nvidia-smi dmon (``-o DT`` adds the Date and Time columns; the header repeats every screen)::

    #Date       Time        gpu   pwr  gtemp  mtemp     sm    mem    enc    dec   mclk   pclk
    #YYYYMMDD   HH:MM:SS    Idx     W      C      C      %      %      %      %    MHz    MHz
     20250321   10:00:01      0    43     48      -     98     40      0      0   877   1815

dcgmi dmon (``-e`` field ids; headers are DCGM short tags, entity ids are two tokens)::

    #Entity   GPUTL  SMACT  TENSO  MCUTL
    ID
    GPU 0     98     0.812  0.301  40

Missing values are "-" (nvidia-smi) or "N/A" (dcgmi). Without timestamps the samples are
``interval_s`` apart (both tools default to 1 s).
"""

from __future__ import annotations

from pathlib import Path
from typing import Final

import polars as pl

from traceforensics.ingest.monitor.common import ColumnPlan, build_frame, numeric
from traceforensics.model.errors import InputError
from traceforensics.model.monitor import MonitorLog

#: nvidia-smi dmon column -> schema column. ``pviol``/``tviol`` are power/thermal violation.
SMI_DMON_COLUMNS: Final[dict[str, str]] = {
    "gpu": "gpu",
    "pwr": "power_w",
    "gtemp": "temperature_c",
    "sm": "util_pct",
    "mem": "mem_util_pct",
    "pclk": "sm_clock_mhz",
    "fb": "mem_used_mib",
}

#: DCGM short tag, field name and field id -> schema column.
DCGM_FIELDS: Final[dict[str, str]] = {
    "gputl": "util_pct",
    "dcgm_fi_dev_gpu_util": "util_pct",
    "203": "util_pct",
    "mcutl": "mem_util_pct",
    "dcgm_fi_dev_mem_copy_util": "mem_util_pct",
    "204": "mem_util_pct",
    "smact": "sm_active",
    "dcgm_fi_prof_sm_active": "sm_active",
    "1002": "sm_active",
    "tenso": "tensor_active",
    "dcgm_fi_prof_pipe_tensor_active": "tensor_active",
    "1004": "tensor_active",
    "smclk": "sm_clock_mhz",
    "dcgm_fi_dev_sm_clock": "sm_clock_mhz",
    "100": "sm_clock_mhz",
    "dcgm_fi_dev_max_sm_clock": "sm_clock_max_mhz",
    "110": "sm_clock_max_mhz",
    "tmptr": "temperature_c",
    "dcgm_fi_dev_gpu_temp": "temperature_c",
    "150": "temperature_c",
    "power": "power_w",
    "pwusg": "power_w",
    "dcgm_fi_dev_power_usage": "power_w",
    "155": "power_w",
    "dcgm_fi_dev_power_mgmt_limit": "power_limit_w",
    "160": "power_limit_w",
    "fbusd": "mem_used_mib",
    "dcgm_fi_dev_fb_used": "mem_used_mib",
    "252": "mem_used_mib",
}


def is_smi_dmon_header(line: str) -> bool:
    toks = line.lstrip("#").lower().split()
    return (
        line.startswith("#") and "gpu" in toks and bool({"sm", "pwr", "pclk", "gtemp"} & set(toks))
    )


def is_dcgmi_header(line: str) -> bool:
    return line.lstrip("#").strip().lower().startswith("entity")


def _rows_to_frame(names: list[str], rows: list[list[str]], path: Path) -> pl.DataFrame:
    if not rows:
        raise InputError(f"{path}: a dmon header but no sample lines; check the log is complete")
    return pl.DataFrame(rows, schema=dict.fromkeys(names, pl.String), orient="row")


def parse_smi_dmon(path: Path, text: str, interval_s: float | None) -> MonitorLog:
    """Parse nvidia-smi dmon; repeated header lines are skipped, ragged lines dropped."""
    names: list[str] = []
    rows: list[list[str]] = []
    for line in text.splitlines():
        if line.startswith("#"):
            if not names:
                names = [t.lower() for t in line[1:].split()]
            continue
        toks = line.split()
        if names and len(toks) == len(names):
            rows.append(toks)
    raw = _rows_to_frame(names, rows, path)
    plan = ColumnPlan()
    for col, target in SMI_DMON_COLUMNS.items():
        if col in names:
            plan.sources[target] = col
    if "date" in names and "time" in names:
        raw = raw.with_columns(pl.concat_str(["date", "time"], separator=" ").alias("_ts"))
        plan.sources["time_ns"] = "_ts"
    elif "time" in names:
        plan.sources["time_ns"] = "time"
    extra: dict[str, pl.Expr] = {}
    viol = [
        (c, name)
        for c, name in (("pviol", "power_violation"), ("tviol", "thermal_violation"))
        if c in names
    ]
    if viol:
        parts = [pl.when(numeric(c) > 0).then(pl.lit(name)) for c, name in viol]
        known = [numeric(c).is_not_null() for c, _ in viol]
        extra["throttle_reasons"] = pl.when(pl.any_horizontal(known)).then(
            pl.concat_str(parts, separator=",", ignore_nulls=True)
        )
    return build_frame(raw, plan, path, "nvidia-smi-dmon", interval_s, extra)


def parse_dcgmi_dmon(path: Path, text: str, interval_s: float | None) -> MonitorLog:
    """Parse dcgmi dmon; only ``GPU n`` entities are kept (MIG instances are skipped)."""
    names: list[str] = []
    rows: list[list[str]] = []
    for line in text.splitlines():
        toks = line.split()
        if not toks:
            continue
        if line.startswith("#"):
            if not names:
                names = ["entity", *(t.lower() for t in toks[1:])]
            continue
        if toks[0] != "GPU" or len(toks) < 2:
            continue  # "ID" units line, MIG entities, error text
        row = [toks[1], *toks[2:]]
        if len(row) == len(names):
            rows.append(row)
    raw = _rows_to_frame(names, rows, path)
    plan = ColumnPlan(sources={"gpu": "entity"})
    for col in names[1:]:
        target = DCGM_FIELDS.get(col)
        if target and target not in plan.sources:
            plan.sources[target] = col
    return build_frame(raw, plan, path, "dcgmi-dmon", interval_s)
