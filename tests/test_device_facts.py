"""Device facts (issue 43): every GPU-table layout of an nsys export is read and the two tables
merged; a lost-data table holding blobs is read; top-kernel shares are shares of the device's
kernel time; an unlisted GPU says so in the MFU line."""

from __future__ import annotations

import json
import shutil
import sqlite3
from pathlib import Path

import pytest

from synth import SynthTrace, training_loop
from tests.conftest import FIXTURES, run_cli
from traceforensics import load
from traceforensics.analysis.peaks import resolve_device_peak
from traceforensics.model.session import UNKNOWN_DEVICE, DeviceInfo

#: The legacy table as early-2021 exports wrote it (columns from the schema reference).
LEGACY_DDL = (
    "CREATE TABLE TARGET_INFO_CUDA_GPU (deviceId INTEGER, name TEXT, totalGlobalMem INTEGER,"
    " numMultiprocessors INTEGER, computeCapabilityMajor INTEGER,"
    " computeCapabilityMinor INTEGER, coreClockRate INTEGER)"
)
#: The OpenACC export's TARGET_INFO_GPU: deviceId and name, nothing else.
OPENACC_GPU = [
    "CREATE TABLE g2 (deviceId INTEGER, name TEXT)",
    "INSERT INTO g2 SELECT id, iif(id < 2, 'NVIDIA GeForce RTX 3080', name) FROM TARGET_INFO_GPU",
    "DROP TABLE TARGET_INFO_GPU",
    "ALTER TABLE g2 RENAME TO TARGET_INFO_GPU",
]


def _export(
    tmp_path: Path, sqls: list[str], params: list[tuple[object, ...]] | None = None
) -> Path:
    """The modern fixture (two H100s and a non-CUDA adapter, id 2) changed by ``sqls``; each
    ``?`` statement takes the next of ``params``."""
    path = tmp_path / "export.sqlite"
    shutil.copyfile(FIXTURES / "nsys" / "modern.sqlite", path)
    args = iter(params or [])
    with sqlite3.connect(path) as conn:
        for sql in sqls:
            conn.execute(sql, next(args) if "?" in sql else ())
    return path


def _devices(path: Path) -> dict[int, DeviceInfo]:
    return {d.device: d for d in load(path, use_cache=False).meta.devices}


def test_modern_layout(tmp_path: Path) -> None:
    devs = _devices(_export(tmp_path, []))
    assert sorted(devs) == [0, 1]  # the Intel adapter (no SMs, capability 0) is not a GPU
    d = devs[0]
    assert (d.name, d.sm_count, d.compute_capability) == ("NVIDIA H100 80GB HBM3", 132, "9.0")
    assert (d.memory_bytes, d.clock_khz) == (85_000_000_000, 1_980_000)
    assert resolve_device_peak(d).sku == "h100_sxm"


def test_openacc_layout_device_id_and_name_only(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """``TARGET_INFO_GPU(deviceId, name)``: the key is ``deviceId``; the name resolves a peak
    by itself (no SM columns, so every row is kept)."""
    path = _export(tmp_path, OPENACC_GPU)
    devs = _devices(path)
    # nothing tells the Intel adapter (id 2) from a GPU here: kept, named as listed
    assert {d.name for d in devs.values()} == {
        "NVIDIA GeForce RTX 3080",
        "Intel(R) Iris(R) Xe Graphics",
    }
    assert devs[2].name.startswith("Intel")
    assert devs[0].sm_count is None and devs[0].compute_capability is None
    peak = resolve_device_peak(devs[0])
    assert (peak.sku, peak.how) == ("rtx_3080", "name")
    code, out, err = run_cli(["analyze", str(path), "--json", "--no-cache"], capsys)
    assert code == 0, err
    doc = json.loads(out)
    assert {d["name"] for d in doc["devices"]} == {"NVIDIA GeForce RTX 3080"}
    assert {p["sku"] for p in doc["peaks"] if p["device"] in (0, 1)} == {"rtx_3080"}


def test_both_tables_merge_by_device_id(tmp_path: Path) -> None:
    """The newer table names the GPU, the legacy one has its SMs, capability and memory: the
    device gets all of them; a device only the legacy table lists is kept too."""
    legacy = [
        LEGACY_DDL,
        "INSERT INTO TARGET_INFO_CUDA_GPU VALUES (?, ?, ?, ?, ?, ?, ?)",
        "INSERT INTO TARGET_INFO_CUDA_GPU VALUES (?, ?, ?, ?, ?, ?, ?)",
        "INSERT INTO TARGET_INFO_CUDA_GPU VALUES (?, ?, ?, ?, ?, ?, ?)",
    ]
    rows: list[tuple[object, ...]] = [
        (0, "legacy name loses", 10_737_418_240, 68, 8, 6, 1_710_000),
        (1, None, 10_737_418_240, 68, 8, 6, 1_710_000),
        (5, "NVIDIA GeForce RTX 2080 Ti", 11_554_586_624, 68, 7, 5, 1_545_000),
    ]
    devs = _devices(_export(tmp_path, [*OPENACC_GPU, *legacy], rows))
    # the legacy table lists CUDA GPUs: the adapter only the newer one lists (id 2) is dropped
    assert sorted(devs) == [0, 1, 5]
    for dev in (0, 1):
        d = devs[dev]
        assert d.name == "NVIDIA GeForce RTX 3080"  # the newer table's text name wins
        assert (d.sm_count, d.compute_capability, d.memory_bytes) == (68, "8.6", 10_737_418_240)
        assert d.clock_khz == 1_710_000  # legacy kHz kept as kHz
    assert (devs[5].name, devs[5].sm_count, devs[5].compute_capability) == (
        "NVIDIA GeForce RTX 2080 Ti",
        68,
        "7.5",
    )
    assert resolve_device_peak(devs[5]).sku == "rtx_2080_ti"


def test_merge_fills_a_missing_name_and_capability_as_one_field(tmp_path: Path) -> None:
    """The newer table has SMs but no name and no capability; the legacy one names the GPU and
    gives its capability (major and minor from one table, never mixed)."""
    sqls = [
        "UPDATE TARGET_INFO_GPU SET name = NULL, chipName = 'GH100', computeMajor = NULL,"
        " computeMinor = 7",
        LEGACY_DDL,
        "INSERT INTO TARGET_INFO_CUDA_GPU VALUES (?, ?, ?, ?, ?, ?, ?)",
    ]
    row = (0, "NVIDIA H100 80GB HBM3", 85_000_000_000, 132, 9, 0, 1_980_000)
    devs = _devices(_export(tmp_path, sqls, [row]))
    assert devs[0].name == "NVIDIA H100 80GB HBM3"  # a text name beats the chip name
    assert devs[0].compute_capability == "9.0"
    # device 1 has no capability anywhere and no legacy row: still a GPU (it has SMs)
    assert (devs[1].name, devs[1].compute_capability, devs[1].sm_count) == ("GH100", None, 132)


def test_unnamed_gpu_resolves_by_merged_shape(tmp_path: Path) -> None:
    """No name in either table: the SM count, capability and memory merged from both still
    choose the peak (by shape, marked as such)."""
    sqls = [
        "UPDATE TARGET_INFO_GPU SET name = NULL, smCount = NULL, totalMemory = NULL",
        LEGACY_DDL,
        "INSERT INTO TARGET_INFO_CUDA_GPU VALUES (?, ?, ?, ?, ?, ?, ?)",
    ]
    row = (0, None, 85_000_000_000, 132, 9, 0, 1_980_000)
    devs = _devices(_export(tmp_path, sqls, [row]))
    assert devs[0].name == UNKNOWN_DEVICE
    peak = resolve_device_peak(devs[0])
    assert (peak.sku, peak.how) == ("h100_sxm", "sm_count+cc")


@pytest.mark.parametrize(
    "texts",
    [
        [b"\x00\xff CUPTI: 3 events lost"],  # a blob alone, not UTF-8
        [b"buffer lost", "CUPTI: 12 records dropped"],  # a blob among text
        [3.5, b"\xff\xfe"],  # a number and an undecodable blob
    ],
)
def test_lost_data_table_with_blobs(
    tmp_path: Path, texts: list[object], capsys: pytest.CaptureFixture[str]
) -> None:
    """``DIAGNOSTIC_EVENT.text`` holding blobs or numbers is read as text (bytes that are not
    UTF-8 replaced, control characters blanked): exit 0, never an internal error."""
    sqls = [
        "DROP TABLE IF EXISTS DIAGNOSTIC_EVENT",
        "CREATE TABLE DIAGNOSTIC_EVENT (timestamp INTEGER, timestampType INTEGER,"
        " source INTEGER, severity INTEGER, text TEXT, globalPid INTEGER)",
        *["INSERT INTO DIAGNOSTIC_EVENT VALUES (0, 0, 0, 2, ?, 0)"] * len(texts),
    ]
    path = _export(tmp_path, sqls, [(t,) for t in texts])
    code, out, err = run_cli(["analyze", str(path), "--json", "--no-cache"], capsys)
    assert code == 0, err
    warnings = [w for w in json.loads(out)["warnings"] if w.startswith("nsys: ")]
    lossy = [t for t in texts if "lost" in str(t) or "dropped" in str(t)]
    assert len(warnings) == len(lossy)
    assert all(w.isprintable() for w in warnings), warnings
    if lossy:
        assert any("lost" in w for w in warnings)


# --------------------------------------------------------------------- top-kernel shares
def _overlapping() -> SynthTrace:
    """Three kernel names on two streams that overlap most of the time, plus a copy."""
    tr = SynthTrace()
    t = 0
    for i in range(5):
        tr.launch("gemm", t, 5_000, t + 10_000, 400_000, stream=7)
        tr.launch("attn", t + 6_000, 5_000, t + 20_000, 350_000, stream=9)
        tr.launch("norm", t + 12_000, 5_000, t + 30_000, 90_000 + i, stream=11)
        tr.launch("", t + 18_000, 5_000, t + 450_000, 20_000, kind="memcpy", copy_kind="h2d")
        t += 600_000
    return tr


def test_top_kernel_shares_are_shares_of_kernel_time(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    tr = _overlapping()
    path = tr.write_kineto(tmp_path / "t.json")
    # independent computation from the builder's own events
    per_name: dict[str, int] = {}
    for ev in tr.of_kind("kernel"):
        per_name[ev.name] = per_name.get(ev.name, 0) + ev.dur_ns
    kernel_ns = sum(per_name.values())
    busy_ns = sum(e - s for s, e in tr.busy_union())
    code, out, err = run_cli(["analyze", str(path), "--json", "--no-cache"], capsys)
    assert code == 0, err
    (dev,) = json.loads(out)["devices"]
    top = {k["name"]: k for k in dev["top_kernels"]}
    assert set(top) == set(per_name)
    for name, ns in per_name.items():
        assert top[name]["total_ns"] == ns
        assert top[name]["share_of_kernel_time"] == pytest.approx(ns / kernel_ns, abs=1e-6)
        assert top[name]["share_of_busy"] == pytest.approx(ns / busy_ns, abs=1e-6)
    assert sum(k["share_of_kernel_time"] for k in top.values()) == pytest.approx(1.0, abs=1e-5)
    # the overlap is real: the old share (of the busy union) passes 100% in sum
    assert sum(k["share_of_busy"] for k in top.values()) > 1.2
    # the text report lists the kernel-time shares
    code, text, err = run_cli(["analyze", str(path), "--no-cache"], capsys)
    assert code == 0, err
    lines = text[text.index("top kernels by total time") :].splitlines()[1:4]
    shown = [float(line.split()[2].rstrip("%")) for line in lines]
    expected = sorted((100 * ns / kernel_ns for ns in per_name.values()), reverse=True)
    assert shown == pytest.approx(expected, abs=0.051)


def test_top_kernel_shares_with_top_below_the_kernel_count(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """With ``--top 1`` the one share listed is still of all kernel time (not of the listed)."""
    tr = _overlapping()
    path = tr.write_kineto(tmp_path / "t.json")
    total = sum(ev.dur_ns for ev in tr.of_kind("kernel"))
    gemm = sum(ev.dur_ns for ev in tr.of_kind("kernel") if ev.name == "gemm")
    code, out, err = run_cli(["analyze", str(path), "--json", "--no-cache", "--top", "1"], capsys)
    assert code == 0, err
    (k,) = json.loads(out)["devices"][0]["top_kernels"]
    assert k["name"] == "gemm" and k["share_of_kernel_time"] == pytest.approx(gemm / total)


# --------------------------------------------------------------------- unknown GPU, MFU line
def test_unlisted_gpu_says_so_in_the_mfu_line(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = training_loop(device_name="Mystery GPU 9000", sm_count=999).write_kineto(
        tmp_path / "t.json"
    )
    code, text, err = run_cli(["analyze", str(path), "--no-cache"], capsys)
    assert code == 0, err
    assert "Mystery GPU 9000: not in the peak table, no peak known: pass --peak-tflops" in text
    code, out, err = run_cli(["analyze", str(path), "--json", "--no-cache"], capsys)
    peaks = json.loads(out)["peaks"]
    assert [(p["sku"], p["how"]) for p in peaks] == [(None, "unknown")]
    # a listed GPU names its datasheet on that line instead
    path = training_loop(device_name="NVIDIA GeForce RTX 2080 Ti", sm_count=68).write_kineto(
        tmp_path / "k.json"
    )
    code, text, err = run_cli(["analyze", str(path), "--no-cache"], capsys)
    assert code == 0 and "NVIDIA GeForce RTX 2080 Ti: NVIDIA Turing GPU Architecture" in text
