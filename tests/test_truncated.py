"""Traces cut off mid-write (issue 10, salvage asked by issue 12): a ``.json.gz`` or ``.json``
cut at any point after its first event is analysed up to its last complete event, with a
warning, exit 0; its busy time equals that of the complete events before the cut, found here
independently (the standard library's incremental decoder walks the events one by one)."""

from __future__ import annotations

import gzip
import json
import zlib
from pathlib import Path
from typing import Any

import pytest

from tests.conftest import ROOT, run_cli, shared_trace

SAMPLE = ROOT / "examples" / "synthetic_training.pt.trace.json.gz"
FRACTIONS = [0.12, 0.3, 0.5, 0.77, 0.95, 0.999]


def _complete_prefix(text: str) -> dict[str, Any]:
    """The trace holding only the events that are whole in ``text`` (a cut JSON object)."""
    key = text.index('"traceEvents"')
    top = json.loads(text[:key].rstrip().rstrip(",") + "}")
    dec = json.JSONDecoder()
    pos = text.index("[", key) + 1
    events: list[Any] = []
    while True:
        while pos < len(text) and text[pos] in " \t\r\n,":
            pos += 1
        if pos >= len(text) or text[pos] == "]":
            break
        try:
            event, pos = dec.raw_decode(text, pos)
        except json.JSONDecodeError:
            break  # the cut event
        events.append(event)
    return {**top, "traceEvents": events}


def _analyse(path: Path, capsys: pytest.CaptureFixture[str]) -> dict[str, Any]:
    code, out, err = run_cli(["analyze", str(path), "--json", "--no-cache"], capsys)
    assert code == 0, err
    doc: dict[str, Any] = json.loads(out)
    return doc


def _cut_text(raw: bytes, at: int, gz: bool) -> str:
    """What a reader of the first ``at`` bytes can decompress (the reference's own gunzip)."""
    if not gz:
        return raw[:at].decode()
    return zlib.decompressobj(wbits=31).decompress(raw[:at]).decode()


def _check_cut(
    raw: bytes, at: int, gz: bool, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    suffix = ".json.gz" if gz else ".json"
    cut = tmp_path / f"cut{suffix}"
    cut.write_bytes(raw[:at])
    got = _analyse(cut, capsys)
    notes = [w for w in got["warnings"] if "cut off" in w or "ends early" in w]
    assert len(notes) == 1 and str(cut) in notes[0], got["warnings"]
    # a cut inside the events is coded as such; only the gzip trailer missing is a plain warning
    codes = {d["message"]: d["code"] for d in got["diagnostics"]}
    assert codes[notes[0]] == ("trace_truncated" if "cut off" in notes[0] else "warning")
    reference = tmp_path / "reference.json"
    reference.write_text(json.dumps(_complete_prefix(_cut_text(raw, at, gz))))
    want = _analyse(reference, capsys)
    assert len(got["devices"]) == len(want["devices"]) >= 1
    for g, w in zip(got["devices"], want["devices"], strict=True):
        for key in ("busy_ns", "window_ns", "idle_by_cause", "kernel_count", "memcpy_count"):
            assert g[key] == w[key], (at, key)


@pytest.mark.parametrize("gz", [True, False], ids=["json.gz", "json"])
@pytest.mark.parametrize("fraction", FRACTIONS)
def test_cut_sample_is_analysed_to_its_last_complete_event(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], gz: bool, fraction: float
) -> None:
    raw = SAMPLE.read_bytes() if gz else gzip.decompress(SAMPLE.read_bytes())
    _check_cut(raw, int(len(raw) * fraction), gz, tmp_path, capsys)


def test_cut_in_the_keys_after_the_event_list_keeps_every_event(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    text = gzip.decompress(SAMPLE.read_bytes())
    at = text.rindex(b'"traceName"') + 5  # inside the key that follows the list
    cut = tmp_path / "cut.json"
    cut.write_bytes(text[:at])
    whole = tmp_path / "whole.json"
    whole.write_bytes(text)
    got, want = _analyse(cut, capsys), _analyse(whole, capsys)
    assert any("cut off" in w for w in got["warnings"])
    assert [d["code"] for d in got["diagnostics"] if "cut off" in d["message"]] == [
        "trace_truncated"
    ]
    assert [d["busy_ns"] for d in got["devices"]] == [d["busy_ns"] for d in want["devices"]]


def test_cut_real_trace(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    raw = shared_trace("hta/alexnet_a100_sync.json.gz").read_bytes()
    _check_cut(raw, int(len(raw) * 0.6), True, tmp_path, capsys)


@pytest.mark.parametrize(
    "case",
    ["before the first event", "damage in the middle", "corrupt gzip"],
)
def test_what_cannot_be_salvaged_is_refused(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], case: str
) -> None:
    text = gzip.decompress(SAMPLE.read_bytes())
    if case == "before the first event":
        data, words = text[: text.index(b'"traceEvents"') + 20], "truncated"
    elif case == "damage in the middle":
        mid = text.index(b"},", len(text) // 2) + 1  # between two events, not in a string
        data, words = text[:mid] + b"@@@" + text[mid:], "damaged"
    else:
        gz = bytearray(SAMPLE.read_bytes())
        gz[len(gz) // 2 : len(gz) // 2 + 64] = bytes(64)
        data, words = bytes(gz), "corrupt"
    path = tmp_path / ("t.json.gz" if case == "corrupt gzip" else "t.json")
    path.write_bytes(data)
    code, out, err = run_cli(["analyze", str(path), "--no-cache"], capsys)
    assert code == 2 and out == "", err
    assert len(err.strip().splitlines()) == 1 and words in err, err
