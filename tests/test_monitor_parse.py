"""Monitor-log parsing: every format, cross-checked against the raw text read by plain Python."""

from __future__ import annotations

import calendar
import time
from pathlib import Path

import polars as pl
import pytest

from traceforensics.ingest.monitor import MONITOR_SCHEMA, load_monitor_log, sniff_monitor_format
from traceforensics.model.errors import InputError, OptionError

FIXTURE = Path(__file__).parent / "fixtures" / "monitor" / "runbook_zh_1hz.txt"


def _epoch_ns(text: str, fmt: str) -> int:
    return calendar.timegm(time.strptime(text, fmt)) * 1_000_000_000


def test_chinese_runbook_log_matches_raw_text() -> None:
    log = load_monitor_log(FIXTURE)
    assert dict(log.frame.schema) == MONITOR_SCHEMA
    assert log.time_kind == "absolute"
    lines = FIXTURE.read_text(encoding="utf-8").splitlines()[1:]
    rows = [ln.split() for ln in lines]
    f = log.frame
    assert f.height == len(rows) == 6
    assert f.get_column("util_pct").to_list() == [float(r[2]) for r in rows]
    assert f.get_column("mem_used_mib").to_list() == [float(r[3]) for r in rows]
    assert f.get_column("sm_clock_mhz").to_list() == [float(r[4]) for r in rows]
    assert f.get_column("temperature_c").to_list() == [float(r[5]) for r in rows]
    want_t = [_epoch_ns(f"{r[0]} {r[1]}", "%Y-%m-%d %H:%M:%S") for r in rows]
    assert f.get_column("time_ns").to_list() == want_t
    assert f.get_column("power_w").null_count() == 6  # not in the log: null, never invented


def test_gbk_encoded_chinese_log(tmp_path: Path) -> None:
    p = tmp_path / "gbk.txt"
    p.write_bytes(FIXTURE.read_text(encoding="utf-8").encode("gb18030"))
    assert load_monitor_log(p).frame.get_column("util_pct").to_list()[0] == 98.2


SMI_UNITS = """timestamp, index, utilization.gpu [%], memory.used [MiB], clocks.current.sm [MHz], \
power.draw [W], clocks_event_reasons.sw_power_cap, clocks_event_reasons.hw_thermal_slowdown
2025/03/21 10:00:01.500, 0, 98 %, 21432 MiB, 1410 MHz, 250.12 W, Active, Not Active
2025/03/21 10:00:01.500, 1, 45 %, 100 MiB, 1980 MHz, [N/A], Not Active, Active
timestamp, index, utilization.gpu [%], memory.used [MiB], clocks.current.sm [MHz], \
power.draw [W], clocks_event_reasons.sw_power_cap, clocks_event_reasons.hw_thermal_slowdown
2025/03/21 10:00:02.500, 0, N/A, 2048 MiB, 1400 MHz, 251 W, Not Active, Not Active
"""


def test_smi_csv_units_na_reason_columns_and_repeated_header(tmp_path: Path) -> None:
    p = tmp_path / "smi.csv"
    p.write_text(SMI_UNITS, encoding="utf-8")
    assert sniff_monitor_format(SMI_UNITS) == "nvidia-smi-csv"
    log = load_monitor_log(p)
    f = log.frame.sort("time_ns", "gpu")
    assert f.height == 3  # the repeated header line is not a sample
    assert f.get_column("gpu").to_list() == [0, 1, 0]
    assert f.get_column("util_pct").to_list() == [98.0, 45.0, None]
    assert f.get_column("mem_used_mib").to_list() == [21432.0, 100.0, 2048.0]
    assert f.get_column("sm_clock_mhz").to_list() == [1410.0, 1980.0, 1400.0]
    assert f.get_column("power_w").to_list() == [250.12, None, 251.0]
    assert f.get_column("throttle_reasons").to_list() == ["sw_power_cap", "hw_thermal_slowdown", ""]
    t0 = _epoch_ns("2025/03/21 10:00:01", "%Y/%m/%d %H:%M:%S") + 500_000_000
    assert f.get_column("time_ns").to_list() == [t0, t0, t0 + 1_000_000_000]


def test_smi_csv_nounits_hex_mask(tmp_path: Path) -> None:
    p = tmp_path / "smi.csv"
    p.write_text(
        "index, utilization.gpu [%], clocks.sm [MHz], clocks_throttle_reasons.active\n"
        "0, 97, 1200, 0x0000000000000024\n0, 2, 300, 0x0000000000000001\n0, 90, 1900, 0x0\n",
        encoding="utf-8",
    )
    log = load_monitor_log(p, interval_s=0.5)
    assert log.time_kind == "index"
    assert log.frame.get_column("time_ns").to_list() == [0, 500_000_000, 1_000_000_000]
    reasons = log.frame.get_column("throttle_reasons").to_list()
    assert reasons == ["sw_power_cap,sw_thermal_slowdown", "gpu_idle", ""]


_H1 = "#Date       Time        gpu   pwr  gtemp  mtemp     sm    mem    enc    dec   mclk   pclk"
_H2 = "#YYYYMMDD   HH:MM:SS    Idx     W      C      C      %      %      %      %    MHz    MHz"
SMI_DMON = f"""{_H1}
{_H2}
 20250321   23:59:59      0    43     48      -     98     40      0      0   877   1815
 20250321   23:59:59      1    40     45      -      -     40      0      0   877    345
{_H1}
{_H2}
 20250322   00:00:00      0    44     49      -     97     41      0      0   877   1810
"""


def test_smi_dmon_with_date_time_and_dashes(tmp_path: Path) -> None:
    p = tmp_path / "dmon.txt"
    p.write_text(SMI_DMON, encoding="utf-8")
    assert sniff_monitor_format(SMI_DMON) == "nvidia-smi-dmon"
    f = load_monitor_log(p).frame.sort("gpu", "time_ns")
    assert f.get_column("gpu").to_list() == [0, 0, 1]
    assert f.get_column("util_pct").to_list() == [98.0, 97.0, None]
    assert f.get_column("sm_clock_mhz").to_list() == [1815.0, 1810.0, 345.0]
    assert f.get_column("power_w").to_list() == [43.0, 44.0, 40.0]
    t = f.get_column("time_ns").to_list()
    assert t[1] - t[0] == 1_000_000_000  # crosses midnight into the next date
    assert t[0] == _epoch_ns("20250321 23:59:59", "%Y%m%d %H:%M:%S")


def test_smi_dmon_without_timestamps_uses_interval(tmp_path: Path) -> None:
    text = "# gpu   pwr  gtemp     sm   pclk\n# Idx     W      C      %    MHz\n"
    text += "".join(f"    0   {40 + i}     50     {i}   1500\n" for i in range(4))
    p = tmp_path / "dmon.txt"
    p.write_text(text, encoding="utf-8")
    log = load_monitor_log(p, interval_s=2.0)
    assert log.time_kind == "index"
    assert log.frame.get_column("time_ns").to_list() == [i * 2_000_000_000 for i in range(4)]
    assert log.frame.get_column("util_pct").to_list() == [0.0, 1.0, 2.0, 3.0]


DCGMI = """#Entity   GPUTL  SMACT  TENSO  1004  DCGM_FI_DEV_SM_CLOCK
ID
GPU 0     45     0.512  0.100  N/A   1410
GPU-I 3   10     0.1    0.0    N/A   1410
GPU 1     N/A    0.250  0.000  N/A   1980
"""


def test_dcgmi_dmon_tags_ids_and_entities(tmp_path: Path) -> None:
    p = tmp_path / "dcgm.txt"
    p.write_text(DCGMI, encoding="utf-8")
    assert sniff_monitor_format(DCGMI) == "dcgmi-dmon"
    f = load_monitor_log(p).frame.sort("gpu")
    assert f.get_column("gpu").to_list() == [0, 1]  # the MIG instance row is skipped
    assert f.get_column("util_pct").to_list() == [45.0, None]
    assert f.get_column("sm_active").to_list() == [0.512, 0.25]
    assert f.get_column("tensor_active").to_list() == [0.1, 0.0]  # TENSO wins over 1004
    assert f.get_column("sm_clock_mhz").to_list() == [1410.0, 1980.0]


def test_columns_mapping_and_errors(tmp_path: Path) -> None:
    p = tmp_path / "custom.csv"
    p.write_text("when,card,busy,clk\n1742551201.0,0,90,1800\n1742551202.0,0,10,400\n", "utf-8")
    # library errors name the remedy option (``columns``), never a CLI flag; the CLI adds it
    with pytest.raises(OptionError, match="column mapping") as err:
        load_monitor_log(p)
    assert err.value.option == "columns" and "--" not in str(err.value)
    log = load_monitor_log(p, columns="time=when,gpu=card,util=busy,sm_clock=clk")
    assert log.frame.get_column("util_pct").to_list() == [90.0, 10.0]
    assert log.frame.get_column("time_ns").to_list() == [1742551201 * 10**9, 1742551202 * 10**9]
    for bad in ("util=nope", "bogus=busy"):
        with pytest.raises(OptionError, match="column mapping") as err:
            load_monitor_log(p, columns=bad)
        assert err.value.option == "columns" and "--" not in str(err.value)


def test_bad_inputs_are_one_line_input_errors(tmp_path: Path) -> None:
    empty = tmp_path / "empty.txt"
    empty.write_text("", encoding="utf-8")
    for path in (empty, tmp_path / "missing.txt"):
        with pytest.raises(InputError) as err:
            load_monitor_log(path)
        assert "\n" not in str(err.value)
        assert str(path) in str(err.value)


def test_whitespace_table_with_spaced_units(tmp_path: Path) -> None:
    p = tmp_path / "t.txt"
    p.write_text("time util (%) power (W)\n10:00:00 50 100\n10:00:01 60 110\n", "utf-8")
    log = load_monitor_log(p)
    assert log.time_kind == "relative"
    assert log.frame.get_column("time_ns").to_list() == [0, 1_000_000_000]
    assert log.frame.select(pl.col("power_w")).to_series().to_list() == [100.0, 110.0]


def test_gpus_told_apart_by_uuid_when_no_index(tmp_path: Path) -> None:
    p = tmp_path / "smi.csv"
    p.write_text(
        "uuid, utilization.gpu [%]\nGPU-bbb, 10\nGPU-aaa, 20\nGPU-bbb, 30\n", encoding="utf-8"
    )
    f = load_monitor_log(p).frame
    # numbered by first appearance, not alphabetically
    assert f.get_column("gpu").to_list() == [0, 1, 0]
    assert f.get_column("util_pct").to_list() == [10.0, 20.0, 30.0]


def test_smi_dmon_violation_columns_name_reasons(tmp_path: Path) -> None:
    p = tmp_path / "dmon.txt"
    p.write_text(
        "# gpu    sm   pclk  pviol  tviol\n# Idx     %    MHz      %   bool\n"
        "    0    97   1300     40      0\n    0    96   1980      0      0\n"
        "    0    98   1200      0      1\n",
        encoding="utf-8",
    )
    reasons = load_monitor_log(p).frame.get_column("throttle_reasons").to_list()
    assert reasons == ["power_violation", "", "thermal_violation"]
