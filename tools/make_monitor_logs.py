"""Generate monitoring logs in every supported format for every utilization pattern.

Deterministic (``--seed``). Each file holds GPU 0 with the named pattern and ordinary clock
behaviour (boost while busy, idle down-clocking when utilization falls), plus noise and a few
missing samples. The ``throttle`` scenario holds GPU 0 under steady load with a thermal
throttling window in the middle, and GPU 1 with a tidal load that only down-clocks when idle.
``manifest.json`` records the ground truth (pattern, throttle windows) for tests.

    python tools/make_monitor_logs.py OUTDIR [--seed 0]
"""

from __future__ import annotations

import argparse
import json
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import numpy.typing as npt

from traceforensics.analysis.utilization.patterns import PATTERNS as ALL_PATTERNS

F64 = npt.NDArray[np.float64]
START_EPOCH_S = 1_742_551_200  # 2025-03-21 10:00:00 UTC
SM_CLOCK_MAX_MHZ = 1980.0
IDLE_CLOCK_MHZ = 345.0
POWER_LIMIT_W = 700.0
THERMAL_BITS = 0x20 | 0x40  # sw_thermal_slowdown | hw_thermal_slowdown
IDLE_BIT = 0x1


@dataclass
class Gpu:
    """One GPU's simulated samples (index i at time i * interval)."""

    util: F64
    mem: F64
    clock: F64
    temp: F64
    power: F64
    mask: npt.NDArray[np.int64]
    keep: npt.NDArray[np.bool_]  # False = sample missing from the log


def pattern_util(pattern: str, n: int, interval_s: float, rng: np.random.Generator) -> F64:
    t = np.arange(n) * interval_s
    noise = rng.normal(0.0, 2.5, n)
    if pattern == "high_frequency_sawtooth":  # 0.5 s period, 60% duty
        u = np.where((t % 0.5) < 0.3, 96.0, 3.0)
    elif pattern == "low_frequency_tidal":  # 60 s period, 2/3 busy
        u = np.where((t % 60.0) < 40.0, 95.0, 4.0)
    elif pattern == "persistent_half_saturation":
        u = np.full(n, 50.0) + rng.normal(0.0, 6.0, n)
    elif pattern == "sporadic_drops":
        u = np.full(n, 94.0)
        for at in rng.choice(np.arange(20, n - 20), size=5, replace=False):
            u[at : at + int(rng.integers(1, 3))] = 1.0
    elif pattern == "steady_high":
        u = np.full(n, 95.0)
    elif pattern == "idle":
        u = np.abs(rng.normal(0.5, 0.5, n))
        noise = np.zeros(n)
    else:
        raise ValueError(pattern)
    return np.clip(u + noise, 0.0, 100.0)


def simulate(
    pattern: str,
    n: int,
    interval_s: float,
    rng: np.random.Generator,
    throttle: tuple[int, int] | None = None,
    leak_mib: float = 0.0,
) -> Gpu:
    util = pattern_util(pattern, n, interval_s, rng)
    # boost clock while busy; below 20% the clock follows utilization down (idle down-clocking)
    clock = np.where(util >= 20.0, SM_CLOCK_MAX_MHZ, IDLE_CLOCK_MHZ + util / 20.0 * 600.0)
    clock = clock + rng.normal(0.0, 8.0, n)
    temp = 40.0 + 0.32 * util + rng.normal(0.0, 1.0, n)
    power = 70.0 + 5.3 * util + rng.normal(0.0, 6.0, n)
    mask = np.where(util < 5.0, IDLE_BIT, 0).astype(np.int64)
    if throttle is not None:
        a, b = throttle
        clock[a:b] = 0.72 * SM_CLOCK_MAX_MHZ + rng.normal(0.0, 8.0, b - a)
        temp[a:b] = 88.0 + rng.normal(0.0, 0.5, b - a)
        mask[a:b] = THERMAL_BITS
    mem = 40_000.0 + np.linspace(0.0, leak_mib, n) + rng.normal(0.0, 4.0, n)
    keep = rng.random(n) >= 0.01
    if throttle is not None:
        keep[throttle[0] : throttle[1]] = True  # keep the window whole so the truth is exact
    return Gpu(util, mem, np.maximum(clock, 100.0), temp, power, mask, keep)


def _ts(i: int, interval_s: float, sep: str = "-") -> str:
    secs = START_EPOCH_S + i * interval_s
    whole = int(secs)
    ms = round((secs - whole) * 1000)
    import time

    st = time.gmtime(whole)
    return (
        f"{st.tm_year}{sep}{st.tm_mon:02d}{sep}{st.tm_mday:02d} "
        f"{st.tm_hour:02d}:{st.tm_min:02d}:{st.tm_sec:02d}.{ms:03d}"
    )


def _ticks(gpus: list[Gpu]) -> list[tuple[int, int, Gpu]]:
    n = gpus[0].util.size
    return [(i, g, gpu) for i in range(n) for g, gpu in enumerate(gpus) if gpu.keep[i]]


def write_smi_csv(path: Path, gpus: list[Gpu], interval_s: float, units: bool) -> None:
    u: Callable[[str], str] = (lambda s: f" {s}") if units else (lambda s: "")
    lines = [
        "timestamp, index, utilization.gpu [%], utilization.memory [%], memory.used [MiB], "
        "clocks.sm [MHz], clocks.max.sm [MHz], temperature.gpu, power.draw [W], "
        "power.limit [W], clocks_throttle_reasons.active"
    ]
    for i, g, x in _ticks(gpus):
        power = "[N/A]" if i % 97 == 13 else f"{x.power[i]:.2f}{u('W')}"
        lines.append(
            f"{_ts(i, interval_s, '/')}, {g}, {x.util[i]:.0f}{u('%')}, "
            f"{x.util[i] / 2:.0f}{u('%')}, "
            f"{x.mem[i]:.0f}{u('MiB')}, {x.clock[i]:.0f}{u('MHz')}, "
            f"{SM_CLOCK_MAX_MHZ:.0f}{u('MHz')}, {x.temp[i]:.0f}, {power}, "
            f"{POWER_LIMIT_W:.2f}{u('W')}, 0x{x.mask[i]:016x}"
        )
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")


def write_smi_dmon(path: Path, gpus: list[Gpu], interval_s: float) -> None:
    head = [
        "#Date       Time        gpu   pwr  gtemp  mtemp     sm    mem    enc    dec   mclk   pclk",
        "#YYYYMMDD   HH:MM:SS    Idx     W      C      C      %      %      %      %    MHz    MHz",
    ]
    lines: list[str] = []
    for k, (i, g, x) in enumerate(_ticks(gpus)):
        if k % 40 == 0:
            lines.extend(head)
        ts = _ts(i, interval_s, "")[:-4]
        lines.append(
            f" {ts}  {g:5d} {x.power[i]:5.0f} {x.temp[i]:6.0f}      - {x.util[i]:6.0f} "
            f"{x.util[i] / 2:6.0f}      0      0   2619 {x.clock[i]:6.0f}"
        )
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")


def write_dcgmi(path: Path, gpus: list[Gpu], interval_s: float) -> None:
    lines = ["#Entity   GPUTL  SMACT  TENSO  SMCLK  TMPTR  POWER  FBUSD", "ID"]
    for i, g, x in _ticks(gpus):
        power = "N/A" if i % 89 == 7 else f"{x.power[i]:.3f}"
        lines.append(
            f"GPU {g}     {x.util[i]:5.0f}  {x.util[i] / 110:.3f}  {x.util[i] / 300:.3f}  "
            f"{x.clock[i]:5.0f}  {x.temp[i]:5.0f}  {power}  {x.mem[i]:.0f}"
        )
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")


def write_table_zh(path: Path, gpus: list[Gpu], interval_s: float) -> None:
    lines = ["时间戳 卡号 GPU利用率(%) 显存占用(MB) SM时钟(MHz) 温度(°C) 功耗(W)"]
    for i, g, x in _ticks(gpus):
        lines.append(
            f"{_ts(i, interval_s)} {g} {x.util[i]:.1f} {x.mem[i]:.0f} {x.clock[i]:.0f} "
            f"{x.temp[i]:.0f} {x.power[i]:.1f}"
        )
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")


def write_table_custom(path: Path, gpus: list[Gpu], interval_s: float) -> None:
    """Headers no alias knows: needs ``--columns`` (see ``CUSTOM_COLUMNS``)."""
    lines = ["when,card,busy,clk,heat,watts"]
    for i, g, x in _ticks(gpus):
        lines.append(
            f"{START_EPOCH_S + i * interval_s:.3f},{g},{x.util[i]:.1f},{x.clock[i]:.0f},"
            f"{x.temp[i]:.0f},{x.power[i]:.1f}"
        )
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")


CUSTOM_COLUMNS = "time=when,gpu=card,util=busy,sm_clock=clk,temperature=heat,power=watts"
#: every pattern a generated log can show (not "irregular" or "insufficient_data")
PATTERNS = tuple(p for p in ALL_PATTERNS if p not in ("irregular", "insufficient_data"))
# format -> (file suffix, writer, has timestamps, fastest interval it can sample at)
FORMATS: dict[str, tuple[str, Callable[[Path, list[Gpu], float], None], bool, float]] = {
    "smi_csv": ("csv", lambda p, g, i: write_smi_csv(p, g, i, True), True, 0.1),
    "smi_csv_nounits": ("csv", lambda p, g, i: write_smi_csv(p, g, i, False), True, 0.1),
    "smi_dmon": ("txt", write_smi_dmon, True, 1.0),
    "dcgmi": ("txt", write_dcgmi, False, 0.1),
    "table_zh": ("txt", write_table_zh, True, 0.1),
    "table_custom": ("csv", write_table_custom, True, 0.1),
}


def generate(out: Path, seed: int = 0, n: int = 600) -> list[dict[str, Any]]:
    """Write every (format, pattern) log plus the throttle scenario; return the manifest."""
    out.mkdir(parents=True, exist_ok=True)
    manifest: list[dict[str, Any]] = []
    for fmt, (suffix, writer, _stamped, fastest) in FORMATS.items():
        for k, pattern in enumerate((*PATTERNS, "throttle")):
            interval = 0.1 if pattern == "high_frequency_sawtooth" else 1.0
            if interval < fastest:
                continue  # e.g. nvidia-smi dmon cannot sample faster than 1 s
            rng = np.random.default_rng(seed * 1000 + k)
            truth: dict[str, Any]
            if pattern == "throttle":
                window = (n // 2 - 60, n // 2 + 60)
                gpus = [
                    simulate("steady_high", n, interval, rng, throttle=window),
                    simulate("low_frequency_tidal", n, interval, rng),
                ]
                truth = {
                    "0": {
                        "pattern": "steady_high",
                        "throttle_s": [window[0] * interval, window[1] * interval],
                        "reason": "thermal",
                    },
                    "1": {"pattern": "low_frequency_tidal", "throttle_s": None},
                }
            else:
                leak = 3000.0 if pattern == "sporadic_drops" else 0.0
                gpus = [simulate(pattern, n, interval, rng, leak_mib=leak)]
                truth = {"0": {"pattern": pattern, "throttle_s": None, "leak_mib": leak}}
            path = out / f"{fmt}_{pattern}.{suffix}"
            writer(path, gpus, interval)
            manifest.append(
                {
                    "file": path.name,
                    "format": fmt,
                    "scenario": pattern,
                    "interval_s": interval,
                    "columns": CUSTOM_COLUMNS if fmt == "table_custom" else None,
                    "gpus": truth,
                }
            )
    (out / "manifest.json").write_text(json.dumps(manifest, indent=1), encoding="utf-8")
    return manifest


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("outdir", type=Path)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--samples", type=int, default=600)
    args = ap.parse_args()
    m = generate(args.outdir, args.seed, args.samples)
    print(f"wrote {len(m)} logs to {args.outdir}")


if __name__ == "__main__":
    main()
