"""One step detector for user annotations in both formats (issue 44, item 7).

A decode loop marks each of its 20 iterations with a user range ``decode_step``: on the host
(Kineto ``user_annotation`` / an NVTX range in nsys) and, in Kineto only, on the GPU
(``gpu_user_annotation``, one per stream). Both exports of the same run give 20 steps with the
same device windows; before the change Kineto merged the 20 same-name GPU spans into 1 step.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

import polars as pl
import pytest

from synth import SynthTrace
from traceforensics.analysis import analyze
from traceforensics.analysis.steps import detect_steps
from traceforensics.ingest import load_path

US = 1_000
STEPS = 20


def decode_loop(*, gpu_ids: bool = False) -> SynthTrace:
    """20 ``decode_step`` ranges of 3 kernels each on two streams; a GPU annotation per stream
    per step spans that stream's kernels (with the host range's External id: ``gpu_ids``)."""
    tr = SynthTrace()
    t = 10 * US
    for i in range(STEPS):
        host = tr.cpu_range("decode_step", t, 300 * US, kind="annotation")
        ext = tr.events[host].external_id
        spans: dict[int, tuple[int, int]] = {}
        for k, stream in enumerate((7, 7, 9)):
            g0 = t + 40 * US + k * 60 * US
            tr.launch(f"decode_kernel_{k}", t + 20 * US + k * 60 * US, 5 * US, g0, 50 * US,
                      stream=stream)  # fmt: skip
            lo, hi = spans.get(stream, (g0, g0 + 50 * US))
            spans[stream] = (min(lo, g0), max(hi, g0 + 50 * US))
        for stream, (lo, hi) in spans.items():
            idx = tr.gpu_annotation("decode_step", lo, hi - lo, stream=stream)
            if gpu_ids:
                tr.events[idx].args["External id"] = ext
        t += 400 * US + (i % 3) * 25 * US
    return tr


def _steps(path: Path) -> list[tuple[str, int, int, str]]:
    res = analyze(load_path(path, use_cache=False))
    return [(s.name, s.start_ns, s.dur_ns, "") for s in res.idle.steps]


@pytest.mark.parametrize("gpu_ids", [False, True])
def test_twenty_decode_steps_in_both_formats(gpu_ids: bool, tmp_path: Path) -> None:
    tr = decode_loop(gpu_ids=gpu_ids)
    kineto = _steps(tr.write_kineto(tmp_path / "d.pt.trace.json.gz"))
    nsys = _steps(tr.write_nsys(tmp_path / "d.sqlite"))
    assert len(kineto) == STEPS
    assert len(nsys) == STEPS
    # same windows: the trace clock of both writers is the same (nsys rebased to its origin)
    k0, n0 = kineto[0][1], nsys[0][1]
    assert [(n, s - k0, d) for n, s, d, _ in kineto] == [(n, s - n0, d) for n, s, d, _ in nsys]


def _ranges(rows: Sequence[tuple[str, str, int, int, int | None]]) -> pl.DataFrame:
    return pl.DataFrame(
        {
            "kind": [r[0] for r in rows],
            "rank": [0] * len(rows),
            "device": [0 if r[0] == "gpu_annotation" else None for r in rows],
            "pid": [1] * len(rows),
            "name": [r[1] for r in rows],
            "start_ns": [r[2] for r in rows],
            "end_ns": [r[3] for r in rows],
            "external_id": [r[4] for r in rows],
        },
        schema_overrides={"device": pl.Int32, "rank": pl.Int32, "external_id": pl.Int64},
    )


def _detect(ranges: pl.DataFrame) -> list[tuple[str, int, int]]:
    launched = pl.LazyFrame(
        schema={
            "rank": pl.Int32,
            "device": pl.Int32,
            "l_pid": pl.Int64,
            "launch_start_ns": pl.Int64,
            "start_ns": pl.Int64,
            "end_ns": pl.Int64,
        }
    )
    schema = {"rank": pl.Int32, "device": pl.Int32, "dev": pl.Int64}
    devices = pl.DataFrame({"rank": [0], "device": [0], "dev": [0]}, schema=schema)
    steps = detect_steps(ranges, launched, devices, None, "annotation")
    return list(steps.select("name", "start_ns", "end_ns").iter_rows())


def test_external_id_is_the_instance() -> None:
    """Spans sharing an External id are one instance even when they do not overlap (two
    streams one after the other); distinct ids are distinct steps, same name or not."""
    rows = [
        ("annotation", "ProfilerStep#1", 0, 100, 1),
        ("annotation", "ProfilerStep#2", 100, 200, 2),
        ("gpu_annotation", "ProfilerStep#1", 10, 40, 1),
        ("gpu_annotation", "ProfilerStep#1", 50, 90, 1),  # stream 2, after stream 1's span
        ("gpu_annotation", "ProfilerStep#2", 110, 190, 2),
    ]
    assert _detect(_ranges(rows)) == [("ProfilerStep#1", 10, 90), ("ProfilerStep#2", 110, 190)]
    rows = [("gpu_annotation", "decode_step", 10 + 100 * i, 60 + 100 * i, 7 + i) for i in range(3)]
    assert len(_detect(_ranges(rows))) == 3


def test_a_name_the_host_records_once_stays_one_step() -> None:
    """Without ids, the per-stream spans of ``ProfilerStep#1`` (recorded once on the host) are
    one step even when they do not overlap."""
    rows = [
        ("annotation", "ProfilerStep#1", 0, 100, None),
        ("gpu_annotation", "ProfilerStep#1", 10, 40, None),
        ("gpu_annotation", "ProfilerStep#1", 50, 90, None),
    ]
    assert _detect(_ranges(rows)) == [("ProfilerStep#1", 10, 90)]
