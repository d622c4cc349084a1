"""Read one ``ncu --csv`` report (details or raw page) into a frame of launches (package doc).

Rows of the result: one per profiled launch, in the report's ``ID`` order; every figure null
where the report does not hold it (a DRAM figure is not measured on every GPU family).
Percentages are of peak (0-100), durations integer ns. ``process_id`` and ``device`` are the
report's ``Process ID`` and ``Device`` columns (null where absent): ``ncu --target-processes
all`` puts every process's launches in one ``ID`` order.

Units decide what a value is: a ``*_pct`` figure is taken only from a value in ``%`` (or with
no unit), so ``--set full``'s "Memory Throughput" in ``Gbyte/second`` (Memory Workload
Analysis section) never stands in for the percentage; a value from a Speed Of Light section
wins over the same label elsewhere. A duration in an unknown unit is left out.
"""

from __future__ import annotations

import csv
import io
from pathlib import Path
from typing import Final

import polars as pl

from traceforensics.model.errors import UnsupportedFormatError

#: Columns of ``read_ncu_csv``'s frame.
NCU_SCHEMA: Final[dict[str, pl.DataType]] = {
    "ncu_id": pl.Int64(),
    "kernel": pl.String(),
    "block": pl.String(),
    "grid": pl.String(),
    "process_id": pl.Int64(),
    "device": pl.Int64(),
    "duration_ns": pl.Int64(),
    "sm_pct": pl.Float64(),
    "mem_pct": pl.Float64(),
    "dram_pct": pl.Float64(),
    "achieved_occupancy_pct": pl.Float64(),
    "theoretical_occupancy_pct": pl.Float64(),
    "waves_per_sm": pl.Float64(),
}
#: column -> position in a launch row
_AT: Final = {name: i for i, name in enumerate(NCU_SCHEMA)}
#: details-page metric labels (every ncu version's) -> figure
LABELS: Final[dict[str, str]] = {
    "Compute (SM) Throughput": "sm_pct",
    "Compute (SM) [%]": "sm_pct",
    "SM [%]": "sm_pct",
    "Memory Throughput": "mem_pct",
    "Memory [%]": "mem_pct",
    "DRAM Throughput": "dram_pct",
    "Duration": "duration_ns",
    "Achieved Occupancy": "achieved_occupancy_pct",
    "Theoretical Occupancy": "theoretical_occupancy_pct",
    "Waves Per SM": "waves_per_sm",
}
#: raw-page counter names -> figure
COUNTERS: Final[dict[str, str]] = {
    "sm__throughput.avg.pct_of_peak_sustained_elapsed": "sm_pct",
    "gpu__compute_memory_throughput.avg.pct_of_peak_sustained_elapsed": "mem_pct",
    "gpu__dram_throughput.avg.pct_of_peak_sustained_elapsed": "dram_pct",
    "dram__throughput.avg.pct_of_peak_sustained_elapsed": "dram_pct",
    "gpu__time_duration.sum": "duration_ns",
    "sm__warps_active.avg.pct_of_peak_sustained_active": "achieved_occupancy_pct",
    "sm__maximum_warps_per_active_cycle_pct": "theoretical_occupancy_pct",
    "launch__waves_per_multiprocessor": "waves_per_sm",
}
#: duration units -> ns per unit
_NS_PER: Final[dict[str, float]] = {
    "ns": 1.0,
    "nsecond": 1.0,
    "us": 1e3,
    "usecond": 1e3,
    "ms": 1e6,
    "msecond": 1e6,
    "s": 1e9,
    "second": 1e9,
}
_IDS: Final = ("ID", "Kernel Name")
#: units a percentage of peak may carry (ncu writes ``%``; a raw page may leave it blank)
_PCT_UNITS: Final = ("%", "")


def read_ncu_csv(path: str | Path) -> pl.DataFrame:
    """The launches of the ncu CSV report at ``path`` (module docstring). Raises
    ``UnsupportedFormatError`` (one line naming the file) for a file that is not one."""
    p = Path(path)
    try:
        text = p.read_text(encoding="utf-8-sig", errors="replace")
    except OSError as exc:
        raise UnsupportedFormatError(f"{p}: cannot read it ({exc.strerror})") from exc
    try:
        rows = _table(text)
    except csv.Error as exc:  # a broken quote, a field past csv's size limit
        raise UnsupportedFormatError(f"{p}: not a readable CSV report ({exc})") from exc
    if not rows or not all(c in rows[0] for c in _IDS):
        raise UnsupportedFormatError(
            f"{p}: not an Nsight Compute CSV report (no ID and Kernel Name columns); "
            "write one with `ncu --csv ... > report.csv` (details or --page raw)"
        )
    head = rows[0]
    launches = _details(head, rows[1:]) if "Metric Name" in head else _raw(head, rows[1:])
    if not launches:
        raise UnsupportedFormatError(f"{p}: an Nsight Compute CSV report with no kernel rows")
    frame = pl.DataFrame([launches[k] for k in sorted(launches)], schema=NCU_SCHEMA, orient="row")
    return frame


def _table(text: str) -> list[list[str]]:
    """The CSV rows, ``==PROF==`` and other tool lines left out."""
    lines = [ln for ln in text.splitlines() if ln.startswith('"')]
    return [row for row in csv.reader(io.StringIO("\n".join(lines))) if row]


Launch = list[object]


def _new(row: dict[str, str]) -> Launch:
    out: Launch = [None] * len(NCU_SCHEMA)
    out[0] = _int(row.get("ID", ""))
    out[1] = row.get("Kernel Name", "")
    out[2] = row.get("Block Size") or None
    out[3] = row.get("Grid Size") or None
    out[_AT["process_id"]] = _int(row.get("Process ID", ""))
    out[_AT["device"]] = _int(row.get("Device", ""))
    return out


def _details(head: list[str], body: list[list[str]]) -> dict[int, Launch]:
    out: dict[int, Launch] = {}
    for values in body:
        row = dict(zip(head, values, strict=False))
        launch_id = _int(row.get("ID", ""))
        if launch_id is None:
            continue
        launch = out.setdefault(launch_id, _new(row))
        figure = LABELS.get(row.get("Metric Name", "").strip())
        if figure is None:
            continue
        section = row.get("Section Name", "").replace(" ", "").lower()
        # the Speed Of Light section's figure wins; another section's only fills a gap
        if "speedoflight" in section or launch[_AT[figure]] is None:
            _set(launch, figure, row.get("Metric Value", ""), row.get("Metric Unit", ""))
    return out


def _raw(head: list[str], body: list[list[str]]) -> dict[int, Launch]:
    units = body[0] if body and _int(body[0][0] if body[0] else "") is None else []
    out: dict[int, Launch] = {}
    for values in body[1 if units else 0 :]:
        row = dict(zip(head, values, strict=False))
        launch_id = _int(row.get("ID", ""))
        if launch_id is None:
            continue
        launch = out.setdefault(launch_id, _new(row))
        for col, (name, value) in enumerate(row.items()):
            figure = COUNTERS.get(name)
            if figure is not None:
                _set(launch, figure, value, units[col] if col < len(units) else "")
    return out


def _set(launch: Launch, figure: str, value: str, unit: str) -> None:
    """Set ``figure`` from ``value`` in ``unit`` (module docstring: a value in another unit
    than the figure's is left out)."""
    number, unit = _float(value), unit.strip()
    if number is None:
        return
    if figure == "duration_ns":
        if unit in _NS_PER or not unit:
            launch[_AT[figure]] = round(number * _NS_PER.get(unit, 1.0))
    elif not figure.endswith("_pct") or unit in _PCT_UNITS:
        launch[_AT[figure]] = number


def _float(value: str) -> float | None:
    """A report value (``"1,234.56"``) as a float; None when it is not a number."""
    try:
        return float(value.replace(",", "").strip())
    except ValueError:
        return None


def _int(value: str) -> int | None:
    number = _float(value)
    return None if number is None or not number.is_integer() else int(number)
