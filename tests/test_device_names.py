"""Device names (issue 10): every layout an export or a trace uses is read, and a GPU the input
does not name is called "unknown", never an empty string or a dash."""

from __future__ import annotations

import gzip
import json
import shutil
import sqlite3
from pathlib import Path

import pytest

from tests.conftest import FIXTURES, run_cli, shared_trace
from traceforensics import load
from traceforensics.model.session import UNKNOWN_DEVICE

LAYOUTS = {
    # name declared INTEGER, holding a StringIds id (older exports)
    "name as string id": (
        [
            "INSERT INTO StringIds (id, value) VALUES (990001, 'NVIDIA GeForce RTX 3080')",
            "CREATE TABLE g2 (id INTEGER, name INTEGER, smCount INTEGER, computeMajor INTEGER,"
            " computeMinor INTEGER)",
            "INSERT INTO g2 SELECT id, 990001, smCount, computeMajor, computeMinor"
            " FROM TARGET_INFO_GPU",
            "DROP TABLE TARGET_INFO_GPU",
            "ALTER TABLE g2 RENAME TO TARGET_INFO_GPU",
        ],
        "NVIDIA GeForce RTX 3080",
    ),
    # a nameId column instead of name
    "nameId column": (
        [
            "INSERT INTO StringIds (id, value) VALUES (990001, 'NVIDIA GeForce RTX 3080')",
            "CREATE TABLE g2 (id INTEGER, nameId INTEGER, smCount INTEGER)",
            "INSERT INTO g2 SELECT id, 990001, smCount FROM TARGET_INFO_GPU",
            "DROP TABLE TARGET_INFO_GPU",
            "ALTER TABLE g2 RENAME TO TARGET_INFO_GPU",
        ],
        "NVIDIA GeForce RTX 3080",
    ),
    "empty name, chip name": (["UPDATE TARGET_INFO_GPU SET name='', chipName='GA102'"], "GA102"),
    "no name at all": (["UPDATE TARGET_INFO_GPU SET name=NULL, chipName=NULL"], UNKNOWN_DEVICE),
    "blank name": (["UPDATE TARGET_INFO_GPU SET name='   ', chipName=''"], UNKNOWN_DEVICE),
    # a minimal layout (id, name): no SM / capability columns to tell adapters apart
    "id and name only": (
        [
            "CREATE TABLE g2 AS SELECT id, name FROM TARGET_INFO_GPU",
            "DROP TABLE TARGET_INFO_GPU",
            "ALTER TABLE g2 RENAME TO TARGET_INFO_GPU",
            "UPDATE TARGET_INFO_GPU SET name='NVIDIA GeForce RTX 3080'",
        ],
        "NVIDIA GeForce RTX 3080",
    ),
}


@pytest.mark.parametrize("case", list(LAYOUTS))
def test_nsys_device_name_layouts(
    tmp_path: Path, case: str, capsys: pytest.CaptureFixture[str]
) -> None:
    sqls, expected = LAYOUTS[case]
    path = tmp_path / "export.sqlite"
    shutil.copyfile(FIXTURES / "nsys" / "modern.sqlite", path)
    with sqlite3.connect(path) as conn:
        for sql in sqls:
            conn.execute(sql)
    meta = load(path, use_cache=False).meta
    assert [d.name for d in meta.devices if d.device < 2] == [expected, expected], case
    code, out, err = run_cli(["analyze", str(path), "--json", "--no-cache"], capsys)
    assert code == 0, err
    assert {d["name"] for d in json.loads(out)["devices"]} == {expected}
    code, text, err = run_cli(["analyze", str(path), "--no-cache"], capsys)
    assert code == 0 and f"GPU 0 · {expected}" in text, text


def test_kineto_blank_and_missing_names_read_unknown(tmp_path: Path) -> None:
    """A ROCm-style ``deviceProperties`` entry with ``name: ""`` and a device seen only in events
    are both "unknown"; a real name is kept with its whitespace collapsed."""
    events = [
        {
            "ph": "X",
            "cat": "kernel",
            "name": "k",
            "pid": dev,
            "tid": 7,
            "ts": 10.0 * i,
            "dur": 5.0,
            "args": {"device": dev, "stream": 7, "correlation": i},
        }
        for i, dev in enumerate([0, 1, 9])
    ]
    props = [{"id": 0, "name": ""}, {"id": 1, "name": "  AMD Instinct\tMI300X "}]
    path = tmp_path / "t.json"
    path.write_text(json.dumps({"deviceProperties": props, "traceEvents": events}))
    names = {d.device: d.name for d in load(path, use_cache=False).meta.devices}
    assert names == {0: UNKNOWN_DEVICE, 1: "AMD Instinct MI300X", 9: UNKNOWN_DEVICE}


@pytest.mark.parametrize(
    "rel", ["tracelens/vllm_decode_cudagraph_rocm.json.gz", "tracelens/bert_small_mi300x.json.gz"]
)
def test_real_rocm_traces_name_every_device(rel: str, capsys: pytest.CaptureFixture[str]) -> None:
    path = shared_trace(rel)
    with gzip.open(path) as fh:
        with_props = {p.get("id"): p.get("name") for p in json.load(fh)["deviceProperties"]}
    code, out, err = run_cli(["analyze", str(path), "--json", "--no-cache"], capsys)
    assert code == 0, err
    for d in json.loads(out)["devices"]:
        described = with_props.get(d["device"])
        assert d["name"] == (described or UNKNOWN_DEVICE), d
    code, text, _ = run_cli(["analyze", str(path), "--no-cache"], capsys)
    assert code == 0 and " · -" not in text and f"· {UNKNOWN_DEVICE}" in text
